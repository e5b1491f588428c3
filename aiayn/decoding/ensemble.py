"""Ensembles: several models of one vocabulary decoding as one, behind the model interface (encode,
init_state, decode_step, state.select, forward), so beam search, greedy search, sampling and scoring run
unchanged on them.

At each step the members' next-token distributions are mixed: log sum_i w_i p_i(y | x, y<t), the log of the
weighted mixture of probabilities (fairseq's ensemble, with equal weights there; Marian instead adds the
members' weighted log-probabilities, a product of experts that is not a distribution). The weights are
normalized to sum to 1, so the mixture is a distribution and its log-probs are comparable with one model's;
a model ensembled with itself (or alone) gives exactly its own log-probs: the mixture is computed as
max + log sum_i w_i exp(lp_i - max), which is max + log 1 when every member agrees.

The members must share one vocabulary (identical tokenizer files). Native engine, in this process only
(aiayn.decoding.engines.Capabilities.ensembles)."""

import math
from dataclasses import dataclass
from pathlib import Path

import torch

from aiayn.errors import AiaynError


def check_weights(weights, n_models: int) -> list[float]:
    """One positive finite weight per model -> the weights normalized to sum to 1 (None: equal weights)."""
    if weights is None:
        return [1.0 / n_models] * n_models
    weights = list(weights)
    if len(weights) != n_models:
        raise AiaynError(f"--weights: {len(weights)} weights for {n_models} models: give one per --model")
    for w in weights:
        if isinstance(w, bool) or not isinstance(w, (int, float)) or not math.isfinite(w) or w <= 0:
            raise AiaynError(f"--weights: {w!r} is not a positive number: give each model a weight > 0")
    total = float(sum(weights))
    return [float(w) / total for w in weights]


def check_same_vocabulary(tokenizers: list, model_dirs: list) -> None:
    """Identical tokenizer files, or one line naming the first two models that differ."""
    first = tokenizers[0].files()
    for tok, where in zip(tokenizers[1:], model_dirs[1:]):
        if tok.files() != first:
            raise AiaynError(f"{model_dirs[0]} and {where} have different vocabularies (their tokenizer files "
                             f"differ): an ensemble needs models trained with one shared vocabulary")


def mix(log_probs: list[torch.Tensor], weights: torch.Tensor) -> torch.Tensor:
    """log sum_i w_i exp(lp_i): members' log-probs (each (..., V)) -> the mixture's (..., V)."""
    stacked = torch.stack(log_probs)  # (M, ..., V)
    top = stacked.amax(dim=0)
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))  # a token every member rules out stays -inf
    w = weights.to(stacked).view(-1, *([1] * (stacked.dim() - 1)))
    return top + (w * (stacked - top).exp()).sum(dim=0).log()


@dataclass
class EnsembleState:
    """One decoder state per member, rows in the same order."""

    states: list

    def select(self, rows: torch.Tensor, sentences: torch.Tensor | None = None) -> "EnsembleState":
        return EnsembleState([s.select(rows, sentences) for s in self.states])


def _no_maps(return_attention: bool) -> None:
    if return_attention:
        raise AiaynError("attention maps and alignments are one model's: an ensemble has none; use one --model")


class Ensemble(torch.nn.Module):
    """Models of one vocabulary as one model: the model interface over the mixture of their distributions.
    weights: one per model, > 0 (normalized; None: equal)."""

    def __init__(self, *, models: list, weights: list[float] | None = None):
        super().__init__()
        self.members = torch.nn.ModuleList(models)
        self.register_buffer("weights", torch.tensor(check_weights(weights, len(models)), dtype=torch.float64),
                             persistent=False)
        with_positions = [m for m in models if m.max_positions is not None]
        # the longest input is the smallest table's; arch (a name to show) and positional are that member's
        first = min(with_positions, key=lambda m: m.max_positions) if with_positions else models[0]
        self.arch, self.max_positions = first.arch, first.max_positions
        if with_positions:
            self.positional = first.positional
        self.config = models[0].config
        self.pad_id = models[0].pad_id

    def encode(self, src: torch.Tensor, return_attention: bool = False):
        _no_maps(return_attention)
        return [m.encode(src)[0] for m in self.members], None

    def init_state(self, memory: list, src: torch.Tensor) -> EnsembleState:
        return EnsembleState([m.init_state(mem, src) for m, mem in zip(self.members, memory)])

    def decode_step(self, tokens: torch.Tensor, state: EnsembleState, return_attention: bool = False):
        _no_maps(return_attention)
        steps = [m.decode_step(tokens, s)[:2] for m, s in zip(self.members, state.states)]
        return mix([lp for lp, _ in steps], self.weights), EnsembleState([s for _, s in steps]), None

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        """Teacher forcing: the mixture's log-probs (B, T, V), which are their own log-softmax."""
        return mix([m(src, tgt_in).float().log_softmax(dim=-1) for m in self.members], self.weights)


def load_ensemble(paths: list, weights, device, use_ema: bool):
    """Model directories (as --model takes them) -> (Ensemble, the first model's config, the shared tokenizer,
    the first model's directory)."""
    from aiayn.checkpoint import load_checkpoint
    from aiayn.run_dir import resolve_model_dir

    weights = check_weights(weights, len(paths))  # before any model is loaded
    dirs = [resolve_model_dir(p) for p in paths]
    loaded = [load_checkpoint(d, device, use_ema) for d in dirs]
    check_same_vocabulary([tok for _, _, tok in loaded], [Path(p) for p in paths])
    sizes = {m.generator.out_features for m, _, _ in loaded}
    if len(sizes) > 1:
        raise AiaynError(f"{paths[0]} and {paths[1]} have output layers of different sizes {sorted(sizes)}: an "
                         f"ensemble needs models trained with one shared vocabulary")
    model = Ensemble(models=[m for m, _, _ in loaded], weights=weights).to(device)
    return model, loaded[0][1], loaded[0][2], dirs[0]
