"""Run a function on every rank of a fresh gloo group (spawned processes, 127.0.0.1, free port).

The parent never waits without a bound: ranks that have not reported by ``deadline_s`` are
killed and reported as hung, so a bug can fail a test but never hang CI.
"""

from __future__ import annotations

import datetime
import multiprocessing as mp
import os
import queue
import socket
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass
class RankResult:
    rank: int
    status: str  # "ok", "error" (traceback in value), "hung" (killed at the deadline), "exited"
    value: Any = None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _entry(
    fn: Callable[..., Any], rank: int, world: int, port: int, q: Any, args: tuple, pg_timeout_s: float
) -> None:
    os.environ["T3_RUNTIME_POISON"] = "1"  # every runtime buffer starts as NaN
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    status, value = "ok", None
    try:
        dist.init_process_group(
            "gloo",
            init_method=f"tcp://127.0.0.1:{port}",
            rank=rank,
            world_size=world,
            timeout=datetime.timedelta(seconds=pg_timeout_s),
        )
        value = fn(rank, world, *args)
    except BaseException:  # noqa: BLE001 - reported to the parent
        status, value = "error", traceback.format_exc()
    q.put((rank, status, value))
    q.close()
    q.join_thread()
    # no destroy_process_group / interpreter teardown: a peer may be dead or mid-failure
    os._exit(0)


def run_group(
    fn: Callable[..., Any], world: int, *args: Any, deadline_s: float = 120.0, pg_timeout_s: float = 60.0
) -> list[RankResult]:
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    port = free_port()
    procs = [
        ctx.Process(target=_entry, args=(fn, r, world, port, q, args, pg_timeout_s), daemon=True)
        for r in range(world)
    ]
    for p in procs:
        p.start()
    results: dict[int, RankResult] = {}
    end = time.monotonic() + deadline_s
    while len(results) < world:
        left = end - time.monotonic()
        if left <= 0:
            break
        try:
            rank, status, value = q.get(timeout=min(left, 0.5))
            results[rank] = RankResult(rank, status, value)
        except queue.Empty:
            if all(not p.is_alive() for p in procs) and q.empty():
                break
    for p in procs:
        p.join(timeout=max(0.0, min(5.0, end - time.monotonic())))
        if p.is_alive():
            p.kill()
            p.join(timeout=5)
    for r, p in enumerate(procs):
        if r not in results:
            results[r] = RankResult(r, "hung" if p.exitcode in (None, -9) else "exited", p.exitcode)
    return [results[r] for r in range(world)]


def values(results: list[RankResult]) -> list[Any]:
    """Per-rank values, failing loudly if any rank errored, hung or exited."""
    bad = [r for r in results if r.status != "ok"]
    if bad:
        raise AssertionError("\n".join(f"rank {r.rank}: {r.status}: {r.value}" for r in bad))
    return [r.value for r in results]
