"""Decoder states: what a model carries from one decoding step to the next.

Each state offers `reorder(indices)`, which beam search calls to keep, repeat or permute batch rows
(indices (B',) into the current batch). Nothing here is a module; states hold tensors only.
"""

from dataclasses import dataclass

import torch


@dataclass
class LayerCache:
    """KV cache of one decoder layer: self-attention K/V grow by one position per step,
    cross-attention K/V are computed once from the encoder memory. All (B, H, len, d_head)."""

    cross_k: torch.Tensor
    cross_v: torch.Tensor
    self_k: torch.Tensor | None = None
    self_v: torch.Tensor | None = None

    def append_self(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.self_k is not None:
            k = torch.cat([self.self_k, k], dim=2)
            v = torch.cat([self.self_v, v], dim=2)
        self.self_k, self.self_v = k, v
        return k, v

    def reorder(self, indices: torch.Tensor) -> "LayerCache":
        def pick(t):
            return None if t is None else t.index_select(0, indices)

        return LayerCache(pick(self.cross_k), pick(self.cross_v), pick(self.self_k), pick(self.self_v))


@dataclass
class TransformerState:
    """Explicit KV cache of the Transformer decoder. src_mask (B, 1, 1, S); step = tokens decoded so far."""

    layers: list[LayerCache]
    src_mask: torch.Tensor
    step: int = 0

    def reorder(self, indices: torch.Tensor) -> "TransformerState":
        return TransformerState([c.reorder(indices) for c in self.layers],
                                self.src_mask.index_select(0, indices), self.step)


@dataclass
class RNNState:
    """RNN decoder state: hidden (L, B, D) and for LSTM cell (L, B, D); the previous attentional
    vector for Luong input feeding (B, D); the encoder outputs (B, S, D) with their score-side
    projection (B, S, A) and mask (B, S)."""

    hidden: torch.Tensor
    cell: torch.Tensor | None
    input_feed: torch.Tensor
    memory: torch.Tensor
    prepared_keys: torch.Tensor
    src_mask: torch.Tensor
    step: int = 0

    def reorder(self, indices: torch.Tensor) -> "RNNState":
        return RNNState(
            hidden=self.hidden.index_select(1, indices),
            cell=None if self.cell is None else self.cell.index_select(1, indices),
            input_feed=self.input_feed.index_select(0, indices),
            memory=self.memory.index_select(0, indices),
            prepared_keys=self.prepared_keys.index_select(0, indices),
            src_mask=self.src_mask.index_select(0, indices),
            step=self.step,
        )
