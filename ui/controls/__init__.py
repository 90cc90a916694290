"""Widgets several pages share: the sampling controls, the experiment editor, the head switch, the checked prompt,
the example prompt."""
