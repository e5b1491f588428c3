"""aiayn.cpu: the CPU speed-ups of the paper's model, kept beside it and put in by one explicit step,
`prepare_for_cpu(model)` (prepare.py). The Translator applies it to every model it decodes with, the
trainer to the model it trains; the model package never imports this one.

  compute_types.py      float32, bfloat16, int8: the precision of the inference products, and their kernels
  prepared_weight.py    a weight's inference form (oneDNN-packed or W^T contiguous, bfloat16, int8), kept per version
  linear.py             PackedLinear, PackedInProjection: the layers' products through it
  output_projection.py  PackedOutputProjection: the logits' product through it
  dropout.py            FastDropout and its cheaper mask; mask_generator for training's worker threads
"""

from aiayn.cpu.compute_types import COMPUTE_TYPES, check_compute_type, supported_compute_types
from aiayn.cpu.prepare import compute_type_of, prepare_for_cpu, set_compute_type

__all__ = ["COMPUTE_TYPES", "check_compute_type", "compute_type_of", "prepare_for_cpu", "set_compute_type",
           "supported_compute_types"]
