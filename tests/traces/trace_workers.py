"""Runs on every rank of a gloo group (tests/runtime/dist_harness.run_group): a Megatron-style MLP
profiled with torch.profiler; returns what it ran, the oracle for the import."""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch.profiler import ProfilerActivity, profile

T, H, F = 256, 96, 384  # tokens, hidden, MLP width (distinct sizes: no accidental element-count match)
STEPS = 2


def megatron_mlp(rank: int, world: int, out_dir: str) -> list[dict]:
    """Per step: (a) tensor parallel: column-parallel FC-1 -> row-parallel FC-2 -> all-reduce;
    (b) sequence parallel: all-gather of the token shard -> FC-1 ... FC-2 -> reduce-scatter."""
    g = torch.Generator().manual_seed(rank)
    f = F // world
    w1, w2 = torch.randn(f, H, generator=g), torch.randn(H, f, generator=g)  # column / row shards
    x, xs = torch.randn(T, H, generator=g), torch.randn(T // world, H, generator=g)
    ran: list[dict] = []
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for _ in range(STEPS):
            y = torch.nn.functional.linear(torch.relu(torch.nn.functional.linear(x, w1)), w2)
            dist.all_reduce(y)
            ran.append({"kind": "gemm-ar", "m": T, "n": H, "k": f, "elems": T * H})
            full = torch.empty(T, H)
            dist.all_gather_into_tensor(full, xs)
            h = torch.relu(torch.nn.functional.linear(full, w1))
            ran.append({"kind": "ag-gemm", "m": T, "n": f, "k": H, "elems": T * H})
            y2 = torch.nn.functional.linear(h, w2)
            out = torch.empty(T // world, H)
            dist.reduce_scatter_tensor(out, y2)
            ran.append({"kind": "gemm-rs", "m": T, "n": H, "k": f, "elems": T * H})
    prof.export_chrome_trace(f"{out_dir}/rank{rank}.pt.trace.json")
    return ran


def _rank_main(rank: int, world: int, port: int, out_dir: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    megatron_mlp(rank, world, out_dir)
    dist.destroy_process_group()


if __name__ == "__main__":  # record the traces by hand: python tests/traces/trace_workers.py OUT_DIR
    import socket
    import sys

    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free = s.getsockname()[1]
    mp.spawn(_rank_main, args=(2, free, sys.argv[1]), nprocs=2)
    print(f"wrote {sys.argv[1]}/rank0.pt.trace.json and rank1.pt.trace.json")
