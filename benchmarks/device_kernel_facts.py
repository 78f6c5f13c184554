"""What the GPU's library runs for each GEMM of the interference measurements: the cuBLAS kernel's name
(its tile, cluster and schedule), grid, block, registers and shared memory, read from torch.profiler's
trace, and the resources of t3 measure's k-block copy kernel (Triton). These are the facts that decide
how many SMs a GEMM's wave needs and whether a copy block can share an SM with a GEMM block.

Run on a GPU machine (PyTorch with CUDA; Triton for the copy kernel's facts):

    python3 benchmarks/device_kernel_facts.py OUT.json

Prints one line per GEMM and writes every kernel event's fields to OUT.json. No t3 dependency beyond
the kit's kernels (src/t3/measure/kernels.py, loaded by path).
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import torch

SHAPES = [
    (8192, 8192, 8192), (4096, 7168, 8192), (1024, 7168, 8192), (512, 8192, 8192), (2048, 2048, 2048),
    (4096, 4096, 4096), (1024, 8192, 8192), (256, 8192, 8192), (128, 8192, 8192), (8192, 8192, 1024),
    (8192, 1024, 8192), (2048, 8192, 8192), (4096, 8192, 8192),
    # few tiles of long K: does the library split K (a splitK kernel and splitKreduce_kernel), and from
    # how few tiles on (t3.ops.gemm._splits assumes half the SMs idle)
    (16, 4096, 4096), (32, 1024, 7168), (64, 1024, 16384), (128, 1024, 8192), (256, 2048, 8192),
    # async-TP's pieces in the kraken runs (src/t3/measure/plan.py _ASYNC_TP): which tile and grid, split or not
    (128, 6656, 4096), (128, 6656, 16384), (256, 6656, 16384), (64, 4096, 14336), (256, 4096, 14336),
    # the small cubes of the host-timed H100 rows and mamf-finder's best FP8 shape (here in BF16)
    (512, 512, 512), (1024, 1024, 1024), (1024, 9216, 14336),
]  # fmt: skip
FIELDS = ("grid", "block", "registers per thread", "shared memory", "blocks per SM", "warps per SM",
          "est. achieved occupancy %")  # fmt: skip


def kernels_of(fn) -> list[dict]:
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        prof.export_chrome_trace(f.name)
        trace = json.load(open(f.name))
    out = []
    for e in trace.get("traceEvents", []):
        if e.get("cat") == "kernel":
            a = e.get("args", {})
            out.append({"name": e["name"], "dur_us": e.get("dur"), **{k: a.get(k) for k in FIELDS}})
    return out


def main(path: str) -> None:
    dev = torch.device("cuda")
    p = torch.cuda.get_device_properties(dev)
    facts = {"gpu": torch.cuda.get_device_name(dev), "sms": p.multi_processor_count, "torch": torch.__version__,
             "cuda": torch.version.cuda, "regs_per_sm": getattr(p, "regs_per_multiprocessor", None),
             "smem_per_sm": getattr(p, "shared_memory_per_multiprocessor", None),
             "max_threads_per_sm": getattr(p, "max_threads_per_multi_processor", None), "gemms": [], "copy": []}  # fmt: skip
    print(
        f"{facts['gpu']}: {facts['sms']} SMs, regs/SM {facts['regs_per_sm']}, smem/SM {facts['smem_per_sm']}"
    )
    for m, n, k in SHAPES:
        a = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
        b = torch.randn(n, k, device=dev, dtype=torch.bfloat16)
        c = torch.empty(m, n, device=dev, dtype=torch.bfloat16)
        ks = kernels_of(lambda a=a, b=b, c=c: torch.mm(a, b.t(), out=c))
        facts["gemms"].append({"m": m, "n": n, "k": k, "kernels": ks})
        for x in ks:
            print(f"{m}x{n}x{k}: {x['name'][:110]} grid {x['grid']} block {x['block']} regs {x['registers per thread']}"
                  f" smem {x['shared memory']} blocks/SM {x['blocks per SM']} {x['dur_us']} us")  # fmt: skip
        del a, b, c
    try:
        here = Path(__file__).resolve().parent.parent / "src" / "t3" / "measure"
        pkg = tempfile.mkdtemp()
        import shutil

        shutil.copytree(here, Path(pkg) / "t3kit")
        sys.path.insert(0, pkg)
        from t3kit import kernels as kk  # noqa: PLC0415

        kern = kk.Kernels(torch)
        src = torch.ones(16 << 18, device=dev)
        dst = torch.empty_like(src)
        for blocks in (1, 4, 66, 132):
            ks = kernels_of(lambda blocks=blocks: kern.copy(src, dst, blocks, 1))
            facts["copy"].append({"blocks": blocks, "kernels": ks})
            for x in ks:
                print(f"copy on {blocks} blocks: {x['name'][:60]} grid {x['grid']} block {x['block']}"
                      f" regs {x['registers per thread']} smem {x['shared memory']}")  # fmt: skip
    except Exception as err:  # noqa: BLE001 - the GEMM facts stand without the copy's
        print(f"copy kernel facts skipped: {err}")
    Path(path).write_text(json.dumps(facts, indent=1))
    print(f"wrote {path}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python3 benchmarks/device_kernel_facts.py OUT.json")
    main(sys.argv[1])
