"""How well the translation diagnostics (aiayn.inspect.quality.diagnostics) find broken outputs, measured.

    python bench/diagnostics.py MODEL --data-dir ../shared/data/multi30k [--pair de-en] [--limit N]
        [--natural-limit N] [--close N]

1. Thresholds on Multi30k val: the model's own outputs (clean), settled as `aiayn calibrate` does
   (aiayn.inspect.quality.calibration: each measured signal's tail of the same size q on its suspect side,
   q the largest of 1.0%, 0.9%, ... 0.1% for which all the flags together fire on at most 4% of val).
2. Injected pathologies, on val and on test_2016_flickr alike (positives), against the model's own clean
   outputs (negatives): the hallucination kinds of Guerreiro et al. 2023 and Lee et al. 2019 (perturbed,
   detached, half detached, source cut, oscillation) and two others reported apart (copy, cut short), as
   aiayn.inspect.quality.injection describes and makes them; all but perturbed judged by teacher forcing.
3. Natural hallucinations (aiayn.inspect.quality.injection.NATURAL), on test and on val alike: the first
   --natural-limit sentences of each split (default: all) perturbed by each of five minimal perturbations
   (rare words, a made-up word, letters swapped, repeated punctuation) and translated by the search; an
   output whose chrF against the unperturbed sentence's output is below HALLUCINATION_CHRF is a natural
   hallucination (Lee et al. 2019's rule). Each signal's AUROC is reported for them against the split's
   clean outputs, and, the harder question the published detectors answer, against the perturbed outputs
   that stayed close (chrF at or above HALLUCINATION_CHRF; the first --close of each kind); and those close
   ones against the clean outputs, what the perturbation alone does to each signal.
4. A combined score (aiayn.inspect.quality.combined), the one `aiayn calibrate` stores with a model
   (aiayn.inspect.quality.calibration.combined_on, on the first --limit val sentences): a logistic regression
   over every measured signal's suspicion (standardized), fitted on val only (clean: val's outputs and the
   perturbed outputs that stayed close; hallucinated: val's injected and natural hallucinations; each group
   weighing the same within its class), its threshold the same tail of val's clean outputs as the
   signals', then applied to test.
Prints, for test, each signal's and the combined score's AUROC per kind (bench/roc.py) with its 95% bootstrap
interval (for the natural hallucinations, whole source sentences drawn: a sentence can hallucinate under
several perturbations), the paired bootstrap interval of the combined score's AUROC less the best single signal's, the
share of each kind flagged under the val thresholds, and the share of clean outputs flagged, as Markdown;
--json writes everything.
"""

import argparse
import json

import numpy as np
from roc import auroc, auroc_difference_interval, auroc_interval  # bench/roc.py, beside this script

from aiayn.decoding.translator import Translator
from aiayn.evaluation import corpus_bleu, load_test_set
from aiayn.inspect.quality.calibration import MEASURED, combined_on, flagged_share, thresholds_on
from aiayn.inspect.quality.combined import suspicions
from aiayn.inspect.quality.diagnostics import translate_diagnosed
from aiayn.inspect.quality.injection import HALLUCINATIONS, NATURAL, injected, natural_search
from aiayn.inspect.quality.thresholds import DEFAULT_THRESHOLDS, Thresholds

POOLED = "all hallucinations"
NATURAL_POOL = "all natural"
CLOSE = "stayed close"
COMBINED = "combined"
SIGNALS = tuple(s.name for s in MEASURED)


def with_pool(kinds: dict) -> dict:
    return {**kinds, POOLED: [d for k in HALLUCINATIONS for d in kinds[k]]}


def scores(diagnostics: list[dict], combined) -> dict:
    """Per signal (and the combined score), the suspicion of each output, (N,) each."""
    x = suspicions(diagnostics, combined)
    return {**{name: x[:, j] for j, name in enumerate(combined.signals)}, COMBINED: combined.scores(x)}


def report(clean: list[dict], kinds: dict, combined, groups: dict | None = None, clean_groups=None) -> dict:
    """Each kind's AUROCs against `clean`, with bootstrap intervals; groups: per kind, the source sentence of
    each of its outputs, and clean_groups the clean outputs', where several can come from one sentence (the
    bootstrap then draws sentences: roc.Resampler)."""
    negatives, table = scores(clean, combined), {}
    for kind, positives in kinds.items():
        row = {"n": len(positives), "flagged": float(np.mean([bool(d["flags"]) for d in positives]))
               if positives else float("nan")}
        if positives:
            found = scores(positives, combined)
            by = {"positive_groups": (groups or {}).get(kind), "negative_groups": clean_groups}
            row["auroc"] = {name: auroc(found[name], negatives[name]) for name in found}
            row["interval"] = {name: auroc_interval(found[name], negatives[name], **by) for name in found}
            best = max(SIGNALS, key=row["auroc"].get)  # the combined score against the best single signal
            row["combined_minus_best"] = {"signal": best, "interval": auroc_difference_interval(
                found[COMBINED], negatives[COMBINED], found[best], negatives[best], **by)}
        table[kind] = row
    flags = sorted({s["flag"] for d in clean for s in [*d["signals"].values(), *filter(None, [d.get("combined")])]})
    false_flags = {flag: float(np.mean([flag in d["flags"] for d in clean])) for flag in flags}
    false_flags["any"] = float(np.mean([bool(d["flags"]) for d in clean]))
    return {"kinds": table, "false_flags": false_flags}


def table(rows: dict, first: str = "injected kind") -> list[str]:
    """Markdown rows: per kind, each signal's and the combined score's AUROC with its interval, the share flagged."""
    names = (*SIGNALS, COMBINED)
    lines = [f"| {first} | n | " + " | ".join(f"`{n}`" for n in names) + " | flagged |",
             "|---|---:|" + "---:|" * (len(names) + 1)]
    for kind, row in rows.items():
        if "auroc" not in row:
            lines.append(f"| {kind} | 0 |" + " - |" * (len(names) + 1))
            continue
        best = max(SIGNALS, key=row["auroc"].get)
        cells = []
        for name in names:
            low, high = row["interval"][name]
            cell = f"{row['auroc'][name]:.3f} ({low:.3f}-{high:.3f})"
            cells.append(f"**{cell}**" if name == best else cell)
        lines.append(f"| {kind} | {row['n']} | " + " | ".join(cells) + f" | {row['flagged']:.1%} |")
    return lines


def markdown(result: dict) -> str:
    lines = table(result["kinds"])
    lines.append("")
    lines.append("combined minus the best single signal, paired 95% bootstrap interval: " + ", ".join(
        "{} (vs {}) {:+.3f} to {:+.3f}".format(kind, row["combined_minus_best"]["signal"],
                                               *row["combined_minus_best"]["interval"])
        for kind, row in result["kinds"].items() if "combined_minus_best" in row))
    lines.append("clean test outputs flagged: " + ", ".join(f"{k} {v:.1%}" for k, v in result["false_flags"].items()))
    weights = result["combined_weights"]
    lines.append("combined score (log-odds, standardized signals): " +
                 ", ".join(f"{k} {v:+.2f}" for k, v in weights.items()))
    for split in ("test", "val"):
        found = result.get("natural", {}).get(split)
        if found:
            lines += ["", f"natural hallucinations of {found['tried']} {split} sentences, against the clean {split} "
                      "outputs:", *table(found["against_clean"]["kinds"], "natural kind"),
                      "", f"the same against {found['close']} perturbed outputs that stayed close:",
                      *table(found["against_close"]["kinds"], "natural kind"),
                      "", "the perturbed outputs that stayed close (not hallucinations) against the clean ones:",
                      *table(found["close_against_clean"]["kinds"], "perturbed")]
    return "\n".join(lines)


def natural_run(translator, sources: list[str], thresholds: Thresholds, seed: int, close_per_kind: int):
    """-> (per NATURAL kind and pooled, the natural hallucinations' diagnostics; per kind and pooled, the
    source sentence of each; the diagnostics of the first close_per_kind perturbed outputs of each kind that
    stayed close; their source sentences)."""
    sources = [s for s in sources if s.strip()]
    clean = [r.text for r in translator.translate(sources)]
    found, close = natural_search(translator, sources, clean, thresholds, seed, close_per_kind)
    print("natural: " + ", ".join(f"{kind} {len(found[kind])}" for kind in NATURAL) + f" of {len(sources)}",
          flush=True)
    found[NATURAL_POOL] = [x for k in NATURAL for x in found[k]]
    return ({k: [d for _, d in v] for k, v in found.items()}, {k: [i for i, _ in v] for k, v in found.items()},
            [d for _, d in close], [i for i, _ in close])


def natural_report(translator, sources: list[str], clean: list[dict], thresholds: Thresholds, seed: int,
                   close_per_kind: int) -> dict:
    """The natural hallucinations of `sources` judged against `clean` (the split's clean outputs'
    diagnostics) and against the perturbed outputs that stayed close; the bootstrap draws source sentences."""
    found, groups, close, close_groups = natural_run(translator, sources, thresholds, seed, close_per_kind)
    return {"tried": len(sources), "close": len(close),
            "against_clean": report(clean, found, thresholds.combined, groups),
            "against_close": report(close, found, thresholds.combined, groups, close_groups),
            # how far the perturbation alone moves each signal: the close ones (not hallucinations) vs clean
            "close_against_clean": report(clean, {CLOSE: close}, thresholds.combined, {CLOSE: close_groups})}


def split_run(translator, sources: list[str], thresholds: Thresholds, seed: int):
    """-> (the model's clean outputs, their diagnostics, the injected kinds' diagnostics)."""
    clean = translate_diagnosed(translator, sources, thresholds=thresholds)
    kept = [i for i, r in enumerate(clean) if r.diagnostics["signals"]]  # blank lines left out
    sources, clean = [sources[i] for i in kept], [clean[i] for i in kept]
    return clean, [r.diagnostics for r in clean], with_pool(injected(translator, sources, clean, thresholds, seed))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--data-dir")
    ap.add_argument("--pair", default="de-en")
    ap.add_argument("--limit", type=int, default=400, help="only the first N sentences of each split "
                    "(default: 400)")
    ap.add_argument("--natural-limit", type=int, help="perturb only the first N sentences of each split for the "
                    "natural hallucinations (default: all; 0: none)")
    ap.add_argument("--close", type=int, default=100, help="perturbed outputs that stayed close, per natural "
                    "kind, to judge the natural hallucinations against (default: 100)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", help="write the thresholds, BLEU and the table here")
    args = ap.parse_args()
    translator = Translator.from_pretrained(args.model)
    val_src, _ = load_test_set(dataset="multi30k", pair=args.pair, split="val", data_dir=args.data_dir)
    test_src, test_ref = load_test_set(dataset="multi30k", pair=args.pair, split="test_2016_flickr",
                                       data_dir=args.data_dir)
    natural_src = {"val": val_src[: args.natural_limit], "test": test_src[: args.natural_limit]}
    val_src, test_src, test_ref = val_src[: args.limit], test_src[: args.limit], test_ref[: args.limit]
    # as `aiayn calibrate` does (aiayn.inspect.quality.calibration): the combined score fitted on val's outputs,
    # its threshold settled with the signals' by the same tail
    val_clean = translate_diagnosed(translator, val_src, thresholds=DEFAULT_THRESHOLDS)
    combined = combined_on(translator, val_src, val_clean)
    val = [r.diagnostics for r in val_clean if r.diagnostics["signals"]]
    thresholds, tail = thresholds_on(val, combined)
    print(f"thresholds (val, each signal's {tail}% tail, {flagged_share(val, thresholds):.1%} of val flagged): "
          f"{thresholds}", flush=True)
    clean, test, test_kinds = split_run(translator, test_src, thresholds, args.seed + 1)
    bleu = corpus_bleu([r.text for r in clean], test_ref).score
    print(f"test BLEU {bleu:.2f} ({len(clean)} sentences)", flush=True)
    result = report(test, test_kinds, thresholds.combined)
    values = {k: v for k, v in vars(thresholds).items() if k != "combined"}
    weights = dict(zip(combined.signals + ("bias",), np.round([*combined.weights, combined.bias], 3).tolist()))
    result.update(bleu=bleu, thresholds=values, combined=thresholds.combined.to_dict(), tail_percent=tail,
                  val_flagged=flagged_share(val, thresholds), sentences=len(clean),
                  combined_weights=weights)
    if args.natural_limit != 0:  # the val thresholds and combined score judge both splits
        result["natural"] = {split: natural_report(translator, natural_src[split], diagnostics, thresholds, seed,
                                                   args.close)
                             for split, diagnostics, seed in (("test", test, args.seed + 1), ("val", val, args.seed))}
    print(markdown(result))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
