"""Training on a corpus of WMT14 en-de size (4.5M pairs): memory and start-up time.

Generates the corpus deterministically from Multi30k's training text (copy k of each line gets the tag
"k" in front, so no two lines are equal), then runs `aiayn train` twice in its own process under
/usr/bin/time -v:
  1. a fresh run: tokenizer from a sample, the corpus encoded into run/encoded/<hash>, a few steps;
  2. the same run resumed: the corpus is already prepared.
Reports for each: wall seconds to the first training step, total seconds, peak RSS; and the prepared
corpus's size on disk. The model is the shipped multi30k preset (configs/multi30k_de_en.yaml's).

    python bench/corpus_scale.py [--pairs 4500000] [--steps 5] [--work DIR] [--resume-only]

(--work: where the corpus and the run go, by default aiayn_corpus_scale in the system's temporary directory.)
"""

import argparse
import gzip
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MULTI30K = Path(os.environ.get("AIAYN_MULTI30K_DIR", Path(__file__).resolve().parents[2] / "shared/data/multi30k"))


def generate(work: Path, pairs: int) -> tuple[Path, Path]:
    src, tgt = work / f"train{pairs}.de", work / f"train{pairs}.en"
    if src.exists() and tgt.exists():
        return src, tgt
    de = gzip.open(MULTI30K / "train.de.gz", "rt", encoding="utf-8").read().splitlines()
    en = gzip.open(MULTI30K / "train.en.gz", "rt", encoding="utf-8").read().splitlines()
    with open(src, "w", encoding="utf-8") as fs, open(tgt, "w", encoding="utf-8") as ft:
        for n in range(pairs):
            copy, line = divmod(n, len(de))
            fs.write(f"{copy} {de[line]}\n")
            ft.write(f"{copy} {en[line]}\n")
    for path in (work / "valid.de", work / "valid.en"):
        lang = path.suffix[1:]
        path.write_text(gzip.open(MULTI30K / f"val.{lang}.gz", "rt", encoding="utf-8").read(), encoding="utf-8")
    return src, tgt


def train(work: Path, src: Path, tgt: Path, steps: int) -> dict:
    """One `aiayn train` process; seconds until its first metrics row (step 1 done), total, peak RSS."""
    run = work / "run"
    metrics = run / "metrics.jsonl"
    before = metrics.read_text().count("\n") if metrics.exists() else 0
    args = ["/usr/bin/time", "-v", sys.executable, "-m", "aiayn", "train", "configs/multi30k_de_en.yaml",
            "--out", str(run), "--set", "data.dataset=files", "--set", f"data.train_src={src}",
            "--set", f"data.train_tgt={tgt}", "--set", f"data.valid_src={work / 'valid.de'}",
            "--set", f"data.valid_tgt={work / 'valid.en'}", "--set", f"train.max_steps={steps}",
            "--set", "train.log_every=1", "--set", "train.eval_every=100000", "--set", "train.save_every=100000",
            "--set", "train.average_last=1", "--set", "train.max_minutes=0",
            # a few steps, no time budget: the shipped linear decay and its fit to the clock do not apply
            "--set", "train.fit_steps_to_time=false", "--set", "train.warmup_steps=1"]
    start, first = time.monotonic(), None
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    while proc.poll() is None:
        if first is None and metrics.exists() and metrics.read_text().count("\n") > before:
            first = time.monotonic() - start
        time.sleep(0.2)
    output = proc.stdout.read()
    if proc.returncode:
        raise SystemExit(f"aiayn train failed:\n{output[-3000:]}")
    peak = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", output).group(1))
    return {"first_step_s": round(first or time.monotonic() - start, 1), "total_s": round(time.monotonic() - start, 1),
            "peak_rss_mb": round(peak / 1024)}


def disk_mb(path: Path) -> float:
    files = [path] if path.is_file() else [f for f in path.rglob("*") if f.is_file()]
    return round(sum(f.stat().st_size for f in files) / 2**20, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=4_500_000)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "aiayn_corpus_scale")
    parser.add_argument("--resume-only", action="store_true", help="only resume the run already in --work")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    src, tgt = generate(args.work, args.pairs)
    print(f"corpus: {args.pairs:,} pairs, {disk_mb(src) + disk_mb(tgt):.0f} MB of text "
          f"(generated in {time.monotonic() - start:.0f} s)", flush=True)
    results = {}
    if not args.resume_only:
        results["fresh"] = train(args.work, src, tgt, args.steps)
    results["prepared_corpus_mb"] = disk_mb(args.work / "run" / "encoded")
    done = json.loads((args.work / "run" / "metrics.jsonl").read_text().splitlines()[-1])["step"]
    results["resumed"] = train(args.work, src, tgt, done + args.steps)
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
