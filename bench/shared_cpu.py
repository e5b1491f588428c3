"""`aiayn demo` wall time alone and beside CPU-bound processes (a Python busy loop each), for several thread
settings, run interleaved (round after round, every variant once per round) so that load from elsewhere
falls on all of them alike; prints the median of each. With --config, a training config's steps per second
instead (`aiayn train CONFIG`, from its metrics.jsonl between the second and the last log line: the
tokenizer, the data and the first steps left out).

    python bench/shared_cpu.py --steps 250 --rounds 2 --busy 0 1
    python bench/shared_cpu.py --config configs/multi30k_de_en.yaml --data-dir $D --steps 60 --busy 0 1 2
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

VARIANTS = {  # name: (extra --set items, extra environment)
    "default (threads spin briefly, then sleep)": ([], {}),
    "threads sleep at once": ([], {"OMP_WAIT_POLICY": "PASSIVE"}),
    # an OMP_WAIT_POLICY libgomp does not know is its own default (spin 300,000 rounds, then sleep)
    "2 threads, spinning long": (["train.num_threads=2"], {"OMP_WAIT_POLICY": "default"}),
    "1 thread": (["train.num_threads=1"], {}),
}


def demo_seconds(out: Path, steps: int, sets: list[str], env: dict, limit_s: float) -> tuple[float, str]:
    shutil.rmtree(out, ignore_errors=True)
    cmd = [sys.executable, "-m", "aiayn", "demo", "--out", str(out), "--set", f"train.max_steps={steps}"]
    cmd += [x for s in sets for x in ("--set", s)]
    start = time.perf_counter()
    try:
        done = subprocess.run(cmd, env={**os.environ, **env}, capture_output=True, text=True, timeout=limit_s)
    except subprocess.TimeoutExpired:
        return float("inf"), "timed out"
    first = next((line for line in done.stdout.splitlines() if line.startswith("threads:")), "")
    return time.perf_counter() - start, first if done.returncode == 0 else f"exit {done.returncode}"


def train_steps_per_s(out: Path, config: str, data_dir: str, steps: int, sets: list[str], env: dict,
                      limit_s: float) -> tuple[float, str]:
    """Training steps per second of `aiayn train config` (its warm-up shortened to fit `steps`)."""
    shutil.rmtree(out, ignore_errors=True)
    cmd = [sys.executable, "-m", "aiayn", "train", config, "--out", str(out), "--set", f"train.max_steps={steps}",
           "--set", f"train.warmup_steps={steps // 4}", "--set", "train.log_every=10", "--set",
           "train.eval_every=1000000", "--set", f"data.data_dir={data_dir}"]
    cmd += [x for s in sets for x in ("--set", s)]
    try:
        done = subprocess.run(cmd, env={**os.environ, **env}, capture_output=True, text=True, timeout=limit_s)
    except subprocess.TimeoutExpired:
        return 0.0, "timed out"
    if done.returncode:
        return 0.0, f"exit {done.returncode}: {done.stderr.strip()[-200:]}"
    logs = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    logs = [r for r in logs if "elapsed_s" in r and "loss" in r]
    first, last = logs[1], logs[-1]
    threads = next((line for line in done.stdout.splitlines() if line.startswith("threads:")), "")
    return (last["step"] - first["step"]) / (last["elapsed_s"] - first["elapsed_s"]), threads


def busy_loops(n: int) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=250, help="train.max_steps of each demo (default: 250)")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--busy", type=int, nargs="+", default=[0, 1], help="busy processes beside the demo")
    p.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    p.add_argument("--limit-s", type=float, default=300, help="a demo running longer is stopped (inf)")
    p.add_argument("--config", help="instead of the demo: this training config's steps per second")
    p.add_argument("--data-dir", help="with --config: its data.data_dir")
    args = p.parse_args()
    times: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for busy in args.busy:
                loops = busy_loops(busy)
                time.sleep(0.5)  # the loops are running before the demo looks at the CPUs
                try:
                    for name in args.variants:
                        sets, env = VARIANTS[name]
                        if args.config:
                            seconds, note = train_steps_per_s(Path(tmp) / "run", args.config, args.data_dir,
                                                              args.steps, sets, env, args.limit_s)
                        else:
                            seconds, note = demo_seconds(Path(tmp) / "demo", args.steps, sets, env, args.limit_s)
                        times.setdefault((busy, name), []).append(seconds)
                        unit = "steps/s" if args.config else "s"
                        print(f"round {r + 1}, {busy} busy, {name}: {seconds:.2f} {unit}  {note}", flush=True)
                finally:
                    for loop in loops:
                        loop.kill()
                        loop.wait()
    what = f"aiayn train {args.config}, steps/s" if args.config else "aiayn demo, wall s"
    print(f"\n{what}, train.max_steps={args.steps}, median of {args.rounds}:")
    for (busy, name), values in times.items():
        print(f"  {busy} busy  {name:36s} {statistics.median(values):8.2f}")


if __name__ == "__main__":
    main()
