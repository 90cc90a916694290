"""What every chapter shares and no chapter owns: how a number is written (``format``), chart conventions, the chart
spec and the CSV export, the session's state registry, token texts in the display notation, the models this server
offers and the engine (or engine server) behind each (``models``, ``resources``), one cache helper (``lru``), and the
page shell: the page registry and navigation, the sidebar, presenter mode, how a chart is drawn, the picture and
example-prompt widgets, and the guarded Streamlit patches."""
