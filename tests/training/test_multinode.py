"""Several machines, as torchrun runs them: two "nodes" on this host, each its own torchrun command meeting
at a c10d rendezvous on 127.0.0.1 (the README's multi-machine command with 127.0.0.1 for the first host).

- 2 nodes x 1 process equal 1 process with train.accumulate=2 within the tolerance of test_training's
  2-process test (in fact bit for bit: a+b is the same sum either way), and 2 nodes x 2 processes equal 1
  process with accumulate=4 within that tolerance, the key biases left out (see without_key_bias);
- a node killed mid-run (every process of it, SIGKILL) is one line on the other node, which stops within
  seconds; both started again resume from the last checkpoint and end with the uninterrupted run's weights,
  bit for bit.
"""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from tests.serving import free_port
from tests.training.test_training import TINY, run_train, step_losses, wait_for

pytestmark = pytest.mark.slow
STEPS = 16
EXTRA = [f"train.max_steps={STEPS}", "train.save_every=4", "train.eval_every=1000", "model.dropout=0.0",
         "train.average_last=1"]
FINAL = f"checkpoints/step_{STEPS:08d}/model.safetensors"
NODE_TIMEOUT_S = 120  # a node's whole run; a failure on the other node must end it far sooner


def start_node(out: Path, port: int, job: str, nproc: int, extra: list[str], log: Path) -> subprocess.Popen:
    """One node: `torchrun --nnodes 2 --rdzv-backend c10d --rdzv-endpoint 127.0.0.1:PORT ...` (in its own
    session, so that the test can kill the node whole)."""
    launcher = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc-per-node", str(nproc),
                "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", job]
    cmd = [*launcher, "-m", "aiayn", "train", "--out", str(out)] + [x for s in TINY + extra for x in ("--set", s)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "AIAYN_DIST_TIMEOUT": "60"}
    return subprocess.Popen(cmd, stdout=log.open("w"), stderr=subprocess.STDOUT, env=env, start_new_session=True)


def run_two_nodes(out: Path, nproc: int = 1, extra=EXTRA, job: str = "test") -> None:
    port = free_port()
    nodes = [start_node(out, port, job, nproc, extra, out.parent / f"{out.name}.node{n}.log") for n in range(2)]
    for n, node in enumerate(nodes):
        assert node.wait(timeout=NODE_TIMEOUT_S) == 0, (out.parent / f"{out.name}.node{n}.log").read_text()


def node_processes(pid: int) -> list[int]:
    """pid and all its descendants (torchrun starts its workers in sessions of their own)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        found.append(todo.pop())
        todo += children.get(found[-1], [])
    return found


def kill_node(node: subprocess.Popen) -> None:
    """What a machine that dies does to its processes: every one of them gone at once, by SIGKILL."""
    for pid in node_processes(node.pid):
        try:
            os.killpg(os.getpgid(pid), signal.SIGKILL)
        except OSError:  # gone already
            pass
    node.wait()


def without_key_bias(weights: dict) -> dict:
    """The weights less the key projections' biases (the middle third of each in_proj.bias): their gradient is
    0 in exact arithmetic (softmax ignores a shift shared by every key, §3.2.1), so what they get is rounding
    noise, which Adam scales up to +-lr per step. Summed in another order (4 processes' gradients added by an
    all-reduce, not one after the other), that noise differs, and so do they; every other weight agrees."""
    out = dict(weights)
    for name, value in weights.items():
        if name.endswith("in_proj.bias"):
            d = value.shape[0] // 3
            out[name] = torch.cat([value[:d], value[2 * d:]])
    return out


def max_difference(a: Path, b: Path, final: str = FINAL, keep=lambda w: w) -> float:
    wa, wb = keep(load_file(str(a / final))), keep(load_file(str(b / final)))
    assert wa.keys() == wb.keys()
    return max(float((wa[k] - wb[k]).abs().max()) for k in wa)


@pytest.fixture(scope="module")
def two_nodes(tmp_path_factory):
    """An uninterrupted run on 2 nodes x 1 process."""
    out = tmp_path_factory.mktemp("two_nodes") / "run"
    run_two_nodes(out)
    return out


def assert_equivalent(single: Path, distributed: Path, final: str = FINAL, keep=lambda w: w) -> None:
    """test_training's 2-process tolerance: weights rtol 1e-4 / atol 1e-5, losses 1e-4."""
    wa, wb = keep(load_file(str(single / final))), keep(load_file(str(distributed / final)))
    for k in wa:
        torch.testing.assert_close(wa[k], wb[k], rtol=1e-4, atol=1e-5)
    la, lb = step_losses(single), step_losses(distributed)
    assert la.keys() == lb.keys() and all(abs(la[s] - lb[s]) < 1e-4 for s in la)


def test_two_nodes_equal_one_process_with_accumulate_2(tmp_path, two_nodes):
    run_train(tmp_path / "single", EXTRA + ["train.accumulate=2"])
    print(f"2 nodes x 1 process vs 1 process (accumulate=2): max |weight difference| = "
          f"{max_difference(tmp_path / 'single', two_nodes):.3g}")
    assert_equivalent(tmp_path / "single", two_nodes)


def test_two_nodes_of_two_processes_equal_one_process_with_accumulate_4(tmp_path):
    extra = [x for x in EXTRA if not x.startswith("train.max_steps")] + ["train.max_steps=4", "train.save_every=4"]
    final = "checkpoints/step_00000004/model.safetensors"
    run_train(tmp_path / "single", extra + ["train.accumulate=4"])
    run_two_nodes(tmp_path / "nodes", nproc=2, extra=extra)
    print(f"2 nodes x 2 processes vs 1 process (accumulate=4): max |weight difference| = "
          f"{max_difference(tmp_path / 'single', tmp_path / 'nodes', final, without_key_bias):.3g} (key biases "
          f"left out: {max_difference(tmp_path / 'single', tmp_path / 'nodes', final):.3g} with them)")
    assert_equivalent(tmp_path / "single", tmp_path / "nodes", final, without_key_bias)


def test_killed_node_is_one_line_and_both_resume_exactly(tmp_path, two_nodes):
    out, port = tmp_path / "run", free_port()
    logs = [tmp_path / f"node{n}.log" for n in range(2)]
    nodes = [start_node(out, port, "killed", 1, EXTRA, log) for log in logs]
    wait_for(out / "checkpoints" / "step_00000004", nodes[0])
    kill_node(nodes[1])
    killed_at = time.monotonic()
    code = nodes[0].wait(timeout=60)  # bounded: a peer gone is noticed at the next collective
    print(f"the surviving node stopped {time.monotonic() - killed_at:.1f} s after the other was killed")
    survivor = logs[0].read_text()
    assert code != 0, survivor
    lines = [line for line in survivor.splitlines() if "another process of this torchrun job stopped" in line]
    assert len(lines) == 1 and "resume from the last checkpoint" in lines[0], survivor
    assert "[rank0]: Traceback" not in survivor, survivor
    latest = (out / "latest").read_text().strip()
    assert 4 <= int(latest[5:]) < STEPS, "the run finished before it could be killed"
    run_two_nodes(out, job="killed-again")
    assert f"resuming from {out / 'checkpoints' / latest}" in (tmp_path / "run.node0.log").read_text() + \
        (tmp_path / "run.node1.log").read_text()
    print(f"resumed from {latest}: max |weight difference| to the uninterrupted run = "
          f"{max_difference(two_nodes, out):.3g}")
    wa, wb = load_file(str(two_nodes / FINAL)), load_file(str(out / FINAL))
    for k in wa:
        torch.testing.assert_close(wa[k], wb[k], rtol=0, atol=0)
    assert step_losses(two_nodes) == step_losses(out)
