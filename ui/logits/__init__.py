"""The Logits & temperature chapter: the prompt's next-token logits, softmax at a temperature, the filter stages, and the drag-T playground (``frames``, ``playground`` + ``playground.js``)."""
