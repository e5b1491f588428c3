"""Evaluate trained runs on Multi30k test_2016_flickr and print the README results table.

    python bench/results_table.py --data-dir ../shared/data/multi30k RUN:PAIR [RUN:PAIR ...]
    e.g. runs/multi30k_en_de:en-de runs/multi30k_de_en:de-en runs/rnn_luong:de-en

For each run: its averaged model (else best), the model's beam and alpha (4, 0.6; or --beam / --alpha,
chosen on val by bench/select_on_val.py); RUN may also be a model directory inside a run (e.g.
runs/X/average_10, a longer averaging window). Prints sacreBLEU cased and -lc with the 95% bootstrap
interval, chrF; parameters, training steps and wall time from metrics.jsonl; then each run's learning
curve: dev BLEU (the trainer's validation, greedy) against minutes of training.
"""

import argparse
import json
import time
from pathlib import Path

from aiayn.data import multi30k
from aiayn.data.corpus import read_parallel
from aiayn.decoding.translator import Translator
from aiayn.evaluation import evaluate_corpus
from aiayn.model import count_parameters


def training_steps(model_dir: Path) -> int:
    """The step of the weights: info.json of a checkpoint or average, else the run's last logged step."""
    info = json.loads((model_dir / "info.json").read_text()) if (model_dir / "info.json").exists() else {}
    if "step" in info:
        return info["step"]
    if "averaged" in info:
        return max(int(Path(p).name.split("_")[1]) for p in info["averaged"])
    records = [json.loads(line) for line in (model_dir / "metrics.jsonl").read_text().splitlines()]
    return max(r["step"] for r in records)


def learning_curve(run: Path) -> list[tuple[float, int, float]]:
    """(minutes, step, dev BLEU) of each validation in metrics.jsonl (of the run, or of the run holding
    this model directory); the minutes are those of the last training row logged at or before the step
    (validations have no clock of their own)."""
    run = next((d for d in (run, *run.parents) if (d / "metrics.jsonl").exists()), run)
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
    clock, curve = {}, []
    for r in records:
        if "elapsed_s" in r:
            clock[r["step"]] = r["elapsed_s"]
        elif "bleu" in r:
            seconds = max((s for step, s in clock.items() if step <= r["step"]), default=0.0)
            curve.append((seconds / 60, r["step"], r["bleu"]))
    return curve


def main():
    p = argparse.ArgumentParser()
    p.add_argument("runs", nargs="+", help="RUN_DIR:PAIR")
    p.add_argument("--data-dir")
    p.add_argument("--split", default="test_2016_flickr")
    p.add_argument("--beam", type=int, default=None, help="beam size (default: the model's, 4)")
    p.add_argument("--alpha", type=float, default=None, help="length penalty (default: the model's, 0.6)")
    args = p.parse_args()
    print("| run | params | steps | BLEU | BLEU -lc (95% CI) | chrF | decode s |")
    print("|---|---|---|---|---|---|---|")
    for item in args.runs:
        run, pair = item.rsplit(":", 1)
        src_lang, _, tgt_lang = pair.partition("-")
        pairs = read_parallel(*multi30k.pair_paths(args.split, src_lang, tgt_lang, args.data_dir))
        translator = Translator.from_pretrained(run)
        start = time.perf_counter()
        hyps = [r.text for r in translator.translate([s for s, _ in pairs], beam=args.beam, alpha=args.alpha)]
        seconds = time.perf_counter() - start
        # beside a model directory, not in it (a resumed run would not rewrite an average/ holding it)
        beside = Path(run) if (Path(run) / "metrics.jsonl").exists() else Path(run).parent
        out = beside / f"{args.split}.{tgt_lang}.hyp"
        out.write_text("".join(h + "\n" for h in hyps), encoding="utf-8")
        scores = {s.name: s for s in evaluate_corpus(hyps, [t for _, t in pairs], bootstrap=1000)}
        steps = training_steps(Path(translator.model_dir))
        lc = scores["BLEU-lc"]
        print(f"| {translator.model_dir} ({pair}) | {count_parameters(translator.model):,} | {steps} | "
              f"{scores['BLEU'].score:.2f} | {lc.score:.2f} [{lc.ci_low:.2f}, {lc.ci_high:.2f}] | "
              f"{scores['chrF'].score:.2f} | {seconds:.0f} |", flush=True)
    for item in args.runs:
        run = Path(item.rsplit(":", 1)[0])
        curve = learning_curve(run)
        points = ", ".join(f"{bleu:.1f} ({minutes:.0f} min, step {step})" for minutes, step, bleu in curve)
        print(f"\n{run} dev BLEU: {points}")
    print(f"\nsignatures: BLEU {scores['BLEU'].signature}; -lc {scores['BLEU-lc'].signature}; "
          f"chrF {scores['chrF'].signature}")


if __name__ == "__main__":
    main()
