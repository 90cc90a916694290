"""The shareable link: every page's state read from and written to the URL (``links``), above all chapters."""
