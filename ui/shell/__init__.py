"""The page shell every page shares: the page registry and navigation, the sidebar, presenter mode, how a chart is drawn, the picture and example-prompt widgets, and the guarded Streamlit patches."""
