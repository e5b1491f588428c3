"""Diagnostics of a translation: each signal of aiayn.inspect.quality.signals measured on its tokens,
log-probability and cross-attention, compared with its threshold (aiayn.inspect.quality.thresholds), and
the flags they raise.

Each signal reports {"value", "threshold", "rule", "flag", "flagged"}, and so does the combined score
(aiayn.inspect.quality.combined) where the model's thresholds.json holds one; the flags are the codes of the
signals (and score) that fired, in a fixed order (each code once).
"""

from dataclasses import replace

import numpy as np

from aiayn.errors import AiaynError
from aiayn.inspect.quality.signals import FLAGS, SIGNALS, Evidence, attention_signals
from aiayn.inspect.quality.thresholds import DEFAULT_THRESHOLDS, Thresholds, model_thresholds

COMBINED_FLAG = "hallucination"  # what the combined score was fitted to find


def _fires(value, threshold, rule: str) -> bool:
    return bool({">": lambda: value > threshold, "<": lambda: value < threshold, ">=": lambda: value >= threshold,
                 "is": lambda: value is threshold,
                 "outside": lambda: not threshold[0] <= value <= threshold[1]}[rule]())


def _threshold(thresholds: Thresholds, name: str):
    """A signal's threshold under `thresholds` (a range as a [low, high] list, as JSON writes it)."""
    threshold = getattr(thresholds, name)
    return list(threshold) if isinstance(threshold, tuple) else threshold


def _report(value, threshold, rule: str, flag: str) -> dict:
    fired = _fires(value, threshold, rule)
    value = round(float(value), 4) if isinstance(value, (float, np.floating)) else value
    return {"value": value, "threshold": threshold, "rule": rule, "flag": flag, "flagged": fired}


def combined_report(diagnostics: dict, thresholds: Thresholds) -> dict | None:
    """The combined score of a diagnose() result's (rounded) signal values under thresholds.combined, as
    {"value", "threshold", "rule", "flag", "flagged"}; None without a stored score (or where one of its
    signals was not measured)."""
    if thresholds.combined is None:
        return None
    score = thresholds.combined.score_of(diagnostics)
    return None if score is None else _report(score, thresholds.combined.threshold, ">", COMBINED_FLAG)


def flags_under(diagnostics: dict, thresholds: Thresholds) -> list[str]:
    """The flags a diagnose() result raises under other thresholds: its signals' (rounded) values judged again,
    and the combined score where thresholds hold one."""
    fired = {s["flag"] for name, s in diagnostics["signals"].items()
             if _fires(s["value"], _threshold(thresholds, name), s["rule"])}
    combined = combined_report(diagnostics, thresholds)
    fired |= {combined["flag"]} if combined is not None and combined["flagged"] else set()
    return [f for f in FLAGS if f in fired]


def diagnose(evidence: Evidence, thresholds: Thresholds = DEFAULT_THRESHOLDS) -> dict:
    """-> {"flags": [codes], "signals": {name: {"value", "threshold", "rule", "flag", "flagged"}},
    "uncovered_words": [...]}, "combined" (the same report of the combined score) where the thresholds hold
    one, and where the evidence has source shares "source_contribution" (the signal's
    value) and "token_source_contribution" (one share per output token, </s> left out). A signal whose
    evidence is missing (source_contribution without source_shares) is left out."""
    measured = {s: s.measure(evidence) for s in SIGNALS}
    signals = {s.name: _report(value, _threshold(thresholds, s.name), s.rule, s.flag)
               for s, value in measured.items() if value is not None}
    words = attention_signals(evidence.cross, evidence.src_tokens, evidence.tgt_tokens)[2]
    found = {"flags": [], "signals": signals, "uncovered_words": words}
    combined = combined_report(found, thresholds)
    fired = {s["flag"] for s in signals.values() if s["flagged"]}
    if combined is not None:
        found["combined"] = combined
        fired |= {COMBINED_FLAG} if combined["flagged"] else set()
    found["flags"] = [f for f in FLAGS if f in fired]
    if evidence.source_shares is not None:  # a token under 0.5 comes mostly from the target prefix
        found["source_contribution"] = signals["source_contribution"]["value"]
        found["token_source_contribution"] = [round(float(x), 4)
                                              for x in evidence.source_shares[: len(evidence.tgt_tokens)]]
    return found


def no_diagnostics() -> dict:
    """A blank line's diagnostics: nothing to judge, nothing flagged."""
    return {"flags": [], "signals": {}, "uncovered_words": []}


def source_shares(model, src_ids: list[int], out_ids: list[int], bos_id: int) -> np.ndarray | None:
    """Teacher forcing the output's tokens (without </s>): per output step, the tokens then </s>, the share of
    the decoder's prediction that comes from the source (ALTI+ rolled out over the layers,
    aiayn.inspect.contributions), (T + 1,). None for a model without layers of heads (an RNN, an ensemble)."""
    import torch

    from aiayn.inspect.contributions import measure_contributions

    if not getattr(model, "multi_head", False) or not hasattr(model, "encoder_layers"):
        return None
    device = next(model.parameters()).device
    src = torch.tensor([src_ids], device=device)  # (1, S)
    tgt_in = torch.tensor([[bos_id] + out_ids], device=device)  # (1, T + 1): <s> y_1 .. y_T
    return measure_contributions(model, src, tgt_in).source_share[0].float().cpu().numpy()


def evidence_of(result, source: str, translator) -> Evidence:
    """The Evidence of a Translation made with return_attention (its best hypothesis, as searched), with its
    source shares measured by teacher forcing its tokens."""
    tok = translator.tokenizer
    shares = source_shares(translator.model, [tok.source_piece_to_id(p) for p in result.src_tokens],
                           [tok.piece_to_id(p) for p in result.tokens], tok.bos_id)
    return Evidence(source=source, output=result.text, src_tokens=result.src_tokens, tgt_tokens=result.tokens,
                    cross=result.attention["cross"], log_prob=result.log_prob,
                    stopped_at_limit=result.stopped_at_limit,
                    unk_piece=tok.source_id_to_piece([tok.unk_id])[0], source_shares=shares)


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
                        thresholds: Thresholds | None = None, **overrides) -> list:
    """Translator.translate with each Translation's `diagnostics` filled in (a blank line: nothing flagged),
    judged by `thresholds` (None: the model's stored ones, else the defaults: thresholds.model_thresholds).
    The maps are searched for and dropped again unless options (or overrides) ask for them."""
    from aiayn.decoding.options import DecodeOptions

    options = (options or DecodeOptions()).overridden(**overrides)
    check_diagnosable(translator, options)
    thresholds = thresholds or model_thresholds(translator)
    results = translator.translate(sentences, options=options.overridden(return_attention=True),
                                   target_prefix=target_prefix)
    for source, result in zip(sentences, results):
        result.diagnostics = no_diagnostics() if result.attention is None else \
            diagnose(evidence_of(result, source, translator), thresholds)
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
                    log_prob=log_prob, unk_piece=tok.source_id_to_piece([tok.unk_id])[0],
                    source_shares=source_shares(translator.model, src_ids, tgt_ids[:-1], tok.bos_id))


def diagnose_output(translator, source: str, output: str, *, stopped_at_limit: bool = False,
                    thresholds: Thresholds | None = None) -> dict:
    """The diagnostics of a given output of `source` (teacher forcing: forced_evidence); stopped_at_limit:
    whether the search that wrote it stopped at its length limit; thresholds: as translate_diagnosed's."""
    evidence = forced_evidence(translator, source, output)
    return diagnose(replace(evidence, stopped_at_limit=stopped_at_limit), thresholds or model_thresholds(translator))


def flag_counts(results) -> dict:
    """Per flag, how many of the results raised it (every flag listed, 0 included)."""
    counts = dict.fromkeys(FLAGS, 0)
    for result in results:
        for flag in (result.diagnostics or no_diagnostics())["flags"]:
            counts[flag] += 1
    return counts
