"""Training throughput and peak memory of `aiayn train` on a Multi30k config under several thread layouts,
each a fresh process, the layouts interleaved over rounds (machine noise hits all alike): one training
thread with 2 torch threads, train.micro_batch_workers=2 (each batch dealt into 2 shares, one torch thread a
share), and torchrun with 2 one-thread processes (the peer that micro-batch workers replace).

    python bench/train_workers.py [--config configs/multi30k_en_de.yaml] [--steps 200] [--rounds 3]

Tokens/s: target tokens over the logged 50-step windows after the first (the start-up and the first
window's warm-up left out), median over rounds. Peak RSS: VmHWM of each process (/usr/bin/time -v), summed
over torchrun's processes (their own; torchrun's launcher not counted).
Needs the Multi30k directory ($AIAYN_MULTI30K_DIR, or ../shared/data/multi30k beside the repository).
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

MULTI30K = Path(os.environ.get("AIAYN_MULTI30K_DIR", Path(__file__).resolve().parents[2] / "shared/data/multi30k"))

# name -> (launcher, --set items); every layout trains updates of the same 4096-token budget, unless named x2
LAYOUTS = {
    "whole batches, 2 threads": ([], ["train.num_threads=2", "train.micro_batch_workers=0"]),
    "2 workers": ([], ["train.num_threads=2", "train.micro_batch_workers=2"]),  # each batch in 2 shares
    "2 workers, accumulate 2 (x2 update)": ([], ["train.num_threads=2", "train.micro_batch_workers=2",
                                                 "train.accumulate=2"]),
    "torchrun 2 x 2048": (["--nproc_per_node=2"], ["train.num_threads=1", "train.max_tokens=2048"]),
}


def run_layout(config: str, launcher: list, sets: list, steps: int, out: Path) -> tuple[float, float]:
    """(median target tokens/s over the windows after the first, peak RSS MB) of one run."""
    base = ["--set", f"train.max_steps={steps}", "--set", "train.eval_every=100000", "--set",
            "train.save_every=100000", "--set", "train.max_minutes=0", "--set", "train.fit_steps_to_time=false",
            "--set", "train.log_every=50", "--set", "train.average_last=0", "--set", "train.warmup_steps=50"]
    sets_args = [x for s in sets for x in ("--set", s)]
    if launcher:  # each process under its own /usr/bin/time, so each one's peak is its own
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", *launcher, "--no-python",
               "/usr/bin/time", "-v", sys.executable, "-m", "aiayn"]
    else:
        cmd = ["/usr/bin/time", "-v", sys.executable, "-m", "aiayn"]
    cmd += ["train", config, "--data-dir", str(MULTI30K), "--out", str(out), *base, *sets_args]
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{result.stderr[-3000:]}")
    peaks = [int(kb) / 1024 for kb in re.findall(r"Maximum resident set size \(kbytes\): (\d+)", result.stderr)]
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    rates = [r["tokens_per_s"] for r in rows if "tokens_per_s" in r][1:]
    return statistics.median(rates), sum(peaks)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="configs/multi30k_en_de.yaml")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--layouts", nargs="*", default=list(LAYOUTS), choices=list(LAYOUTS))
    args = parser.parse_args()
    results = {name: [] for name in args.layouts}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for i, name in enumerate(args.layouts):
                launcher, sets = LAYOUTS[name]
                rate, peak = run_layout(args.config, launcher, sets, args.steps, Path(tmp) / f"r{r}_{i}")
                results[name].append((rate, peak))
                print(f"round {r + 1}: {name:30s} {rate:7.0f} target tokens/s   peak RSS {peak:6.0f} MB", flush=True)
    base = statistics.median(rate for rate, _ in results[args.layouts[0]])
    print(f"\n{args.config}, {args.steps} steps a run, {args.rounds} rounds; median (min-max), ratio to the first")
    for name, runs in results.items():
        rates = [rate for rate, _ in runs]
        print(f"{name:30s} {statistics.median(rates):7.0f} ({min(rates):.0f}-{max(rates):.0f}) tokens/s "
              f"x{statistics.median(rates) / base:.2f}   peak RSS {max(p for _, p in runs):.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
