"""Data parallelism through torchrun: gloo on CPU, nccl on CUDA, one command for one or many machines.

torchrun sets RANK / WORLD_SIZE / LOCAL_RANK / MASTER_ADDR / MASTER_PORT; without WORLD_SIZE (or with
WORLD_SIZE=1) the run is a single process. The processes meet at MASTER_ADDR:MASTER_PORT and wait there
for each other at most AIAYN_DIST_TIMEOUT seconds (default 300): variables left in a shell by an earlier
job would otherwise keep a lone process waiting, silently, for torch's 30 minutes. The collectives after
that keep torch's own timeout (rank 0 alone computes dev BLEU while the others wait for it).
"""

import contextlib
import logging
import os
import re
import threading
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist

from aiayn.errors import AiaynError

log = logging.getLogger(__name__)
TORCHRUN_VARIABLES = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
DEFAULT_TIMEOUT_S = 300.0  # AIAYN_DIST_TIMEOUT: how long the processes wait for each other at the start
NOTICE_AFTER_S = 2.0  # a rendezvous still waiting after this long says what it waits for (torchrun's: < 1 s)


class DistributedSetupError(AiaynError):
    """Environment variables that do not describe a torchrun launch, or processes that never met."""


class LostPeerError(AiaynError):
    """Another process of the job (another machine's, or this one's) stopped in the middle of training."""


# how gloo and NCCL word a peer that is gone: a closed or reset connection, a broken pipe, a timeout
_PEER_GONE = re.compile(r"connection (reset|closed|refused)|broken pipe|timed out|timeout|peer|nccl|gloo", re.I)


@dataclass
class DistInfo:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1


def _set_variables() -> str:
    return " ".join(f"{name}={os.environ[name]}" for name in (*TORCHRUN_VARIABLES, "LOCAL_RANK")
                    if name in os.environ)


def _launch_error(problem: str) -> DistributedSetupError:
    return DistributedSetupError(
        f"{problem} (the environment has {_set_variables()}); `aiayn train` runs as several processes only "
        f"when started by torchrun (torchrun --nproc_per_node=N -m aiayn train ...), which sets RANK, "
        f"WORLD_SIZE, MASTER_ADDR and MASTER_PORT: unset WORLD_SIZE to train in one process")


def _int_variable(name: str, default: str | None, low: int, high: int | None = None) -> int:
    raw = os.environ.get(name, default)
    if raw is None or not raw.strip():
        raise _launch_error(f"{name} is not set")
    try:
        value = int(raw)
    except ValueError:
        raise _launch_error(f"{name}={raw!r} is not a whole number") from None
    if value < low or (high is not None and value > high):
        raise _launch_error(f"{name}={value} is out of range ({low} to {high if high is not None else 'any'})")
    return value


def world_from_environment() -> tuple[int, int]:
    """(world size, rank) from torchrun's variables, checked: one line naming them when they are not a
    launch's (a stray WORLD_SIZE, a RANK past it, no MASTER_ADDR)."""
    world = _int_variable("WORLD_SIZE", "1", 1)
    if world == 1:
        return 1, 0
    rank = _int_variable("RANK", None, 0, world - 1)
    if not os.environ.get("MASTER_ADDR", "").strip():
        raise _launch_error("MASTER_ADDR is not set")
    _int_variable("MASTER_PORT", None, 1, 65535)
    return world, rank


def rendezvous_timeout() -> float:
    """AIAYN_DIST_TIMEOUT in seconds (a positive number), else DEFAULT_TIMEOUT_S."""
    raw = os.environ.get("AIAYN_DIST_TIMEOUT", "").strip()
    if not raw:
        return DEFAULT_TIMEOUT_S
    try:
        seconds = float(raw)
    except ValueError:
        seconds = -1.0
    if not 0 < seconds < 1e7:
        raise DistributedSetupError(f"AIAYN_DIST_TIMEOUT={raw!r}: expected the seconds the processes of a torchrun "
                                    f"launch wait for each other at the start, a positive number such as 300")
    return seconds


def _meet(world: int, rank: int, timeout: float):
    """The processes' meeting at MASTER_ADDR:MASTER_PORT (torch's env:// rendezvous), at most `timeout`
    seconds; a line says what it waits for when it takes longer than NOTICE_AFTER_S."""
    where = f"{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}"
    notice = threading.Timer(min(NOTICE_AFTER_S, timeout / 2), log.warning, args=(
        "rank %d of %d: waiting for %d processes at %s (at most %g s, AIAYN_DIST_TIMEOUT); start the others "
        "with the same torchrun command", rank, world, world, where, timeout))
    notice.daemon = True
    notice.start()
    try:
        store, _, _ = next(dist.rendezvous("env://", timeout=timedelta(seconds=timeout)))
    except (RuntimeError, ValueError) as err:  # torch's DistStoreError / DistNetworkError are RuntimeErrors
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise DistributedSetupError(
            f"rank {rank} of {world}: the {world} processes did not all meet at {where} within {timeout:g} s "
            f"({reason}); start every rank with the same torchrun command, unset WORLD_SIZE to train in one "
            f"process, or raise AIAYN_DIST_TIMEOUT") from None
    finally:
        notice.cancel()
    return store


def init_distributed(device: torch.device) -> DistInfo:
    world, rank = world_from_environment()
    if world <= 1:
        return DistInfo()
    if not dist.is_initialized():
        store = _meet(world, rank, rendezvous_timeout())
        store.set_timeout(timedelta(minutes=30))  # torch's default, for what follows the meeting
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo", store=store, rank=rank,
                                world_size=world)
    return DistInfo(dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", "0")))


def _peer_reason(err: BaseException) -> str:
    """The gist of a collective's error: its first sentence, without the source-file prefix torch adds."""
    text = re.sub(r"^\[[^\]]*\]\s*", "", str(err).strip().splitlines()[0] if str(err).strip() else "")
    return text.split(". ")[0].rstrip(".") or type(err).__name__


@contextlib.contextmanager
def peer_failures(info: DistInfo):
    """A collective that fails because another process of the job is gone (its machine stopped, it was
    killed) ends in one LostPeerError line instead of a traceback; other errors pass unchanged."""
    try:
        yield
    except (RuntimeError, dist.DistError) as err:
        if not info.enabled or not _PEER_GONE.search(str(err)):
            raise
        raise LostPeerError(
            f"rank {info.rank} of {info.world_size}: another process of this torchrun job stopped "
            f"({_peer_reason(err)}); start every node again with the same command to resume from the last "
            f"checkpoint") from None


def all_reduce_sum(values: list[float], info: DistInfo) -> list[float]:
    if not info.enabled:
        return values
    t = torch.tensor(values, dtype=torch.float64)
    with peer_failures(info):
        dist.all_reduce(t)
    return t.tolist()


def broadcast_value(value: float, info: DistInfo) -> float:
    if not info.enabled:
        return value
    t = torch.tensor([value], dtype=torch.float64)
    with peer_failures(info):
        dist.broadcast(t, src=0)
    return float(t.item())


def barrier(info: DistInfo) -> None:
    if info.enabled:
        with peer_failures(info):
            dist.barrier()


def shutdown(info: DistInfo) -> None:
    if info.enabled and dist.is_initialized():
        dist.destroy_process_group()
