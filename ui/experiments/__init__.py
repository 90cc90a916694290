"""The Experiments chapter: ablations and patches of heads, MLPs and edges (``settings`` parses them from a link), their controls, before/after figures, and the Attention page's head switch."""
