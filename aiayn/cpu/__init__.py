"""aiayn.cpu: the CPU speed-ups of the paper's model, kept beside it and put in by one explicit step,
`prepare_for_cpu(model)` (prepare.py). The Translator applies it to every model it decodes with, the
trainer to the model it trains; the model package never imports this one.

  prepared_weight.py    a weight's inference form (oneDNN-packed or W^T contiguous), kept per version
  linear.py             PackedLinear, PackedInProjection: the layers' products through it
  output_projection.py  PackedOutputProjection: the logits' product through it
  dropout.py            FastDropout and its cheaper mask; mask_generator for training's worker threads
"""

from aiayn.cpu.prepare import prepare_for_cpu

__all__ = ["prepare_for_cpu"]
