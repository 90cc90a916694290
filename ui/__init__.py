"""Streamlit glue for the explorer: cached resources, session state, shared widgets, figures.

Pages stay thin: widgets -> a cached helper here -> a pure figure function -> st.plotly_chart.
No torch code lives in ``pages/``.
"""
