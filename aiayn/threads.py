"""How many torch threads a run uses, and how they wait: the CPUs this process may really use (its affinity
mask and a container's CPU quota, cgroup v2 `cpu.max` or v1 `cpu.cfs_quota_us` / `cpu.cfs_period_us`), one
function, choose_threads, for every command; an explicit count (train.num_threads, serve --threads) or
OMP_NUM_THREADS wins. Threads that wait for work spin only briefly, then sleep (spin_briefly), so cores
shared with other processes slow a run down in proportion instead of stalling it.

Measured beside other processes on a 2-core machine (BENCHMARKS.md, shared CPU): what stalled a run was
OpenMP's long spinning, not the thread count, so the count is not lowered for busy cores (the scheduler
shares 2 cores among 3 threads, and a run of 2 gets more than one core's worth)."""

import math
import os
from dataclasses import dataclass
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")


@dataclass(frozen=True)
class ThreadChoice:
    threads: int
    why: str  # "" when it is the default: every CPU of the machine

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


def choose_threads(explicit: int = 0, source: str = "train.num_threads") -> ThreadChoice:
    """The thread count for this process: `explicit` (> 0) as given, else OMP_NUM_THREADS as torch read
    it, else the CPUs this process may use."""
    if explicit > 0:
        return ThreadChoice(explicit, f"{source}={explicit}")
    if os.environ.get("OMP_NUM_THREADS", "").strip():
        import torch

        return ThreadChoice(torch.get_num_threads(), f"OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS'].strip()}")
    return ThreadChoice(*usable_cpus(affinity_cpus(), cgroup_cpu_limit()))


def apply_threads(choice: ThreadChoice) -> ThreadChoice:
    import torch

    if torch.get_num_threads() != choice.threads:
        torch.set_num_threads(choice.threads)
    return choice


WAIT_SPINS = "1000"  # GOMP_SPINCOUNT: how long a waiting OpenMP thread spins before it sleeps


def spin_briefly() -> None:
    """OpenMP threads waiting for work spin WAIT_SPINS rounds, then sleep (GOMP_SPINCOUNT; libgomp's own
    default spins 300,000). A long-spinning thread holds its core while the thread with the work waits for
    one, so beside other processes every operation stalls; a thread that sleeps at once pays a wake-up on
    each of the many small operations of a small model. A 250-step `aiayn demo`, 2 threads on 2 cores, two
    rounds: alone 15.3 / 17.0 s spinning 1000, 22.7 / 23.9 s sleeping at once (OMP_WAIT_POLICY=PASSIVE), 14.5 s
    spinning 100,000; beside one busy loop 30.9 / 33.1 s, 24.6 / 26.2 s and 344 s. libgomp reads these once,
    when torch loads it, so `import aiayn` calls this (the command line, and a notebook that imports aiayn
    before torch); a wait policy or a spin count the user set wins."""
    if "OMP_WAIT_POLICY" not in os.environ:
        os.environ.setdefault("GOMP_SPINCOUNT", WAIT_SPINS)


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

