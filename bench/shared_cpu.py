"""`aiayn demo` wall time alone and beside CPU-bound processes (a Python busy loop each), for several thread
settings, run interleaved (round after round, every variant once per round) so that load from elsewhere
falls on all of them alike; prints the median of each.

    python bench/shared_cpu.py --steps 250 --rounds 2 --busy 0 1
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

VARIANTS = {  # name: (extra --set items, extra environment)
    "default (threads sleep while waiting)": ([], {}),
    # an OMP_WAIT_POLICY libgomp does not know is its default (spin, then sleep), as before aiayn set PASSIVE
    "2 threads, spinning": (["train.num_threads=2"], {"OMP_WAIT_POLICY": "default"}),
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


def busy_loops(n: int) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=250, help="train.max_steps of each demo (default: 250)")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--busy", type=int, nargs="+", default=[0, 1], help="busy processes beside the demo")
    p.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    p.add_argument("--limit-s", type=float, default=300, help="a demo running longer is stopped (inf)")
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
                        seconds, note = demo_seconds(Path(tmp) / "demo", args.steps, sets, env, args.limit_s)
                        times.setdefault((busy, name), []).append(seconds)
                        print(f"round {r + 1}, {busy} busy, {name}: {seconds:.1f} s  {note}", flush=True)
                finally:
                    for loop in loops:
                        loop.kill()
                        loop.wait()
    print(f"\naiayn demo, train.max_steps={args.steps}, median of {args.rounds} (wall s):")
    for (busy, name), values in times.items():
        print(f"  {busy} busy  {name:36s} {statistics.median(values):8.1f}")


if __name__ == "__main__":
    main()
