"""The Quantization chapter: the GGUF file's blocks and codes (``blocks``), fp32 against 4-bit, read speed."""
