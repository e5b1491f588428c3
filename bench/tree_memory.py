"""Peak memory of a command and every process it starts (decoding workers, torchrun ranks):

    python bench/tree_memory.py aiayn translate --model M --input F --output O --workers 2

Every 50 ms it sums, over the command's process tree, each process's PSS (/proc/PID/smaps_rollup: pages
shared by n processes count 1/n in each, so memory shared copy-on-write after fork counts once) and RSS
(which counts shared pages in every process), and prints the peaks. `/usr/bin/time -v` reports only the
largest single process. Linux only.
"""

import subprocess
import sys
import time
from pathlib import Path


def descendants(pid: int) -> list[int]:
    """pid and every process below it."""
    try:
        children = (Path(f"/proc/{pid}/task/{pid}/children")).read_text().split()
    except OSError:  # gone
        return [pid]
    return [pid] + [p for child in children for p in descendants(int(child))]


def kilobytes(pid: int, file: str, field: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/{file}").read_text().splitlines():
            if line.startswith(field):
                return int(line.split()[1])
    except OSError:  # gone between the listing and the read
        pass
    return 0


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    try:
        process = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL)
    except OSError as err:  # no such program, not executable
        sys.exit(f"tree_memory: cannot run {sys.argv[1]!r}: {err.strerror}")
    peak_pss = peak_rss = processes = 0
    while process.poll() is None:
        tree = descendants(process.pid)
        pss = sum(kilobytes(p, "smaps_rollup", "Pss:") for p in tree)
        if pss > peak_pss:
            peak_pss, processes = pss, len(tree)
        peak_rss = max(peak_rss, sum(kilobytes(p, "status", "VmRSS:") for p in tree))
        time.sleep(0.05)
    print(f"exit code {process.returncode}: peak PSS {peak_pss / 1024:.0f} MB summed over {processes} processes; "
          f"peak RSS summed {peak_rss / 1024:.0f} MB")


if __name__ == "__main__":
    main()
