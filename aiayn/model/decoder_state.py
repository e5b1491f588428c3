"""Decoder states: what a model carries from one decoding step to the next.

A state has R rows (hypotheses being extended) belonging to B' sentences, R / B' rows per sentence
(1 for greedy decoding, the beam size K for beam search), rows of one sentence side by side.
`select(rows, sentences)` keeps, repeats or permutes rows: rows (R',) index the current rows,
sentences (B'',) the current sentences (None: the same sentences), and row r of the new state must come
from sentence r // (R' / B'') of the new sentence list. What belongs to a sentence rather than to a row
(the Transformer's cross-attention K/V and source mask) is stored once per sentence, so beam search
copies it only when sentences leave the batch, not at every step. Nothing here is a module; states hold
tensors only.
"""

from dataclasses import dataclass

import torch


def _pick(t: torch.Tensor | None, indices: torch.Tensor | None, dim: int = 0) -> torch.Tensor | None:
    return t if t is None or indices is None else t.index_select(dim, indices)


@dataclass
class LayerCache:
    """KV cache of one decoder layer. Self-attention K and V of the positions so far in one tensor,
    self_kv (R, H, 2, t, d_head) ([:, :, 0] = K, [:, :, 1] = V), one position longer at every step;
    cross-attention K/V (B', H, S, d_head), computed once from the encoder memory, per sentence. K and V each
    are (R, H, t, d_head) views whose (R, H) dimensions merge into one batch dimension (stride 2 t d_head),
    so attention's batched products read them in place (with K and V side by side in dimension 1, every
    product first copied them: 7% of a bfloat16 beam search at paper-base size)."""

    cross_k: torch.Tensor
    cross_v: torch.Tensor
    self_kv: torch.Tensor | None = None
    pending_rows: torch.Tensor | None = None  # a select not yet applied to self_kv (see append_self)

    def append_self(self, kv: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """kv (R, 2, H, d_head) of the new position -> K, V with it, each (R, H, t + 1, d_head).
        A pending row selection and the append are one copy into a new buffer (index_select writes into
        its slice), not two (a gather, then a torch.cat); K and V share it, so one copy serves both. Not
        preallocated: beam search reorders rows at every step, so each step copies the cache once either
        way, and buffers written in place (tried: a spare pair of (rows, H, capacity, d_head) buffers) made
        beam search at batch 64 about 8% slower here, through strided attention inputs and strided
        index_select (BENCHMARKS.md)."""
        R, _, H, d = kv.shape
        t = 0 if self.self_kv is None else self.self_kv.size(3)
        out = kv.new_empty(R, H, 2, t + 1, d)
        if self.pending_rows is not None:
            torch.index_select(self.self_kv, 0, self.pending_rows, out=out[:, :, :, :t])
        elif t:
            out[:, :, :, :t] = self.self_kv
        out[:, :, :, t] = kv.transpose(1, 2)
        self.self_kv, self.pending_rows = out, None
        return out[:, :, 0], out[:, :, 1]

    def select(self, rows: torch.Tensor, sentences: torch.Tensor | None) -> "LayerCache":
        if self.pending_rows is not None:  # two selects in a row (no step between): compose them
            rows = self.pending_rows.index_select(0, rows)
        if self.self_kv is None:  # nothing cached yet: nothing to select
            rows = None
        return LayerCache(_pick(self.cross_k, sentences), _pick(self.cross_v, sentences), self.self_kv, rows)


@dataclass
class TransformerState:
    """Explicit KV cache of the Transformer decoder. src_mask (B', 1, 1, S), per sentence;
    step = tokens decoded so far."""

    layers: list[LayerCache]
    src_mask: torch.Tensor
    step: int = 0

    def select(self, rows: torch.Tensor, sentences: torch.Tensor | None = None) -> "TransformerState":
        return TransformerState([c.select(rows, sentences) for c in self.layers], _pick(self.src_mask, sentences),
                                self.step)


@dataclass
class RNNState:
    """RNN decoder state: hidden (L, R, D) and for LSTM cell (L, R, D); the previous attentional
    vector for Luong input feeding (R, D); the encoder outputs (R, S, D) with their score-side
    projection (R, S, A) and mask (R, S). All per row (an RNN's cost is its recurrence, not these)."""

    hidden: torch.Tensor
    cell: torch.Tensor | None
    input_feed: torch.Tensor
    memory: torch.Tensor
    prepared_keys: torch.Tensor
    src_mask: torch.Tensor
    step: int = 0

    def select(self, rows: torch.Tensor, sentences: torch.Tensor | None = None) -> "RNNState":
        return RNNState(
            hidden=self.hidden.index_select(1, rows),
            cell=_pick(self.cell, rows, 1),
            input_feed=self.input_feed.index_select(0, rows),
            memory=self.memory.index_select(0, rows),
            prepared_keys=self.prepared_keys.index_select(0, rows),
            src_mask=self.src_mask.index_select(0, rows),
            step=self.step,
        )
