"""Seeing inside, in rooms by job:

- maps: capture every attention map, merge subwords into words, hard alignments, and render them as PNG
  grids, offline HTML, NPZ or JSON, or inline in a notebook; charts of the diagnostic tools;
- steps: one query of one head, one RNN decoder step, and the rest of a Transformer layer, step by step
  (the explorer's step view);
- alignment: gold word alignments, the alignment error rate, and which head aligns words;
- quality: the translation diagnostics (signals, thresholds, flags) and the input warnings;
- contributions: what each head and sublayer contributes (value-norm maps, ALTI+), source vs target-prefix shares.
"""
