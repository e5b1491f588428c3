"""Memory of a training run over time: RSS of `aiayn train` sampled every second, its peak, and whether it
stays flat. Exits 1 when the peak passes --limit-mb (800 MB, the goal for the shipped Multi30k configs),
so it catches a regression without timing anything. MB here is 2**20 bytes (/proc reports kB, read as
KiB; /usr/bin/time -v's "Maximum resident set size" is in the same kB), so 800 MB = 838.9e6 bytes.

    python bench/train_memory.py [--config configs/multi30k_de_en.yaml] [--minutes 5] [--limit-mb 800]
        [--csv rss.csv] [--out RUN]

Needs the Multi30k directory ($AIAYN_MULTI30K_DIR, or ../shared/data/multi30k beside the repository).
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MULTI30K = Path(os.environ.get("AIAYN_MULTI30K_DIR", Path(__file__).resolve().parents[2] / "shared/data/multi30k"))


def memory_mb(pid: int) -> tuple[float, float] | None:
    """(VmRSS, VmHWM) of a live process in MB: the resident set now and its high-water mark so far (which
    also catches a peak between two samples)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    if "VmRSS" not in fields or "VmHWM" not in fields:
        return None
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="configs/multi30k_de_en.yaml")
    parser.add_argument("--minutes", type=float, default=5)
    parser.add_argument("--limit-mb", type=float, default=800)
    parser.add_argument("--csv", type=Path, help="write the curve here (seconds, RSS MB)")
    parser.add_argument("--set", action="append", default=[], help="extra --set overrides for aiayn train")
    parser.add_argument("--out", type=Path, help="keep the run here (default: a temporary directory)")
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="aiayn_memory_")) / "run"
    command = [sys.executable, "-m", "aiayn", "train", args.config, "--out", str(out), "--data-dir", str(MULTI30K),
               "--set", f"train.max_minutes={args.minutes}"]  # steps: the config's
    for item in args.set:
        command += ["--set", item]
    start = time.monotonic()
    # the progress bar goes to a file: a pipe nobody reads fills up (64 KB) and stalls the training
    log = tempfile.TemporaryFile(mode="w+")
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log, text=True)
    curve, high_water = [], 0.0
    while proc.poll() is None:
        if (sample := memory_mb(proc.pid)) is not None:
            curve.append((round(time.monotonic() - start, 1), round(sample[0])))
            high_water = max(high_water, sample[1])
        time.sleep(1.0)
    if proc.returncode:
        log.seek(0)
        print(log.read()[-2000:], file=sys.stderr)
        return 2
    peak = max(high_water, max(r for _, r in curve))
    print(f"{args.config}: {len(curve)} samples over {curve[-1][0]:.0f} s; peak RSS {peak:.0f} MB "
          f"(VmHWM at the last sample; sampled RSS peak {max(r for _, r in curve)} MB; limit {args.limit_mb:g})")
    for fraction in (0.1, 0.25, 0.5, 0.75, 1.0):
        t, r = curve[min(len(curve) - 1, int(fraction * len(curve)))]
        print(f"  at {t:6.0f} s: {r} MB")
    if args.csv:
        args.csv.write_text("seconds,rss_mb\n" + "".join(f"{t},{r}\n" for t, r in curve))
    return 0 if peak <= args.limit_mb else 1


if __name__ == "__main__":
    sys.exit(main())
