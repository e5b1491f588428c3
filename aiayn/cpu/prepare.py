"""prepare_for_cpu: the one step that puts the CPU speed-ups into a model built from aiayn.model.

The model stays the paper's: nn.Linear products, nn.Dropout, logits = h W^T + b. This swaps, in place, the
Transformer's pieces for subclasses that compute the same thing faster on a CPU (each measured in its
module's docstring):
  attention in_proj/out_proj, FFN w_1/w_2 -> PackedLinear / PackedInProjection (linear.py): inference
      products through oneDNN-packed weights or W^T kept contiguous
  the output projection `generator`      -> PackedOutputProjection (output_projection.py): the weight
      prepared once per version for decoding steps and scoring
  residual and embedding dropout         -> FastDropout (dropout.py): a quarter of torch's random draws
Every swapped module keeps the plain one's Parameters (state_dict keys and values, weight tying and
checkpoints unchanged); training products (autograd on) are torch's own, so only the dropout masks differ
from the plain model's. The RNN seq2seq is left as it is. Elsewhere than a float32 CPU each piece falls back
to torch's own product or mask, so preparing a model for a GPU is harmless. Preparing twice changes nothing.
"""

from torch import nn

from aiayn.cpu.dropout import FastDropout
from aiayn.cpu.linear import PackedInProjection, PackedLinear
from aiayn.cpu.output_projection import PackedOutputProjection
from aiayn.model.attention import MultiHeadAttention
from aiayn.model.feed_forward import PositionwiseFeedForward
from aiayn.model.transformer import DecoderLayer, EncoderLayer, Transformer


def prepare_for_cpu(model: nn.Module) -> nn.Module:
    """Swaps the fast modules into `model` (a Transformer, or anything holding some: an ensemble) in
    place and returns it."""
    for module in list(model.modules()):
        if isinstance(module, MultiHeadAttention):
            module.in_proj = PackedInProjection.of(module.in_proj)
            module.out_proj = PackedLinear.of(module.out_proj)
        elif isinstance(module, PositionwiseFeedForward):
            module.w_1, module.w_2 = PackedLinear.of(module.w_1), PackedLinear.of(module.w_2)
        elif isinstance(module, (EncoderLayer, DecoderLayer)):
            module.residual_dropout = FastDropout.of(module.residual_dropout)
        elif isinstance(module, Transformer):
            module.embed_dropout = FastDropout.of(module.embed_dropout)
            module.generator = PackedOutputProjection.of(module.generator)
    return model
