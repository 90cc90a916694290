"""The Overview chapter: the whole path of one prompt through the model on one picture, each stage linking to its page."""
