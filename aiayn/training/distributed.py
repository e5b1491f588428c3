"""Data parallelism through torchrun: gloo on CPU, nccl on CUDA, one command for one or many machines.

torchrun sets RANK / WORLD_SIZE / LOCAL_RANK; without them the run is a single process.
"""

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist


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


def init_distributed(device: torch.device) -> DistInfo:
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return DistInfo()
    if not dist.is_initialized():
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    return DistInfo(dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", "0")))


def all_reduce_sum(values: list[float], info: DistInfo) -> list[float]:
    if not info.enabled:
        return values
    t = torch.tensor(values, dtype=torch.float64)
    dist.all_reduce(t)
    return t.tolist()


def broadcast_value(value: float, info: DistInfo) -> float:
    if not info.enabled:
        return value
    t = torch.tensor([value], dtype=torch.float64)
    dist.broadcast(t, src=0)
    return float(t.item())


def barrier(info: DistInfo) -> None:
    if info.enabled:
        dist.barrier()


def shutdown(info: DistInfo) -> None:
    if info.enabled and dist.is_initialized():
        dist.destroy_process_group()
