"""The thread count a run chooses: affinity and CPU quotas (fake cgroup files), and what wins; waiting threads sleep."""

import pytest

from aiayn import threads
from aiayn.threads import ThreadChoice, cgroup_cpu_limit, choose_threads, usable_cpus


def _tree(tmp_path, files: dict, proc: str):
    for name, text in files.items():
        path = tmp_path / "cg" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (tmp_path / "proc").write_text(proc)
    return tmp_path / "cg", tmp_path / "proc"


@pytest.mark.parametrize("files, proc, limit", [
    ({"cpu.max": "150000 100000\n"}, "0::/\n", 1.5),  # v2, the container's own root
    ({"cpu.max": "max 100000\n"}, "0::/\n", None),  # v2 without a quota
    ({"cpu.max": "max 100000\n", "job/cpu.max": "100000 100000\n"}, "0::/job\n", 1.0),  # v2, our cgroup
    ({"cpu.max": "300000 100000\n", "job/cpu.max": "max 100000\n"}, "0::/job\n", 3.0),  # a parent's limit
    ({"cpu.max": "50000 100000\n"}, "0::/gone/elsewhere\n", 0.5),  # a path this namespace does not have
    ({"cpu/cpu.cfs_quota_us": "200000\n", "cpu/cpu.cfs_period_us": "100000\n"}, "1:cpu:/\n", 2.0),  # v1
    ({"cpu,cpuacct/docker/x/cpu.cfs_quota_us": "100000\n", "cpu,cpuacct/docker/x/cpu.cfs_period_us": "100000\n"},
     "2:cpu,cpuacct:/docker/x\n", 1.0),  # v1, joint controllers, nested
    ({"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, "1:cpu:/\n", None),  # v1, none
    ({}, "", None),  # no cgroup files at all
    ({"cpu.max": "garbage\n"}, "0::/\n", None),  # unreadable: no limit rather than a crash
])
def test_cgroup_cpu_limit_reads_v1_and_v2(tmp_path, files, proc, limit):
    root, proc_cgroup = _tree(tmp_path, files, proc)
    assert cgroup_cpu_limit(root, proc_cgroup) == limit


def test_usable_cpus_is_the_smallest_of_machine_affinity_and_quota(monkeypatch):
    monkeypatch.setattr(threads.os, "cpu_count", lambda: 8)
    assert usable_cpus(None, None) == (8, "")
    assert usable_cpus({0, 1, 2, 3, 4, 5, 6, 7}, None) == (8, "")
    assert usable_cpus({3}, None) == (1, "the affinity mask allows 1 of 8 CPUs")
    assert usable_cpus({0, 1, 2, 3}, 1.5)[0] == 2 and "quota" in usable_cpus({0, 1, 2, 3}, 1.5)[1]
    assert usable_cpus(None, 0.2)[0] == 1  # a fraction of a core still runs one thread
    assert usable_cpus({0, 1}, 4.0) == (2, "the affinity mask allows 2 of 8 CPUs")


@pytest.fixture
def two_cpus(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(threads, "affinity_cpus", lambda: {0, 1})
    monkeypatch.setattr(threads, "cgroup_cpu_limit", lambda: None)
    monkeypatch.setattr(threads.os, "cpu_count", lambda: 2)


def test_a_quota_or_mask_of_one_cpu_gives_one_thread_and_says_why(two_cpus, monkeypatch):
    monkeypatch.setattr(threads, "cgroup_cpu_limit", lambda: 1.0)
    assert choose_threads().line() == "threads: 1 (the CPU quota (cgroup) allows 1 CPUs)"
    monkeypatch.setattr(threads, "cgroup_cpu_limit", lambda: None)
    monkeypatch.setattr(threads, "affinity_cpus", lambda: {1})
    assert choose_threads().line() == "threads: 1 (the affinity mask allows 1 of 2 CPUs)"


def test_an_explicit_count_and_omp_num_threads_win(two_cpus, monkeypatch):
    assert choose_threads() == ThreadChoice(2, "")
    assert choose_threads(3) == ThreadChoice(3, "train.num_threads=3")
    assert choose_threads(4, "--threads").line() == "threads: 4 (--threads=4)"
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    assert "OMP_NUM_THREADS=2" in choose_threads().line()


def test_every_command_keeps_within_a_cpu_quota(monkeypatch):
    import torch

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(threads, "cgroup_cpu_limit", lambda: 1.0)
    torch.set_num_threads(2)
    threads.limit_to_usable()
    assert torch.get_num_threads() == 1
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    torch.set_num_threads(2)
    threads.limit_to_usable()  # the user's setting wins
    assert torch.get_num_threads() == 2


TINY = ["data.synthetic_train=100", "data.synthetic_valid=4", "data.vocab_size=48", "data.byte_fallback=false",
        "model.d_model=16", "model.d_ff=32", "model.n_heads=2", "train.max_tokens=256", "train.max_steps=1",
        "train.bleu_sentences=4", "train.save_every=1", "train.eval_every=1"]


@pytest.mark.parametrize("extra, first", [([], "threads: "),
                                          (["train.num_threads=1"], "threads: 1 (train.num_threads=1)")])
def test_a_run_prints_its_threads_first(tmp_path, capsys, monkeypatch, extra, first):
    from tests.cli_helpers import run_cli

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    code, output = run_cli(["train", "--out", tmp_path / "run", *[x for s in TINY + extra for x in ("--set", s)]],
                           capsys)
    assert code == 0, output
    assert output.splitlines()[0].startswith(first)


def test_the_command_line_sets_the_spin_count_before_torch_loads(monkeypatch):
    """GOMP_SPINCOUNT is read once, when torch loads libgomp: importing aiayn (the command line's first
    step) sets it first; a wait policy or spin count of the user's wins."""
    import os
    import subprocess
    import sys

    from aiayn.threads import WAIT_SPINS

    probe = ("import os, sys\nfrom aiayn.cli import main\ntry:\n    main(['--version'])\nexcept SystemExit:\n"
             "    pass\nenv = os.environ.get\n"
             "print(env('OMP_WAIT_POLICY'), env('GOMP_SPINCOUNT'), 'torch' in sys.modules)")
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}

    def probed(**extra) -> list[str]:
        return subprocess.run([sys.executable, "-c", probe], env={**env, **extra}, capture_output=True, text=True,
                              check=True).stdout.split()[-3:]

    assert probed() == ["None", WAIT_SPINS, "False"]
    assert probed(OMP_WAIT_POLICY="PASSIVE") == ["PASSIVE", "None", "False"]
    assert probed(GOMP_SPINCOUNT="50") == ["None", "50", "False"]


def test_calibrates_help_names_the_librarys_default():
    """The command line names calibrate's default count without importing the library (it would load torch)."""
    from aiayn.cli import build_parser
    from aiayn.inspect.quality.calibration import CALIBRATION_SENTENCES

    sub = next(a for a in build_parser()._actions if a.dest == "command").choices["calibrate"]
    limit = next(a for a in sub._actions if a.dest == "limit")
    assert f"(default: {CALIBRATION_SENTENCES})" in limit.help
