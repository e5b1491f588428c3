"""Data: corpora, Multi30k, the built-in synthetic task, the SentencePiece tokenizer, batching."""
