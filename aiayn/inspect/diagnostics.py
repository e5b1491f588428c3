"""Diagnostics of a translation: signals computed from its tokens, log-probability and cross-attention, each
compared with a documented threshold (aiayn.inspect.diagnostic_thresholds), and the flags they raise.

Signals (and where they come from):
- log_prob: mean log-probability per output token, </s> included ("Seq-Logprob", the strongest simple
  hallucination detector of Guerreiro et al. 2023) -> hallucination when low;
- eos_attention: mean cross-attention the output's words give the source's </s> (an attention signal of
  Lee et al. 2019 and Guerreiro et al. 2023: a detached output looks at the end of the source) ->
  hallucination when high;
- uncovered_share: share of the source's words that the output's words, together, attend to with less
  than COVERAGE_MASS (Guerreiro et al.'s "Attn-ign-SRC") -> low_coverage;
- repeat_run: the most times an n-gram of output words, or of output pieces (a loop inside one word),
  follows itself -> repetition;
- source_copy: chrF of the output against the source itself -> copy;
- length_ratio: output words / source words -> length_ratio when outside a range;
- stopped_at_limit: the search reached its length limit without </s> -> stopped_at_limit;
- unknown_share: the source's <unk> and byte pieces -> unknown_input.
Cross-attention: the last layer, heads averaged (as aiayn's alignments), subwords merged into words
(aiayn.inspect.capture: keys summed per word, queries averaged per word).

Each signal reports {"value", "threshold", "rule", "flag", "flagged"}; the flags are the codes of the
signals that fired, in a fixed order (each code once).
"""

from dataclasses import dataclass, replace

import numpy as np

from aiayn.errors import AiaynError
from aiayn.inspect.capture import word_groups
from aiayn.inspect.diagnostic_thresholds import COVERAGE_MASS, DEFAULT_THRESHOLDS, REPEAT_NGRAM_MAX, Thresholds

FLAGS = ("hallucination", "low_coverage", "repetition", "copy", "length_ratio", "stopped_at_limit", "unknown_input")


@dataclass(frozen=True, kw_only=True)
class Evidence:
    """What the diagnostics read. src_tokens: source pieces ending in </s>; tgt_tokens: output pieces
    (without </s>); cross: (L, H, T, S) cross-attention, T = len(tgt_tokens) or that + 1 (the </s> step);
    log_prob: summed log-probability of the T steps."""

    source: str
    output: str
    src_tokens: list[str]
    tgt_tokens: list[str]
    cross: np.ndarray
    log_prob: float
    stopped_at_limit: bool = False
    unk_piece: str = "<unk>"


def attention_signals(cross: np.ndarray, src_tokens: list[str], tgt_tokens: list[str]) -> tuple[float, float, list]:
    """-> (uncovered_share, eos_attention, the uncovered source words). Rows: the output's words (the </s>
    step left out); columns: the source's words, </s> last."""
    weights = cross[-1].mean(0).astype(np.float64)[: len(tgt_tokens)]  # (T, S) last layer, heads averaged
    src_words, src_groups = word_groups(src_tokens)
    keys = np.stack([weights[:, g].sum(-1) for g in src_groups], axis=-1) if len(weights) else \
        np.zeros((0, len(src_groups)))
    rows = np.stack([keys[g].mean(0) for g in word_groups(tgt_tokens)[1]]) if len(keys) else keys
    has_eos = src_words[-1] == "</s>"
    n_words = len(src_words) - has_eos
    eos = float(rows[:, -1].mean()) if has_eos and len(rows) else (1.0 if has_eos else 0.0)
    mass = rows[:, :n_words].sum(0) if len(rows) else np.zeros(n_words)
    uncovered = [w for w, m in zip(src_words, mass) if m < COVERAGE_MASS]
    return len(uncovered) / max(n_words, 1), eos, uncovered


def repeat_run(words: list[str], max_n: int = REPEAT_NGRAM_MAX) -> int:
    """The most times an n-gram (n <= max_n) of `words` occurs in a row: "a b a b a b" -> 3; no repeat -> 1
    (0 for no words)."""
    best = min(len(words), 1)
    for n in range(1, max_n + 1):
        for start in range(len(words) - n + 1):
            run, gram = 1, words[start: start + n]
            while words[start + run * n: start + (run + 1) * n] == gram:
                run += 1
            best = max(best, run)
    return best


def source_copy(source: str, output: str) -> float:
    """chrF (0-100) of the output against the source itself: near 100 when the output copies it."""
    from sacrebleu.metrics import CHRF

    return round(CHRF().sentence_score(output, [source]).score, 2) if output.strip() else 0.0


def length_ratio(source: str, output: str) -> float:
    return len(output.split()) / max(len(source.split()), 1)


def unknown_share(src_tokens: list[str], unk_piece: str) -> float:
    pieces = [p for p in src_tokens if p != "</s>"]
    bad = sum(p == unk_piece or (p.startswith("<0x") and p.endswith(">")) for p in pieces)
    return bad / max(len(pieces), 1)


def _fires(value, threshold, rule: str) -> bool:
    return bool({">": lambda: value > threshold, "<": lambda: value < threshold, ">=": lambda: value >= threshold,
                 "is": lambda: value is threshold,
                 "outside": lambda: not threshold[0] <= value <= threshold[1]}[rule]())


def _signal(value, threshold, rule: str, flag: str) -> dict:
    fired = _fires(value, threshold, rule)
    value = round(float(value), 4) if isinstance(value, (float, np.floating)) else value
    return {"value": value, "threshold": threshold, "rule": rule, "flag": flag, "flagged": fired}


def _limits(t: Thresholds) -> dict:
    """Each signal's threshold under t."""
    return {"log_prob": t.log_prob, "eos_attention": t.eos_attention, "uncovered_share": t.uncovered_share,
            "repeat_run": t.repeat_run, "source_copy": t.source_copy,
            "length_ratio": [t.length_ratio_low, t.length_ratio_high], "stopped_at_limit": True,
            "unknown_share": t.unknown_share}


def flags_under(diagnostics: dict, thresholds: Thresholds) -> list[str]:
    """The flags a diagnose() result raises under other thresholds: its signals' (rounded) values judged again."""
    limits = _limits(thresholds)
    fired = {s["flag"] for name, s in diagnostics["signals"].items() if _fires(s["value"], limits[name], s["rule"])}
    return [f for f in FLAGS if f in fired]


def diagnose(evidence: Evidence, thresholds: Thresholds = DEFAULT_THRESHOLDS) -> dict:
    """-> {"flags": [codes], "signals": {name: {"value", "threshold", "rule", "flag", "flagged"}},
    "uncovered_words": [...]}."""
    e, t = evidence, _limits(thresholds)
    uncovered, eos, words = attention_signals(e.cross, e.src_tokens, e.tgt_tokens)
    steps = max(e.cross.shape[-2], 1)
    pieces = [p.lstrip("▁") for p in e.tgt_tokens]  # "▁und und und": one word, a loop of pieces
    signals = {
        "log_prob": _signal(e.log_prob / steps, t["log_prob"], "<", "hallucination"),
        "eos_attention": _signal(eos, t["eos_attention"], ">", "hallucination"),
        "uncovered_share": _signal(uncovered, t["uncovered_share"], ">", "low_coverage"),
        "repeat_run": _signal(max(repeat_run(e.output.split()), repeat_run(pieces)), t["repeat_run"], ">=",
                              "repetition"),
        "source_copy": _signal(source_copy(e.source, e.output), t["source_copy"], ">=", "copy"),
        "length_ratio": _signal(length_ratio(e.source, e.output), t["length_ratio"], "outside", "length_ratio"),
        "stopped_at_limit": _signal(bool(e.stopped_at_limit), t["stopped_at_limit"], "is", "stopped_at_limit"),
        "unknown_share": _signal(unknown_share(e.src_tokens, e.unk_piece), t["unknown_share"], ">",
                                 "unknown_input"),
    }
    fired = {s["flag"] for s in signals.values() if s["flagged"]}
    return {"flags": [f for f in FLAGS if f in fired], "signals": signals, "uncovered_words": words}


def no_diagnostics() -> dict:
    """A blank line's diagnostics: nothing to judge, nothing flagged."""
    return {"flags": [], "signals": {}, "uncovered_words": []}


def evidence_of(result, source: str, tokenizer) -> Evidence:
    """The Evidence of a Translation made with return_attention (its best hypothesis, as searched)."""
    return Evidence(source=source, output=result.text, src_tokens=result.src_tokens, tgt_tokens=result.tokens,
                    cross=result.attention["cross"], log_prob=result.log_prob,
                    stopped_at_limit=result.stopped_at_limit,
                    unk_piece=tokenizer.source_id_to_piece([tokenizer.unk_id])[0])


def check_diagnosable(translator, options) -> None:
    """Diagnostics read the best hypothesis's cross-attention and log-probability: beam search on an engine
    that returns maps."""
    caps = translator.backend.capabilities
    if not caps.attention_maps:
        raise AiaynError(f"diagnostics read the cross-attention maps, which the {caps.name} engine does not return: "
                         f"use --engine native")
    if options is not None and options.sampling is not None:
        raise AiaynError("diagnostics read beam search's attention maps: drop sampling (--sample)")


def translate_diagnosed(translator, sentences: list[str], options=None, *, target_prefix=None,
                        thresholds: Thresholds = DEFAULT_THRESHOLDS, **overrides) -> list:
    """Translator.translate with each Translation's `diagnostics` filled in (a blank line: nothing flagged).
    The maps are searched for and dropped again unless options (or overrides) ask for them."""
    from aiayn.decoding.options import DecodeOptions

    options = (options or DecodeOptions()).overridden(**overrides)
    check_diagnosable(translator, options)
    results = translator.translate(sentences, options=options.overridden(return_attention=True),
                                   target_prefix=target_prefix)
    for source, result in zip(sentences, results):
        result.diagnostics = no_diagnostics() if result.attention is None else \
            diagnose(evidence_of(result, source, translator.tokenizer), thresholds)
        if not options.return_attention:
            result.attention = None
    return results


def forced_evidence(translator, source: str, output: str) -> Evidence:
    """The Evidence of a given output (teacher forcing, one pass: its maps and log-probability under the
    model, </s> included, as if the search had written it); for outputs the search did not make."""
    import torch

    from aiayn.decoding.batches import encode_sources

    tok, device = translator.tokenizer, translator.device
    src_ids, tgt_ids = encode_sources(tok, [source])[0], tok.encode_target([output])[0] + [tok.eos_id]
    if max(len(src_ids), len(tgt_ids)) > translator.max_positions:
        raise AiaynError(f"the source or output is longer than the model's {translator.max_positions} positions")
    with torch.inference_mode():
        logits, maps = translator.model(torch.tensor([src_ids], device=device),
                                        torch.tensor([[tok.bos_id] + tgt_ids[:-1]], device=device),
                                        return_attention=True)
        log_probs = torch.log_softmax(logits[0].float(), dim=-1)  # (T, V)
        log_prob = float(log_probs[torch.arange(len(tgt_ids)), torch.tensor(tgt_ids, device=device)].sum())
    return Evidence(source=source, output=output, src_tokens=tok.source_id_to_piece(src_ids),
                    tgt_tokens=tok.id_to_piece(tgt_ids[:-1]), cross=maps["cross"][0].float().cpu().numpy(),
                    log_prob=log_prob, unk_piece=tok.source_id_to_piece([tok.unk_id])[0])


def diagnose_output(translator, source: str, output: str, *, stopped_at_limit: bool = False,
                    thresholds: Thresholds = DEFAULT_THRESHOLDS) -> dict:
    """The diagnostics of a given output of `source` (teacher forcing: forced_evidence); stopped_at_limit:
    whether the search that wrote it stopped at its length limit."""
    evidence = forced_evidence(translator, source, output)
    return diagnose(replace(evidence, stopped_at_limit=stopped_at_limit), thresholds)


def flag_counts(results) -> dict:
    """Per flag, how many of the results raised it (every flag listed, 0 included)."""
    counts = dict.fromkeys(FLAGS, 0)
    for result in results:
        for flag in (result.diagnostics or no_diagnostics())["flags"]:
            counts[flag] += 1
    return counts
