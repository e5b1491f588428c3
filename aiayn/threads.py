"""How many torch threads a run uses: the CPUs this process may really use (its affinity mask and a
container's CPU quota, cgroup v2 `cpu.max` or v1 `cpu.cfs_quota_us` / `cpu.cfs_period_us`), less the cores
other processes keep busy. One function, choose_threads, for every command; an explicit count
(train.num_threads, serve --threads) or OMP_NUM_THREADS wins.

Why the busy cores count: torch splits each operation evenly over its OpenMP threads and waits for the
last one, so a thread that shares a core with another CPU-bound process holds every step up by the
scheduler's time slices. Beside one busy Python loop on a 2-core machine, `aiayn demo` with torch's
default 2 threads took several times as long as with 1 thread (BENCHMARKS.md, shared CPU)."""

import math
import os
import time
from dataclasses import dataclass
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
BUSY_SAMPLE_S = 0.25  # long enough to see a CPU-bound process (25 scheduler ticks at 100 Hz), short beside a run
BUSY_CORE = 0.5  # another process's use, in cores, from which a core counts as taken


@dataclass(frozen=True)
class ThreadChoice:
    threads: int
    why: str  # "" when it is the default: every usable CPU, none busy
    usable: int = 0  # > 0: chosen here from this many usable CPUs (not given), so it may be re-chosen

    def line(self) -> str:
        return f"threads: {self.threads}" + (f" ({self.why})" if self.why else "")


def affinity_cpus() -> set[int] | None:
    return os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None


def _quota(quota: str, period: str) -> float | None:
    """CPUs a quota allows (quota / period), None when there is none ("max" in v2, -1 in v1)."""
    try:
        quota_us, period_us = int(quota), int(period)
    except ValueError:  # "max": no limit
        return None
    return quota_us / period_us if quota_us > 0 and period_us > 0 else None


def _own_cgroup(root: Path, controller: str, proc_cgroup: Path) -> list[Path]:
    """This process's cgroup directory and its parents up to the root (a limit anywhere above applies);
    the root alone when /proc says nothing usable (a container that mounts its own cgroup as the root)."""
    try:
        lines = proc_cgroup.read_text().splitlines()
    except OSError:
        lines = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if (controller == "" and controllers == "") or controller in controllers.split(","):
            here = root / path.lstrip("/")
            return [here, *[p for p in here.parents if p.is_relative_to(root)]]
    return [root]


def cgroup_cpu_limit(root: Path = CGROUP_ROOT, proc_cgroup: Path = Path("/proc/self/cgroup")) -> float | None:
    """The smallest CPU quota over this process's cgroups, v2 or v1, in CPUs; None without a quota."""
    limits = []
    for directory in _own_cgroup(root, "", proc_cgroup):  # v2: one hierarchy, cpu.max = "QUOTA PERIOD"
        try:
            limits.append(_quota(*(directory / "cpu.max").read_text().split()[:2]))
        except (OSError, TypeError):
            pass
    for mount in ("cpu", "cpu,cpuacct", "cpuacct,cpu"):  # v1: the cpu controller's own hierarchy
        for directory in _own_cgroup(root / mount, "cpu", proc_cgroup):
            try:
                limits.append(_quota((directory / "cpu.cfs_quota_us").read_text().strip(),
                                     (directory / "cpu.cfs_period_us").read_text().strip()))
            except OSError:
                pass
    limits = [x for x in limits if x is not None]
    return min(limits) if limits else None


def usable_cpus(affinity: set[int] | None = None, quota: float | None = None) -> tuple[int, str]:
    """(CPUs this process may use, why fewer than the machine has or ""). A quota of 1.5 CPUs gives 2
    threads: the half core still runs a second thread part of the time."""
    machine = os.cpu_count() or 1
    count, why = machine, ""
    if affinity is not None and len(affinity) < count:
        count, why = len(affinity), f"the affinity mask allows {len(affinity)} of {machine} CPUs"
    if quota is not None and math.ceil(quota) < count:
        count, why = max(1, math.ceil(quota)), f"the CPU quota (cgroup) allows {quota:g} CPUs"
    return count, why


def _cpu_times(cpus: set[int] | None, stat: str) -> tuple[int, int]:
    """(busy, total) clock ticks of the given CPUs (all when None) from /proc/stat's text."""
    busy = total = 0
    for line in stat.splitlines():
        name, *fields = line.split()
        if not name.startswith("cpu") or name == "cpu" or (cpus is not None and int(name[3:]) not in cpus):
            continue
        ticks = [int(x) for x in fields[:8]]  # user nice system idle iowait irq softirq steal
        total += sum(ticks)
        busy += sum(ticks) - ticks[3] - ticks[4]
    return busy, total


def _own_ticks() -> int:
    fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime of every thread of this process


def cpu_sample(cpus: set[int] | None) -> tuple[int, int, int] | None:
    """(busy, total, own) clock ticks now: our CPUs' busy and total time and this process's own; None
    where /proc cannot be read (not Linux)."""
    try:
        return *_cpu_times(cpus, Path("/proc/stat").read_text()), _own_ticks()
    except (OSError, ValueError, IndexError):
        return None


def others_between(before, after, n: int) -> float:
    """Cores other processes kept busy between two cpu_sample()s of n CPUs (this process's time out)."""
    if before is None or after is None or after[1] <= before[1]:
        return 0.0
    return max(0.0, (after[0] - before[0]) - (after[2] - before[2])) / (after[1] - before[1]) * n


def others_busy_cores(cpus: set[int] | None, sample_s: float = BUSY_SAMPLE_S) -> float:
    """Cores that other processes kept busy on our CPUs over sample_s seconds; 0.0 where /proc/stat
    cannot be read (not Linux)."""
    before = cpu_sample(cpus)
    time.sleep(sample_s)
    return others_between(before, cpu_sample(cpus), _count(cpus))


def _count(cpus: set[int] | None) -> int:
    return len(cpus) if cpus is not None else (os.cpu_count() or 1)


def threads_beside(usable: int, others: float) -> int:
    """Usable CPUs less those others keep busy (a core counts from BUSY_CORE of one), at least 1."""
    return usable - max(0, min(usable - 1, math.floor(others + 1 - BUSY_CORE)))


def _busy_why(others: float, usable: int, source: str) -> str:
    return f"other processes keep {others:.1f} of {usable} usable CPUs busy; {source} sets it"


def choose_threads(explicit: int = 0, source: str = "train.num_threads", probe_busy: bool = True) -> ThreadChoice:
    """The thread count for this process: `explicit` (> 0) as given, else OMP_NUM_THREADS as torch read
    it, else the usable CPUs less those other processes keep busy (at least 1)."""
    if explicit > 0:
        return ThreadChoice(explicit, f"{source}={explicit}")
    if os.environ.get("OMP_NUM_THREADS", "").strip():
        import torch

        return ThreadChoice(torch.get_num_threads(), f"OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS'].strip()}")
    affinity = affinity_cpus()
    usable, why = usable_cpus(affinity, cgroup_cpu_limit())
    if usable > 1 and probe_busy:
        others = others_busy_cores(affinity)
        if threads_beside(usable, others) < usable:
            return ThreadChoice(threads_beside(usable, others), _busy_why(others, usable, source), usable)
    return ThreadChoice(usable, why, usable)


def apply_threads(choice: ThreadChoice) -> ThreadChoice:
    import torch

    if torch.get_num_threads() != choice.threads:
        torch.set_num_threads(choice.threads)
    return choice


def wait_passively() -> None:
    """OpenMP threads waiting for work sleep instead of spinning (OMP_WAIT_POLICY=PASSIVE; libgomp's default
    spins first). A spinning thread holds its core while the thread with the work waits for one, so beside
    other processes every operation stalls: `aiayn demo` (250 steps) with 2 threads while other jobs kept
    the 2 cores busy took over 150 s spinning and 30 s passive (BENCHMARKS.md, shared CPU). libgomp reads
    it once, when torch loads it, so the command line calls this before importing torch; a value the user
    set wins."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def limit_to_usable() -> None:
    """No more torch threads than the CPUs this process may use: torch counts the affinity mask but not a
    container's quota, and threads beyond the quota wait on each other as beside a busy process. For every
    command at start (train and demo then choose with choose_threads); OMP_NUM_THREADS wins."""
    if os.environ.get("OMP_NUM_THREADS", "").strip():
        return
    import torch

    usable, _ = usable_cpus(affinity_cpus(), cgroup_cpu_limit())
    if torch.get_num_threads() > usable:
        torch.set_num_threads(usable)


class BusyWatch:
    """Re-chooses a chosen (not given) thread count while a run goes on, as other processes come and go:
    from /proc/stat between two checks, no waiting. check() every step; it looks every every_s seconds and
    returns the new choice when the count changed."""

    def __init__(self, choice: ThreadChoice, source: str = "train.num_threads", every_s: float = 10.0,
                 clock=time.monotonic):
        self.choice, self.source, self.every_s, self.clock = choice, source, every_s, clock
        self.cpus = affinity_cpus()
        self.enabled = choice.usable > 1
        self.last_time, self.last = clock(), cpu_sample(self.cpus) if self.enabled else None

    def check(self) -> ThreadChoice | None:
        if not self.enabled or self.clock() - self.last_time < self.every_s:
            return None
        now = cpu_sample(self.cpus)
        others = others_between(self.last, now, _count(self.cpus))
        self.last_time, self.last = self.clock(), now
        usable = self.choice.usable
        threads = threads_beside(usable, others)
        if threads == self.choice.threads:
            return None
        why = _busy_why(others, usable, self.source) if threads < usable else "the other processes' load is gone"
        self.choice = apply_threads(ThreadChoice(threads, why, usable))
        return self.choice
