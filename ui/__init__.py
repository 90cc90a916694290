"""Streamlit glue for the explorer: cached resources, session state, shared widgets, figures.

Pages stay thin: widgets -> a cached helper here -> a pure figure function -> ``charts.show``
(``st.plotly_chart`` with a PNG file name and a CSV download).
No torch code lives in ``pages/``.
"""
