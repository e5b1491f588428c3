"""How well the translation diagnostics (aiayn.inspect.quality.diagnostics) find broken outputs, measured.

    python bench/diagnostics.py MODEL --data-dir ../shared/data/multi30k [--pair de-en] [--limit N]

1. Thresholds on Multi30k val: the model's own outputs (clean), settled as `aiayn calibrate` does
   (aiayn.inspect.quality.calibration: each measured signal's tail of the same size q on its suspect side,
   q the largest of 1.0%, 0.9%, ... 0.1% for which all the flags together fire on at most 4% of val).
2. Injected pathologies, on val and on test_2016_flickr alike (positives), against the model's own clean
   outputs (negatives). Hallucinations, the kinds of Guerreiro et al. 2023 and Lee et al. 2019:
   - perturbed: the source perturbed as in Lee et al. 2019 (one rare source piece put at its start) and
     translated by the search; kept when the output's chrF against the unperturbed output is below
     HALLUCINATION_CHRF (perturbed outputs that stay close are left out);
   - detached: the model's own clean output of another sentence given as this one's (fully detached), kept
     where the two outputs' chrF is below HALLUCINATION_CHRF;
   - half detached: the clean output's first half, then the second half of another sentence's output
     (strongly detached: half of it has nothing to do with the source);
   - source cut: the clean output given for the source's first half (sources of 4 words or more): its second
     half says what the source no longer does;
   - oscillation: an n-gram (1-3 words) of the clean output written three times in a row in its place.
   Other pathologies, reported apart (not hallucinations): copy, the source itself as the output; cut short,
   the clean output's first half (an omission).
   Injected outputs are judged by teacher forcing (aiayn.inspect.quality.diagnostics.forced_evidence).
3. A combined score: a logistic regression over every measured signal's suspicion (standardized), fitted on
   val only (clean outputs against val's injected hallucinations, the two classes weighed equally), then
   applied to test.
Prints, for test, each signal's and the combined score's AUROC per kind (bench/roc.py) with its 95% bootstrap
interval, the paired bootstrap interval of the combined score's AUROC less the best single signal's, the
share of each kind flagged under the val thresholds, and the share of clean outputs flagged, as Markdown;
--json writes everything.
"""

import argparse
import json
import random

import numpy as np
from roc import auroc, auroc_difference_interval, auroc_interval  # bench/roc.py, beside this script

from aiayn.decoding.translator import Translator
from aiayn.evaluation import corpus_bleu, load_test_set
from aiayn.inspect.quality.calibration import MEASURED, flagged_share, signal_values, thresholds_on
from aiayn.inspect.quality.diagnostics import diagnose, forced_evidence, translate_diagnosed
from aiayn.inspect.quality.thresholds import DEFAULT_THRESHOLDS, Thresholds

HALLUCINATION_CHRF = 30.0  # chrF of an output against the source's own clean output, below: hallucinated
N_RARE = 50  # the perturbing pieces: the source vocabulary's last N_RARE ordinary pieces (its rarest merges)
TRIES = 2  # perturbations tried per sentence (another rare word where the previous left the output alone)
HALLUCINATIONS = ("perturbed", "detached", "half detached", "source cut", "oscillation")
OTHERS = ("copy", "cut short")
POOLED = "all hallucinations"
COMBINED = "combined"
SIGNALS = tuple(s.name for s in MEASURED)
L2 = 1e-2  # the logistic regression's ridge, on standardized features


def suspicion(signal, value: float, usual: dict) -> float:
    """A signal's value as a score where higher means more suspect (both sides suspect, as the length ratio:
    its distance, in log, from its usual value, the median on val: `usual`)."""
    if signal.suspect == "low":
        return -value
    if signal.suspect == "both":
        return abs(np.log(max(value, 1e-3) / usual[signal.name]))
    return float(value)


def features(diagnostics: list[dict], usual: dict) -> np.ndarray:
    """(N, len(SIGNALS)): each measured signal's suspicion."""
    return np.array([[suspicion(s, d["signals"][s.name]["value"], usual) for s in MEASURED] for d in diagnostics],
                    dtype=np.float64).reshape(len(diagnostics), len(MEASURED))


def fit_logistic(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Logistic regression by Newton's method, the classes weighed equally, a ridge of L2 on the weights:
    x (N, F), y (N,) of 0/1 -> (mean (F,), scale (F,), weights (F + 1,), bias last) for combined_score."""
    mean, scale = x.mean(0), x.std(0) + 1e-9
    z = np.hstack([(x - mean) / scale, np.ones((len(x), 1))])  # (N, F + 1)
    weight = np.where(y == 1, 0.5 / max(y.sum(), 1), 0.5 / max((1 - y).sum(), 1))  # (N,) each class sums to 1/2
    ridge = np.diag([L2] * x.shape[1] + [0.0])
    w = np.zeros(z.shape[1])
    for _ in range(50):
        p = 1 / (1 + np.exp(-z @ w))
        gradient = z.T @ (weight * (p - y)) + ridge @ w
        hessian = (z * (weight * p * (1 - p))[:, None]).T @ z + ridge
        step = np.linalg.solve(hessian, gradient)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return mean, scale, w


def combined_score(model: tuple, x: np.ndarray) -> np.ndarray:
    """The fitted regression's log-odds of a hallucination, (N,)."""
    mean, scale, w = model
    return (x - mean) / scale @ w[:-1] + w[-1]


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


def perturbed(translator, sources: list[str], clean, thresholds: Thresholds) -> list[dict]:
    """Lee et al.: a rare word put at the source's start; another where the first left the output alone."""
    rare, found, left = rare_pieces(translator), [], list(range(len(sources)))
    for attempt in range(TRIES):
        changed = [f"{rare[(i + attempt * 17) % len(rare)]} {sources[i]}" for i in left]
        outputs = translator.translate(changed)  # without maps: only the hits are diagnosed, below
        hit = [chrf(r.text, clean[i].text) < HALLUCINATION_CHRF for i, r in zip(left, outputs)]
        hits = [c for c, h in zip(changed, hit) if h]
        found += [r.diagnostics for r in translate_diagnosed(translator, hits, thresholds=thresholds)] if hits else []
        left = [i for i, h in zip(left, hit) if not h]
    return found


def injected(translator, sources: list[str], clean, thresholds: Thresholds, seed: int) -> dict:
    """Per kind, the diagnostics of its injected outputs."""
    rng = random.Random(seed)

    def forced(pairs):
        return [diagnose(forced_evidence(translator, s, o), thresholds) for s, o in pairs]

    n = len(sources)
    words = [c.text.split() for c in clean]
    other = [(i + 1 + rng.randrange(n - 1)) % n for i in range(n)]  # another sentence, never this one
    kept = [i for i in range(n) if words[i]]
    return {"perturbed": perturbed(translator, sources, clean, thresholds),
            "detached": forced([(sources[i], clean[other[i]].text) for i in kept
                                if clean[other[i]].text.strip() and
                                chrf(clean[other[i]].text, clean[i].text) < HALLUCINATION_CHRF]),
            "half detached": forced([(sources[i], " ".join(words[i][: len(words[i]) // 2] +
                                                           words[other[i]][len(words[other[i]]) // 2:]))
                                     for i in kept if len(words[i]) >= 4 and len(words[other[i]]) >= 4]),
            "source cut": forced([(" ".join(sources[i].split()[: len(sources[i].split()) // 2]), clean[i].text)
                                  for i in kept if len(sources[i].split()) >= 4]),
            "oscillation": forced([(sources[i], repeated(words[i], rng)) for i in kept]),
            "copy": forced([(s, s) for s in sources if s.strip()]),
            "cut short": forced([(sources[i], " ".join(words[i][: len(words[i]) // 2]))
                                 for i in kept if len(words[i]) >= 4])}


def with_pool(kinds: dict) -> dict:
    return {**kinds, POOLED: [d for k in HALLUCINATIONS for d in kinds[k]]}


def scores(diagnostics: list[dict], usual: dict, regression: tuple) -> dict:
    """Per signal (and the combined score), the suspicion of each output, (N,) each."""
    x = features(diagnostics, usual)
    return {**{name: x[:, j] for j, name in enumerate(SIGNALS)}, COMBINED: combined_score(regression, x)}


def report(clean: list[dict], kinds: dict, usual: dict, regression: tuple) -> dict:
    negatives, table = scores(clean, usual, regression), {}
    for kind, positives in kinds.items():
        row = {"n": len(positives), "flagged": float(np.mean([bool(d["flags"]) for d in positives]))
               if positives else float("nan")}
        if positives:
            found = scores(positives, usual, regression)
            row["auroc"] = {name: auroc(found[name], negatives[name]) for name in found}
            row["interval"] = {name: auroc_interval(found[name], negatives[name]) for name in found}
            best = max(SIGNALS, key=row["auroc"].get)  # the combined score against the best single signal
            row["combined_minus_best"] = {"signal": best, "interval": auroc_difference_interval(
                found[COMBINED], negatives[COMBINED], found[best], negatives[best])}
        table[kind] = row
    flags = sorted({s["flag"] for d in clean for s in d["signals"].values()})
    false_flags = {flag: float(np.mean([flag in d["flags"] for d in clean])) for flag in flags}
    false_flags["any"] = float(np.mean([bool(d["flags"]) for d in clean]))
    return {"kinds": table, "false_flags": false_flags}


def markdown(result: dict) -> str:
    names = (*SIGNALS, COMBINED)
    lines = ["| injected kind | n | " + " | ".join(f"`{n}`" for n in names) + " | flagged |",
             "|---|---:|" + "---:|" * (len(names) + 1)]
    for kind, row in result["kinds"].items():
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
    lines.append("")
    lines.append("combined minus the best single signal, paired 95% bootstrap interval: " + ", ".join(
        "{} (vs {}) {:+.3f} to {:+.3f}".format(kind, row["combined_minus_best"]["signal"],
                                               *row["combined_minus_best"]["interval"])
        for kind, row in result["kinds"].items() if "combined_minus_best" in row))
    lines.append("clean test outputs flagged: " + ", ".join(f"{k} {v:.1%}" for k, v in result["false_flags"].items()))
    weights = result["combined_weights"]
    lines.append("combined score (log-odds, standardized signals): " +
                 ", ".join(f"{k} {v:+.2f}" for k, v in weights.items()))
    return "\n".join(lines)


def split_run(translator, sources: list[str], thresholds: Thresholds | None, seed: int):
    """-> (the model's clean outputs, their diagnostics, the injected kinds' diagnostics)."""
    clean = translate_diagnosed(translator, sources, thresholds=thresholds or DEFAULT_THRESHOLDS)
    return clean, [r.diagnostics for r in clean], with_pool(injected(translator, sources, clean,
                                                                      thresholds or DEFAULT_THRESHOLDS, seed))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--data-dir")
    ap.add_argument("--pair", default="de-en")
    ap.add_argument("--limit", type=int, default=400, help="only the first N sentences of each split "
                    "(default: 400)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", help="write the thresholds, BLEU and the table here")
    args = ap.parse_args()
    translator = Translator.from_pretrained(args.model)
    val_src, _ = load_test_set(dataset="multi30k", pair=args.pair, split="val", data_dir=args.data_dir)
    test_src, test_ref = load_test_set(dataset="multi30k", pair=args.pair, split="test_2016_flickr",
                                       data_dir=args.data_dir)
    val_src, test_src, test_ref = val_src[: args.limit], test_src[: args.limit], test_ref[: args.limit]
    _, val, val_kinds = split_run(translator, val_src, None, args.seed)
    val = [d for d in val if d["signals"]]
    thresholds, tail = thresholds_on(val)
    usual = {s.name: float(np.median(signal_values(val, s.name))) for s in MEASURED if s.suspect == "both"}
    print(f"thresholds (val, each signal's {tail}% tail, {flagged_share(val, thresholds):.1%} of val flagged): "
          f"{thresholds}", flush=True)
    x = np.vstack([features(val, usual), features(val_kinds[POOLED], usual)])
    y = np.concatenate([np.zeros(len(val)), np.ones(len(val_kinds[POOLED]))])
    regression = fit_logistic(x, y)
    clean, test, test_kinds = split_run(translator, test_src, thresholds, args.seed + 1)
    bleu = corpus_bleu([r.text for r in clean], test_ref).score
    print(f"test BLEU {bleu:.2f} ({len(clean)} sentences)", flush=True)
    result = report([d for d in test if d["signals"]], test_kinds, usual, regression)
    result.update(bleu=bleu, thresholds=vars(thresholds), tail_percent=tail, val_flagged=flagged_share(val, thresholds),
                  sentences=len(clean), usual=usual, val_injected={k: len(v) for k, v in val_kinds.items()},
                  combined_weights=dict(zip(SIGNALS + ("bias",), np.round(regression[2], 3).tolist())))
    print(markdown(result))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
