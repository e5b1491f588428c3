"""A check at load that a model's outputs survive its low-precision compute type (aiayn.cpu.compute_types).

Quantization error depends on the weights: a model with a few large weights in a column of W (outlier
features) loses the small weights of every row to int8's one scale per output channel, and its translations
change while float32's do not. A model directory holds no validation sentences, so the check makes its own:
PROBES sources of PROBE_LEN pieces each, the first ordinary pieces of the source vocabulary (SentencePiece's
BPE numbers its merges by frequency, so these are the most frequent) in fixed orders, ending with </s>. They
are decoded greedily in float32, and the float32 outputs are teacher-forced in float32 and in the compute type:
  agreement       the share of positions where the compute type picks float32's next token, or one float32
                  rates within TIE of its own (a near-tie any rounding flips; pad and <s> are never picked)
  max_difference  the largest |log-prob difference| of float32's pick
A model below MIN_AGREEMENT or above MAX_DIFFERENCE gets one warning line saying what to do.

Measured on the probes: normal models (the tests' untrained tiny Transformer, d_model 64, 128 pieces; tiny
models trained 200 and 800 steps on the number task; an untrained paper-base model, 16k pieces) agreed at
100% in both compute types, with max differences bfloat16 0.010-0.04, int8 0.013-0.07; the flips of plain
argmax agreement there were near-ties, 0.011-0.019 nats apart in float32. The same tiny models with their
FFNs rescaled (w_1's first row / 1000, w_2's first column x 1000: the same function in float32, outliers for
int8) agreed at 11-92% in int8, max difference 1.1-6.7, and flipped between tokens >= 0.1 nats apart
(bfloat16 unchanged: 100%, <= 0.017). The check took 0.3 s of CPU time for the paper-base model (52M
parameters, one thread), two thirds of it float32's greedy steps, which read every weight in float32 each
step; the compute type's own weights are prepared at load either way (another 0.4 s, before the first search
otherwise).
"""
import logging
from dataclasses import dataclass

import torch

from aiayn.cpu import compute_type_of
from aiayn.decoding.batches import max_positions

log = logging.getLogger(__name__)

PROBES, PROBE_LEN = 4, 12  # sources x pieces: 48 positions to compare, enough to see a drift (see above)
TIE = 0.05  # nats: normal models' flips were <= 0.019 apart, drifting ones' >= 0.1 (see above)
MIN_AGREEMENT = 0.9  # normal models measured 100%, drifting ones 11-92% (see above)
MAX_DIFFERENCE = 0.5  # nats: normal models measured <= 0.07, drifting ones >= 1.1 (see above)


@dataclass(frozen=True)
class Drift:
    compute_type: str
    agreement: float  # share of positions, 0..1
    max_difference: float  # nats
    positions: int  # next-token predictions compared

    @property
    def drifts(self) -> bool:
        return self.agreement < MIN_AGREEMENT or self.max_difference > MAX_DIFFERENCE


def probe_sources(tokenizer) -> list[list[int]]:
    """PROBES sources of PROBE_LEN source ids and </s>: the first ordinary pieces of the vocabulary (no special,
    byte or user-defined <...> piece), shuffled in a fixed order (repeated where the vocabulary is smaller)."""
    specials = {tokenizer.pad_id, tokenizer.unk_id, tokenizer.bos_id, tokenizer.eos_id}
    ordinary = []
    for i in range(tokenizer.src_vocab_size):
        if len(ordinary) == PROBES * PROBE_LEN:
            break
        piece = tokenizer.source_id_to_piece([i])[0]
        if i not in specials and not (piece.startswith("<") and piece.endswith(">")):
            ordinary.append(i)
    if not ordinary:
        return []
    order = torch.randperm(PROBES * PROBE_LEN, generator=torch.Generator().manual_seed(0)).tolist()
    ids = [ordinary[j % len(ordinary)] for j in order]
    return [ids[k * PROBE_LEN:(k + 1) * PROBE_LEN] + [tokenizer.eos_id] for k in range(PROBES)]


def measure_drift(model, tokenizer) -> Drift | None:
    """`model` (prepared for CPU, in eval mode and its compute type) against float32 on the probes. None
    where the vocabulary has no ordinary piece."""
    sources = probe_sources(tokenizer)
    if not sources:
        return None
    src = torch.tensor(sources, device=next(model.parameters()).device)
    pad, bos = tokenizer.pad_id, tokenizer.bos_id
    # float32 with autograd on: the prepared modules then multiply by the float32 weights with torch's own
    # product (aiayn.cpu.linear), whatever their compute type; setting the compute type to float32 and back
    # would prepare every weight twice more (seconds at paper-base size)
    with torch.enable_grad():
        tgt_in = _greedy(model, src, tokenizer)
        reference = _forbid(model(src, tgt_in).detach().float().log_softmax(-1), pad, bos)  # (B, T, V)
    with torch.inference_mode():
        low = _forbid(model(src, tgt_in).float().log_softmax(-1), pad, bos)  # an ensemble's mixture: unchanged
    valid = tgt_in != pad  # (B, T): <s> and the tokens written; each predicts the next
    picked = reference.argmax(-1, keepdim=True)  # (B, T, 1): float32's pick
    best = reference.gather(-1, picked)
    agrees = reference.gather(-1, low.argmax(-1, keepdim=True)) >= best - TIE  # the same pick, or a near-tie
    agreement = agrees.squeeze(-1)[valid].float().mean().item()
    difference = (low.gather(-1, picked) - best).abs().squeeze(-1)[valid].max().item()
    return Drift(compute_type_of(model), agreement, difference, int(valid.sum()))


def _greedy(model, src: torch.Tensor, tokenizer) -> torch.Tensor:
    """Greedy decoding of src (B, S) -> tgt_in (B, T): <s> and the tokens written, padding after </s> (which
    is never fed)."""
    pad, bos, eos = tokenizer.pad_id, tokenizer.bos_id, tokenizer.eos_id
    steps = PROBE_LEN + 1 if max_positions(model) is None else min(PROBE_LEN + 1, max_positions(model))
    fed = [torch.full((src.size(0),), bos, device=src.device)]
    finished = torch.zeros_like(fed[0], dtype=torch.bool)
    state = model.init_state(model.encode(src)[0], src)
    for _ in range(steps - 1):
        log_probs, state, _ = model.decode_step(fed[-1], state)
        chosen = _forbid(log_probs.detach(), pad, bos).argmax(-1)
        finished |= chosen == eos
        if finished.all():
            break
        fed.append(torch.where(finished, pad, chosen))
    return torch.stack(fed, 1)


def _forbid(log_probs: torch.Tensor, pad: int, bos: int) -> torch.Tensor:
    log_probs[..., [pad, bos]] = float("-inf")  # never outputs (search_rules.forbid_specials)
    return log_probs


def warn_if_drifting(model, tokenizer) -> Drift | None:
    """measure_drift, with one warning line where the model drifts in its compute type; nothing to check
    (None) in float32."""
    if compute_type_of(model) == "float32":
        return None
    drift = measure_drift(model, tokenizer)
    if drift is not None and drift.drifts:
        instead = "float32" if drift.compute_type == "bfloat16" else "float32 or bfloat16"
        log.warning("this model drifts in %s: its next token agrees with float32's at %.0f%% of %d probe "
                    "positions (under %.0f%% warns), log-probs differ by up to %.2f (over %.2f warns); decode "
                    "with --compute-type %s", drift.compute_type, 100 * drift.agreement, drift.positions,
                    100 * MIN_AGREEMENT, drift.max_difference, MAX_DIFFERENCE, instead)
    return drift
