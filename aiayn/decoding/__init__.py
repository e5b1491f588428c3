"""Decoding: greedy, batched beam search, sampling, and the Translator. Sees models only through
their interface (encode, init_state, decode_step, state.select)."""
