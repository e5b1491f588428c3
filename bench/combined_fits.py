"""Can another fit of the combined score, or another signal, find hallucinations better than the model's own
log-probability? Measured.

    python bench/combined_fits.py MODEL --data-dir ../shared/data/multi30k [--pair de-en] [--limit N]
        [--natural-limit N] [--close N] [--json F]

On val and test_2016_flickr alike, the outputs bench/diagnostics.py judges: the model's own (clean, the
first --limit sentences), the forced hallucination kinds injected into them (detached, half detached, source
cut, oscillation: aiayn.inspect.quality.injection.forced_pairs), the natural hallucinations of every sentence's
five perturbations and the first --close perturbed outputs of each kind that stayed close. Every output is
judged by teacher forcing (the seven measured signals of aiayn.inspect.quality.signals, as suspicions:
aiayn.inspect.quality.combined.suspicion) and measured by four candidate signals more, each also a
suspicion (higher = more suspect):
- entropy: the mean entropy of the model's next-token distribution over the output's steps (unsure);
- source_pmi: the mean over the output's tokens of log p(y_t | empty source) - log p(y_t | source) (the
  output is as likely without its source: a contrast of the kind of CXMI, Fernandes et al. 2021);
- worst_token: the lowest token log-probability, negated;
- greedy_disagreement: 100 - chrF of the source's greedy translation against the output (an unstable output).
Logistic regressions (aiayn.inspect.quality.combined.fit_logistic, each group of a class weighing the same)
are fitted on val only, for each design (which val groups are clean and which hallucinated) and signal set,
and judged on test: AUROC on the forced kinds pooled and on the natural hallucinations against clean outputs,
and on the natural ones against the close ones, with the paired 95% bootstrap interval (bench/roc.py) of
each AUROC less the best of the seven single signals'.
"""

import argparse
import json

import numpy as np
from roc import auroc, auroc_difference_interval  # bench/roc.py, beside this script

from aiayn.decoding.options import DecodeOptions
from aiayn.decoding.translator import Translator
from aiayn.evaluation import load_test_set
from aiayn.inspect.quality.calibration import MEASURED
from aiayn.inspect.quality.combined import FLOOR, fit_logistic, group_weights, suspicion
from aiayn.inspect.quality.diagnostics import diagnose_output
from aiayn.inspect.quality.injection import (
    HALLUCINATION_CHRF,
    HALLUCINATIONS,
    NATURAL,
    chrf,
    forced_pairs,
    natural,
)

SEVEN = tuple(s.name for s in MEASURED)
CANDIDATES = ("entropy", "source_pmi", "worst_token", "greedy_disagreement")
GROUPS = ("clean", "close", "forced", "natural")
DESIGNS = {  # name -> (clean groups, hallucinated groups)
    "forced kinds only (the score before)": (("clean",), ("forced",)),
    "forced and natural (the stored score)": (("clean", "close"), ("forced", "natural")),
    "natural only": (("clean", "close"), ("natural",)),
}
SIGNAL_SETS = {"the seven": SEVEN, "the seven and the four candidates": SEVEN + CANDIDATES}
JUDGED = {"forced / clean": ("forced", "clean"), "natural / clean": ("natural", "clean"),
          "natural / close": ("natural", "close")}


def outputs_of(translator, sources: list[str], limit: int, close_per_kind: int, seed: int) -> dict:
    """-> {group: [(source, output)]} for GROUPS."""
    sources = [s for s in sources if s.strip()]
    clean = [r.text for r in translator.translate(sources)]
    pairs = forced_pairs(sources[:limit], clean[:limit], seed)
    found, close = [], []
    for kind in NATURAL:
        made = natural(translator, sources, clean, kind, seed)
        found += [(s, o) for s, o, c in made if c < HALLUCINATION_CHRF]
        close += [(s, o) for s, o, c in made if c >= HALLUCINATION_CHRF][:close_per_kind]
    forced = [p for kind in HALLUCINATIONS if kind in pairs for p in pairs[kind]]  # perturbed has no pairs
    return {"clean": list(zip(sources[:limit], clean[:limit])), "close": close, "forced": forced, "natural": found}


def token_log_probs(translator, source: str, output: str):
    """Teacher forcing `output` (and </s>) on `source` -> (log p of each token (T + 1,), the entropy of each
    step's distribution (T + 1,))."""
    import torch

    from aiayn.decoding.batches import encode_sources

    tok = translator.tokenizer
    src, tgt = encode_sources(tok, [source])[0], tok.encode_target([output])[0] + [tok.eos_id]
    with torch.inference_mode():
        logits = translator.model(torch.tensor([src]), torch.tensor([[tok.bos_id] + tgt[:-1]]))
        log_p = torch.log_softmax(logits[0].float(), dim=-1)  # (T + 1, V)
        chosen = log_p[torch.arange(len(tgt)), torch.tensor(tgt)]
        return chosen.numpy(), (-(log_p.exp() * log_p).sum(-1)).numpy()


def measured(translator, pairs: list[tuple[str, str]]) -> dict:
    """Per output: the seven signals' values (diagnose_output) and the four candidates' suspicions."""
    greedy = [r.text for r in translator.translate([s for s, _ in pairs], options=DecodeOptions(beam=1))]
    rows = []
    for (source, output), g in zip(pairs, greedy):
        found = diagnose_output(translator, source, output)["signals"]
        log_p, entropy = token_log_probs(translator, source, output)
        without, _ = token_log_probs(translator, "", output)
        rows.append({**{name: found[name]["value"] for name in SEVEN}, "entropy": float(entropy.mean()),
                     "source_pmi": float((without - log_p).mean()), "worst_token": float(-log_p.min()),
                     "greedy_disagreement": 100.0 - (chrf(g, output) if output.strip() else 0.0)})
    return rows


def suspicions(rows: list[dict], names: tuple[str, ...], usual_length: float) -> np.ndarray:
    """(N, F): each named signal as a suspicion (the candidates are suspicions already)."""
    sides = {s.name: s.suspect for s in MEASURED}
    return np.array([[suspicion(sides[n], r[n], usual_length) if n in sides else r[n] for n in names]
                     for r in rows], dtype=np.float64).reshape(len(rows), len(names))


def fitted(val: dict, names: tuple[str, ...], design: tuple, usual: float):
    """A logistic regression over `names` fitted on val's groups of `design` -> score function of rows."""
    clean, hallucinated = design
    groups = [val[g] for g in clean + hallucinated]
    x = np.vstack([suspicions(g, names, usual) for g in groups])
    y = np.concatenate([np.full(len(g), float(i >= len(clean))) for i, g in enumerate(groups)])
    mean, scale, w = fit_logistic(x, y, group_weights([len(g) for g in groups],
                                                      [0] * len(clean) + [1] * len(hallucinated)))
    return lambda rows: (suspicions(rows, names, usual) - mean) / scale @ w[:-1] + w[-1], w[:-1]


def judged(test: dict, score, usual: float) -> dict:
    """Per JUDGED question: the score's AUROC and its paired interval less the best of the seven's."""
    result = {}
    for question, (pos, neg) in JUDGED.items():
        single = {n: (suspicions(test[pos], (n,), usual)[:, 0], suspicions(test[neg], (n,), usual)[:, 0])
                  for n in SEVEN}
        best = max(SEVEN, key=lambda n: auroc(*single[n]))
        p, n = score(test[pos]), score(test[neg])
        result[question] = {"auroc": auroc(p, n), "best": best, "best_auroc": auroc(*single[best]),
                            "minus_best": auroc_difference_interval(p, n, *single[best])}
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--data-dir")
    ap.add_argument("--pair", default="de-en")
    ap.add_argument("--limit", type=int, default=400, help="clean outputs and forced kinds from the first N "
                    "sentences of each split (default: 400)")
    ap.add_argument("--natural-limit", type=int, help="perturb only the first N sentences (default: all)")
    ap.add_argument("--close", type=int, default=100, help="perturbed outputs that stayed close, per natural kind "
                    "(default: 100)")
    ap.add_argument("--json", help="write every AUROC and interval here")
    args = ap.parse_args()
    translator = Translator.from_pretrained(args.model)
    rows = {}
    for split, seed in (("val", 0), ("test_2016_flickr", 1)):
        sources, _ = load_test_set(dataset="multi30k", pair=args.pair, split=split, data_dir=args.data_dir)
        made = outputs_of(translator, sources[: args.natural_limit], args.limit, args.close, seed)
        rows[split] = {group: measured(translator, pairs) for group, pairs in made.items()}
        print(f"{split}: " + ", ".join(f"{g} {len(v)}" for g, v in rows[split].items()), flush=True)
    val, test = rows["val"], rows["test_2016_flickr"]
    usual = max(float(np.median([r["length_ratio"] for r in val["clean"]])), FLOOR)
    result = {"singles": {}, "fits": {}}
    for name in SEVEN + CANDIDATES:
        result["singles"][name] = {q: auroc(suspicions(test[p], (name,), usual)[:, 0],
                                            suspicions(test[n], (name,), usual)[:, 0]) for q, (p, n) in JUDGED.items()}
    print("| signal alone (test) | " + " | ".join(JUDGED) + " |\n|---|" + "---:|" * len(JUDGED))
    for name, row in result["singles"].items():
        print(f"| `{name}` | " + " | ".join(f"{row[q]:.3f}" for q in JUDGED) + " |")
    print("\n| fitted on val: design | signals | " + " | ".join(JUDGED) + " |\n|---|---|" + "---|" * len(JUDGED))
    for design, groups in DESIGNS.items():
        for set_name, names in SIGNAL_SETS.items():
            score, weights = fitted(val, names, groups, usual)
            found = judged(test, score, usual)
            result["fits"][f"{design}; {set_name}"] = {**found, "weights": dict(zip(names, weights.round(3).tolist()))}
            print(f"| {design} | {set_name} | " + " | ".join(
                "{:.3f} ({:+.3f} to {:+.3f} vs `{}`)".format(r["auroc"], *r["minus_best"], r["best"])
                for r in found.values()) + " |", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
