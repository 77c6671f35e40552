"""What the analyses read: parallel corpora, models (loading, GGUF, packaged), per-layer representations."""
