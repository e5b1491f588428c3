"""Decoder states: what a model carries from one decoding step to the next.

A state has R rows (hypotheses being extended) belonging to B' sentences, R / B' rows per sentence
(1 for greedy decoding, the beam size K for beam search), rows of one sentence side by side.
`select(rows, sentences)` keeps, repeats or permutes rows: rows (R',) index the current rows,
sentences (B'',) the current sentences (None: the same sentences), and row r of the new state must come
from sentence r // (R' / B'') of the new sentence list. What belongs to a sentence rather than to a row
(the Transformer's cross-attention K/V and source mask) is stored once per sentence, so beam search
copies it only when sentences leave the batch, not at every step. Like decode_step, which updates a state
in place, select hands its buffers on: the state it was called on must not be used again. Nothing here is
a module; states hold tensors only.
"""

from dataclasses import dataclass, field

import torch


def _pick(t: torch.Tensor | None, indices: torch.Tensor | None, dim: int = 0) -> torch.Tensor | None:
    return t if t is None or indices is None else t.index_select(dim, indices)


@dataclass
class LayerCache:
    """KV cache of one decoder layer. Cross-attention K/V (B', H, S, d_head), computed once from the
    encoder memory, per sentence. Self-attention K/V: positions [0, length) of preallocated buffers
    (rows, H, capacity, d_head), written in place one position per step; a second pair of buffers takes
    the rows a `select` keeps (one index_select into it), so no step allocates memory or copies the cache
    more than once, and greedy decoding (no select) copies nothing. Capacity doubles when full."""

    cross_k: torch.Tensor
    cross_v: torch.Tensor
    buffers: list = field(default_factory=list)  # [(k, v) in use, (k, v) spare], each (rows, H, capacity, d_head)
    rows: int = 0  # rows in use
    length: int = 0  # positions cached
    pending_rows: torch.Tensor | None = None  # a select not yet applied to the self-attention buffers

    def append_self(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """k, v (R, H, 1, d_head) of the new position -> the cached K, V with it, (R, H, t + 1, d_head)
        (views of the buffers, valid until the next step)."""
        R, t = k.size(0), self.length
        if not self.buffers or R > self.buffers[0][0].size(0) or t + 1 > self.buffers[0][0].size(2):
            self._grow(k, v)
        if self.pending_rows is not None:  # the kept rows go to the spare buffers, which are then in use
            (old_k, old_v), (new_k, new_v) = self.buffers
            torch.index_select(old_k[: self.rows, :, :t], 0, self.pending_rows, out=new_k[:R, :, :t])
            torch.index_select(old_v[: self.rows, :, :t], 0, self.pending_rows, out=new_v[:R, :, :t])
            self.buffers.reverse()
            self.pending_rows = None
        buf_k, buf_v = self.buffers[0]
        buf_k[:R, :, t] = k[:, :, 0]
        buf_v[:R, :, t] = v[:, :, 0]
        self.rows, self.length = R, t + 1
        return buf_k[:R, :, : t + 1], buf_v[:R, :, : t + 1]

    def _grow(self, k: torch.Tensor, v: torch.Tensor) -> None:
        """New buffers with room for R rows and twice the positions; the cache so far copied over, its
        pending select applied on the way."""
        R, H, _, d = k.shape
        capacity = max(16, 2 * (self.length + 1))
        fresh = [tuple(k.new_empty(R, H, capacity, d) for _ in range(2)) for _ in range(2)]
        if self.buffers and self.length:
            rows = self.pending_rows if self.pending_rows is not None else torch.arange(R, device=k.device)
            for old, new in zip(self.buffers[0], fresh[0]):
                torch.index_select(old[: self.rows, :, : self.length], 0, rows, out=new[:R, :, : self.length])
        self.buffers, self.pending_rows = fresh, None

    def select(self, rows: torch.Tensor, sentences: torch.Tensor | None) -> "LayerCache":
        if self.pending_rows is not None:  # two selects in a row (no step between): compose them
            rows = self.pending_rows.index_select(0, rows)
        return LayerCache(_pick(self.cross_k, sentences), _pick(self.cross_v, sentences), self.buffers, self.rows,
                          self.length, rows)


@dataclass
class TransformerState:
    """Explicit KV cache of the Transformer decoder. src_mask (B', 1, 1, S), per sentence;
    step = tokens decoded so far; generator: the output projection's weight prepared for decoding steps
    (aiayn/model/output_projection.py), generator_bias (V,) or None."""

    layers: list[LayerCache]
    src_mask: torch.Tensor
    generator: torch.Tensor
    generator_bias: torch.Tensor | None = None
    step: int = 0

    def select(self, rows: torch.Tensor, sentences: torch.Tensor | None = None) -> "TransformerState":
        return TransformerState([c.select(rows, sentences) for c in self.layers], _pick(self.src_mask, sentences),
                                self.generator, self.generator_bias, self.step)


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
