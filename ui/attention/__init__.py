"""The Attention chapter: attention maps per layer and head, sinks and windows, the pronoun's heads against a rule-picked reference (``reference``)."""
