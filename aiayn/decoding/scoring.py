"""Scoring given translations: the log-probability of a target under the model, by teacher forcing.

Per pair the target's subword ids with the final </s> are fed after <s> in one forward pass, and each
token's log-probability is read from the log-softmax of its position (nothing renormalized, as in beam
search, which sets <pad> and <s> to -inf after the softmax). Per sentence:
- token_log_probs: one per target token, </s> included (an empty target is </s> alone);
- log_prob: their sum;
- score: log_prob / lp(|Y|), |Y| counting </s>, with the length penalty of beam search (alpha and its form,
  aiayn.decoding.beam.length_penalty): a beam hypothesis's score equals the score of its text here.
Batches are cut by sentences and by tokens (source + target, padding included) as translations are; each
sentence's numbers do not depend on its neighbours (padding is masked, target positions see only earlier
ones). Engines score through this module (native, on the model) or CTranslate2's score_batch
(aiayn.decoding.ct2_engine)."""

from dataclasses import dataclass

import torch

from aiayn.decoding.batches import encode_sources, in_input_order, length_sorted_batches, pad_batch
from aiayn.decoding.beam import length_penalty
from aiayn.errors import AiaynError


@dataclass
class Score:
    score: float  # log_prob / lp(|Y|), the length penalty of beam search (|Y| counts </s>)
    log_prob: float  # sum of token_log_probs
    tokens: list[str]  # target subword pieces, </s> included
    token_log_probs: list[float]  # per token of `tokens`

    def as_dict(self) -> dict:
        return {"score": self.score, "log_prob": self.log_prob, "tokens": self.tokens,
                "token_log_probs": self.token_log_probs}


def encode_pairs(tokenizer, sources: list[str], targets: list[str], max_positions: int):
    """-> (source ids with </s>, target ids with </s>), one target per source; either longer than the model's
    positions is refused, naming its line (a cut source or target would be scored as another sentence)."""
    if len(sources) != len(targets):
        raise AiaynError(f"{len(sources)} sources but {len(targets)} targets: give one target per source "
                         f"(line for line)")
    src_ids = encode_sources(tokenizer, sources)
    tgt_ids = [t + [tokenizer.eos_id] for t in tokenizer.encode_target(targets)] if targets else []
    for what, ids in (("source", src_ids), ("target", tgt_ids)):
        for number, seq in enumerate(ids, start=1):
            if len(seq) > max_positions:
                raise AiaynError(f"{what} {number}: {len(seq)} subword tokens with </s>, but this model takes at "
                                 f"most {max_positions}: shorten it or leave the pair out")
    return src_ids, tgt_ids


@torch.inference_mode()
def teacher_forced(model, src: torch.Tensor, targets: list[list[int]], bos_id: int, pad_id: int) -> list[list[float]]:
    """src (B, S) and per row its target ids with </s> -> per row the log-prob of each target token, read from
    one teacher-forced pass (tgt_in = <s> + target without its last token)."""
    tgt_out = pad_batch(targets, pad_id, src.device)  # (B, T)
    bos = torch.full_like(tgt_out[:, :1], bos_id)
    tgt_in = torch.cat([bos, tgt_out[:, :-1]], dim=1)  # (B, T)
    log_probs = model.forward(src, tgt_in).float().log_softmax(dim=-1)  # (B, T, V)
    picked = log_probs.gather(2, tgt_out[:, :, None]).squeeze(2).tolist()  # (B, T)
    return [row[: len(t)] for row, t in zip(picked, targets)]


def pair_batches(sources: list[list[int]], targets: list[list[int]], batch_size: int,
                 max_tokens: int | None) -> list[list[int]]:
    """Indices in length-sorted batches of at most batch_size pairs and max_tokens source + target tokens."""
    return length_sorted_batches([len(s) + len(t) for s, t in zip(sources, targets)], batch_size, max_tokens)


def native_token_log_probs(model, sources, targets, *, bos_id: int, pad_id: int, device, batch_size: int,
                           max_tokens: int | None = None) -> list[list[float]]:
    """The native engine's scoring: per pair the log-prob of each target token, in input order."""
    batches = pair_batches(sources, targets, batch_size, max_tokens)

    def run(indices: list[int]) -> list[list[float]]:
        src = pad_batch([sources[i] for i in indices], pad_id, device)
        return teacher_forced(model, src, [targets[i] for i in indices], bos_id, pad_id)

    return in_input_order(batches, (run(b) for b in batches), len(sources))


def scores_of(tokenizer, targets: list[list[int]], token_log_probs: list[list[float]], options) -> list[Score]:
    """Per pair its Score from an engine's token log-probs, with options' alpha and length penalty form."""
    out = []
    for ids, found in zip(targets, token_log_probs):
        total = float(sum(found))
        lp = length_penalty(len(ids), options.alpha, options.length_penalty_form)
        out.append(Score(score=total / lp, log_prob=total, tokens=tokenizer.id_to_piece(ids),
                         token_log_probs=[float(x) for x in found]))
    return out
