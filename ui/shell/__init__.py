"""What every page shares: the page registry and its navigation, the sidebar, presenter mode, how a chart is drawn,
the models this server offers and the engines and servers loaded for them."""
