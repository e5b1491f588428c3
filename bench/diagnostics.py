"""How well the translation diagnostics (aiayn.inspect.quality.diagnostics) find broken outputs, measured.

    python bench/diagnostics.py MODEL --data-dir ../shared/data/multi30k [--pair de-en] [--limit N]

1. Thresholds on Multi30k val: the model's own outputs (clean), each measured signal's tail of the same
   size q on its suspect side (aiayn.inspect.quality.signals: the q-th percentile of log_prob, the (100-q)-th of
   eos_attention, uncovered_share, source_copy, repeat_run, both q/2 tails of length_ratio), q the largest
   of 1.0%, 0.9%, ... 0.1% for which all the flags together fire on at most FLAG_BUDGET of val. These are
   the defaults in aiayn/inspect/quality/thresholds.py.
2. On test_2016_flickr, with those thresholds: the clean outputs (negatives, and the false-flag rate), and
   injected pathologies (positives):
   - hallucination: the source perturbed as in Lee et al. 2019 (one rare source piece put at its start) and
     translated; the output counts as hallucinated when its chrF against the unperturbed output is below
     HALLUCINATION_CHRF (perturbed outputs that stay close are left out);
   - detached: the model's own clean output of the next sentence given as this one's (a fluent output with
     nothing of its source: a fully detached hallucination, Guerreiro et al. 2023), where the two outputs'
     chrF is below HALLUCINATION_CHRF;
   - cut short: the clean output's first half (outputs of 4 words or more);
   - repetition: an n-gram (1-3 words) of the clean output written three times in a row in its place;
   - copy: the source itself as the output.
   Injected outputs are judged by teacher forcing (aiayn.inspect.quality.diagnostics.forced_evidence).
Prints each signal's AUROC per pathology (bench/roc.py) with the best signal's 95% bootstrap interval,
the share of each pathology flagged, and the share of clean outputs flagged, as a Markdown table, then
every signal's interval for the hallucination kinds; --json writes everything.
"""

import argparse
import json
import random
import time
from dataclasses import replace

import numpy as np
from roc import auroc, auroc_interval  # bench/roc.py, beside this script

from aiayn.decoding.translator import Translator
from aiayn.evaluation import corpus_bleu, load_test_set
from aiayn.inspect.quality.diagnostics import diagnose, flags_under, forced_evidence, translate_diagnosed
from aiayn.inspect.quality.signals import SIGNALS as ALL_SIGNALS
from aiayn.inspect.quality.thresholds import Thresholds

HALLUCINATION_CHRF = 30.0  # chrF of a perturbed source's output against the unperturbed one's, below: hallucinated
N_RARE = 50  # the perturbing pieces: the source vocabulary's last N_RARE ordinary pieces (its rarest merges)
TRIES = 4  # perturbations tried per sentence (another rare word where the previous left the output alone)
FLAG_BUDGET = 0.04  # the share of clean val outputs all flags together may raise: each signal's 1% tail
# added up to 5.1% of clean test outputs over six signals; 4% on val leaves room for the step to test
# the measured signals (those with a suspect side); the others are fixed rules
MEASURED = tuple(s for s in ALL_SIGNALS if s.suspect is not None)
SIGNALS = tuple(s.name for s in MEASURED)


def suspicion(signal, value: float, usual: dict) -> float:
    """A signal's value as a score where higher means more suspect (both sides suspect, as the length ratio:
    its distance, in log, from its usual value, the median on val: `usual`)."""
    if signal.suspect == "low":
        return -value
    if signal.suspect == "both":
        return abs(np.log(max(value, 1e-3) / usual[signal.name]))
    return float(value)


def values(diagnostics: list[dict], name: str) -> np.ndarray:
    return np.array([d["signals"][name]["value"] for d in diagnostics], dtype=np.float64)


def threshold_at(signal, values: np.ndarray, tail: float):
    """A signal's `tail` (a percentage) on the suspect side of clean values, settled into a threshold (both
    sides: tail/2 on each, a (low, high) pair)."""
    if signal.suspect == "both":
        return tuple(signal.settle(p) for p in np.percentile(values, [tail / 2, 100 - tail / 2]))
    return signal.settle(np.percentile(values, tail if signal.suspect == "low" else 100 - tail))


def thresholds_at(val: list[dict], tail: float) -> Thresholds:
    """Each measured signal's `tail` (a percentage) on clean val outputs, rounded (see the module docstring)."""
    return replace(Thresholds(), **{s.name: threshold_at(s, values(val, s.name), tail) for s in MEASURED})


def flagged_at(val: list[dict], t: Thresholds) -> float:
    """The share of clean val outputs that raise any flag under thresholds t."""
    return float(np.mean([bool(flags_under(d, t)) for d in val if d["signals"]]))


def thresholds_on(val: list[dict]) -> tuple[Thresholds, float]:
    """-> (the thresholds of the largest tail that keeps val's flagged share within FLAG_BUDGET, that tail)."""
    for tail in np.arange(1.0, 0.05, -0.1):
        thresholds = thresholds_at(val, float(tail))
        if flagged_at(val, thresholds) <= FLAG_BUDGET:
            break
    return thresholds, round(float(tail), 1)


def rare_pieces(translator) -> list[str]:
    tok = translator.tokenizer
    pieces = tok.source_id_to_piece(list(range(tok.src_vocab_size)))
    words = [p for p in pieces if p.startswith("▁") and len(p) > 2 and p[1:].isalpha()]
    return [p[1:] for p in words[-N_RARE:]]


def chrf(hyp: str, ref: str) -> float:
    from sacrebleu.metrics import CHRF

    return CHRF().sentence_score(hyp, [ref]).score


def repeated(words: list[str], rng: random.Random) -> str:
    n = rng.randint(1, min(3, len(words)))
    start = rng.randint(0, len(words) - n)
    gram = words[start: start + n]
    return " ".join(words[:start] + gram * 3 + words[start + n:])


def injected(translator, sources: list[str], clean, thresholds: Thresholds, seed: int) -> dict:
    """Per pathology, the diagnostics of its injected outputs."""
    rng, rare = random.Random(seed), rare_pieces(translator)
    hallucinated, left = [], list(range(len(sources)))
    for attempt in range(TRIES):  # Lee et al.: a rare word at the start; another where the first did nothing
        perturbed = [f"{rare[(i + attempt * 17) % len(rare)]} {sources[i]}" for i in left]
        outputs = translator.translate(perturbed)  # without maps: only the hits are diagnosed, below
        found = [chrf(r.text, clean[i].text) < HALLUCINATION_CHRF for i, r in zip(left, outputs)]
        hits = [p for p, hit in zip(perturbed, found) if hit]
        hallucinated += [r.diagnostics for r in translate_diagnosed(translator, hits, thresholds=thresholds)] \
            if hits else []
        left = [i for i, hit in zip(left, found) if not hit]

    def forced(pairs):
        return [diagnose(forced_evidence(translator, s, o), thresholds) for s, o in pairs]

    outs = [(s, c.text.split()) for s, c in zip(sources, clean) if c.text.strip()]
    others = [(sources[i], clean[(i + 1) % len(clean)].text) for i in range(len(sources))]
    return {"hallucination": hallucinated,
            "detached": forced([(s, o) for (s, o), c in zip(others, clean)
                                if o.strip() and chrf(o, c.text) < HALLUCINATION_CHRF]),
            "cut short": forced([(s, " ".join(w[: len(w) // 2])) for s, w in outs if len(w) >= 4]),
            "repetition": forced([(s, repeated(w, rng)) for s, w in outs]),
            "copy": forced([(s, s) for s in sources])}


def flagged_share(diagnostics: list[dict], flag: str | None = None) -> float:
    hits = [bool(d["flags"]) if flag is None else flag in d["flags"] for d in diagnostics]
    return float(np.mean(hits)) if hits else float("nan")


def report(clean: list[dict], kinds: dict, usual: dict) -> dict:
    table = {}
    for kind, positives in kinds.items():
        scores = {s.name: ([suspicion(s, v, usual) for v in values(positives, s.name)],
                           [suspicion(s, v, usual) for v in values(clean, s.name)]) for s in MEASURED}
        row = {name: auroc(*pair) for name, pair in scores.items()} if positives else {}
        if row:  # the 95% bootstrap intervals: wide for a kind with few cases
            row["intervals"] = {name: auroc_interval(*pair) for name, pair in scores.items()}
            row["best"] = max(SIGNALS, key=row.get)
            row["interval"] = row["intervals"][row["best"]]
        row.update(n=len(positives), flagged=flagged_share(positives))
        table[kind] = row
    flags = sorted({s["flag"] for d in clean for s in d["signals"].values()})
    false_flags = {flag: flagged_share(clean, flag) for flag in flags}
    false_flags["any"] = flagged_share(clean)
    return {"auroc": table, "false_flags": false_flags}


def markdown(result: dict) -> str:
    lines = ["| pathology | n | " + " | ".join(SIGNALS) + " | best's 95% interval | flagged |",
             "|---|---:|" + "---:|" * (len(SIGNALS) + 2)]
    for kind, row in result["auroc"].items():
        cells = " | ".join(f"{row[name]:.3f}" if name in row else "-" for name in SIGNALS)
        interval = "{:.3f}-{:.3f}".format(*row["interval"]) if "interval" in row else "-"
        lines.append(f"| {kind} | {row['n']} | {cells} | {interval} | {row['flagged']:.1%} |")
    lines.append("")
    for kind in ("hallucination", "detached"):
        if "intervals" in result["auroc"].get(kind, {}):
            lines.append(f"{kind}, 95% intervals: " + ", ".join(
                "{} {:.3f}-{:.3f}".format(name, *pair) for name, pair in result["auroc"][kind]["intervals"].items()))
    lines.append("clean test outputs flagged: " + ", ".join(f"{k} {v:.1%}" for k, v in result["false_flags"].items()))
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--data-dir")
    ap.add_argument("--pair", default="de-en")
    ap.add_argument("--limit", type=int, help="only the first N sentences of each split (a quick run)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", help="write the thresholds, BLEU and the table here")
    args = ap.parse_args()
    translator = Translator.from_pretrained(args.model)
    val_src, _ = load_test_set(dataset="multi30k", pair=args.pair, split="val", data_dir=args.data_dir)
    test_src, test_ref = load_test_set(dataset="multi30k", pair=args.pair, split="test_2016_flickr",
                                       data_dir=args.data_dir)
    val_src, test_src, test_ref = val_src[: args.limit], test_src[: args.limit], test_ref[: args.limit]
    start = time.perf_counter()
    val = [r.diagnostics for r in translate_diagnosed(translator, val_src)]
    thresholds, tail = thresholds_on(val)
    usual = {s.name: float(np.median(values(val, s.name))) for s in MEASURED if s.suspect == "both"}
    print(f"thresholds (val, each signal's {tail}% tail, {flagged_at(val, thresholds):.1%} of val flagged, "
          f"{time.perf_counter() - start:.0f} s): {thresholds}", flush=True)
    clean = translate_diagnosed(translator, test_src, thresholds=thresholds)
    bleu = corpus_bleu([r.text for r in clean], test_ref).score
    print(f"test BLEU {bleu:.2f} ({len(clean)} sentences, {time.perf_counter() - start:.0f} s)", flush=True)
    result = report([r.diagnostics for r in clean], injected(translator, test_src, clean, thresholds, args.seed),
                    usual)
    result.update(bleu=bleu, thresholds=vars(thresholds), tail_percent=tail,
                  val_flagged=flagged_at(val, thresholds), sentences=len(clean), usual=usual,
                  seconds=round(time.perf_counter() - start))
    print(markdown(result))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
