"""The Transformer's output projection (logits = h W^T + b, §3.4) in the fastest form measured here.

A decoding step multiplies R rows (beams x sentences: 4 at batch 1, up to 256 at batch 64 with beam 4) by
the (V, D) weight, the largest single cost of a small model's step. On CPU in float32, oneDNN's linear with
the weight packed once into its blocked layout (prepared_weight.py) took 1.3-3x less time than
torch.nn.functional.linear for (V, D) = (10000, 128) and R = 4..256 on an AVX-512 CPU (BENCHMARKS.md,
decoding speed); unlike the layers' small weights (linear.py) it was faster packed on an AVX2-only CPU too,
so it is packed at every row count on every CPU. Elsewhere (CUDA, bf16, a torch without oneDNN) the weight
is transposed to (D, V) and made contiguous, which was still ~20% faster than linear on (V, D).
"""

import torch
from torch import nn

from aiayn.cpu.linear import PackedLinear, typed_project


class PackedOutputProjection(PackedLinear):
    """The output projection (a Transformer's `generator`, an nn.Linear: the same parameters, tied to the
    embedding where the model ties them) whose inference products use the prepared weight. With autograd on
    (or while traced) torch's own linear, so gradients flow as through nn.Linear."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # x (..., D) -> (..., V)
        if torch.is_grad_enabled() or torch.compiler.is_compiling():  # traced: float32 only (see linear.py)
            assert self.compute_type == "float32" or not torch.compiler.is_compiling()
            return nn.functional.linear(x, self.weight, self.bias)
        rows = x.reshape(-1, x.size(-1))  # (R, D)
        prepared = self._packed.get(self.weight, compute_type=self.compute_type)
        return typed_project(rows, prepared, self.bias, self.compute_type).view(*x.shape[:-1], self.out_features)
