"""Shared by the benchmark scripts: run a function on ``world`` spawned gloo ranks on 127.0.0.1."""

from __future__ import annotations

import datetime
import multiprocessing as mp
import os
import socket
from collections.abc import Callable
from typing import Any


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _entry(
    fn: Callable[..., Any], rank: int, world: int, port: int, threads: int, q: Any, args: tuple
) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(threads)
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=300),
    )
    q.put((rank, fn(rank, world, *args)))
    dist.barrier()
    dist.destroy_process_group()


def run(fn: Callable[..., Any], world: int, *args: Any, threads: int = 1) -> list[Any]:
    """Per-rank return values of ``fn(rank, world, *args)``; each rank uses ``threads`` GEMM threads."""
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    port = _free_port()
    procs = [ctx.Process(target=_entry, args=(fn, r, world, port, threads, q, args)) for r in range(world)]
    for p in procs:
        p.start()
    out: dict[int, Any] = {}
    for _ in range(world):
        rank, value = q.get(timeout=1800)
        out[rank] = value
    for p in procs:
        p.join(timeout=60)
        if p.exitcode != 0:
            raise SystemExit(f"rank process exited with {p.exitcode}")
    return [out[r] for r in range(world)]


def cpu_count() -> int:
    return len(os.sched_getaffinity(0))
