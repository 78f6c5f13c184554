"""Which interference mechanism moves which figure: a GEMM's slowdown beside a communication on one GPU
(``t3.api.interference``, background arrangement) with every mechanism on, then with each switched off in
turn, over several GEMM shapes and communications.

Run: PYTHONPATH=src python benchmarks/interference_mechanisms.py [--hardware h100-8]

Mechanisms (each a preset value with its source, docs/validation.md "Interference"):
- held CUs: a communication kernel's blocks own their CUs for its whole duration
  (``collective.exclusive_cus``; off: its CU work is shared in proportion; a copy kernel on a given
  number of blocks holds them whatever the preset says: it loops on them);
- memory-side L2: communication's DRAM bytes pass the L2 that feeds the GEMM's tiles
  (``compute.l2_memory_side``; off: they reach DRAM by another path);
- HBM queueing: the loaded latency of the GEMM's window-limited loads and the read/write turnaround
  (``hbm.service_s`` and ``hbm.turnaround``; off: both 0);
- block dispatch in launch order: a kernel launched while an earlier one's blocks fill the CUs waits
  for them (``compute.dispatch = "launch_order"``; off: ``shared``, the CUs shared as they free);
- cluster slots: the GEMM's blocks run in thread-block clusters, so each CU a kernel holds takes its
  cluster slot (``compute.cluster_ctas``; off: 1, a held CU costs one CU).
Not a test; every number is a slowdown in per cent of the GEMM alone.
"""

from __future__ import annotations

import argparse
import sys
import time

from t3 import api
from t3.config.hardware import load_hardware

SHAPES = ((8192, 8192, 8192), (4096, 4096, 4096), (16384, 1024, 8192), (2048, 7168, 8192))
COMMS = (  # (label, interference keywords)
    ("all-gather 256 MiB, NCCL ring (CU)", dict(comm="all_gather", nbytes=256 << 20, gpus=8)),
    ("all-reduce 256 MiB, NCCL's choice", dict(comm="all_reduce", nbytes=256 << 20, gpus=8)),
    ("all-gather 256 MiB, copy engines", dict(comm="all_gather", nbytes=256 << 20, gpus=8, executor="dma")),
    ("copy-engine copy 1 GiB", dict(comm="ce_copy", nbytes=1 << 30, gpus=1)),
    ("copy kernel 1 GiB on 16 CUs", dict(comm="sm_copy", nbytes=1 << 30, gpus=1, cus=16)),
    ("driver copy 256 MiB (memcpy)", dict(comm="memcpy", nbytes=256 << 20, gpus=1)),
)
OFF = (
    ("held CUs off", {"collective.exclusive_cus": False}),
    ("memory-side L2 off", {"compute.l2_memory_side": False}),
    ("HBM queueing off", {"hbm.service_s": 0.0, "hbm.turnaround": 0.0}),
    ("dispatch shared", {"compute.dispatch": "shared"}),
    ("clusters off", {"compute.cluster_ctas": 1}),
)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hardware", default="h100-8", help="a preset name or hardware TOML (default h100-8)")
    a = ap.parse_args()
    t0 = time.perf_counter()
    hw = load_hardware(a.hardware)
    variants = [("all on", hw)] + [(label, hw.with_overrides(o)) for label, o in OFF]
    print(f"GEMM slowdown beside a communication on {hw.name} (bf16, background), % of the GEMM alone")
    head = f"{'communication':36s} {'GEMM M x N x K':18s}" + "".join(f"{v:>20s}" for v, _ in variants)
    print(head)
    for label, kw in COMMS:
        for m, n, k in SHAPES:
            cells = []
            for _, h in variants:
                r = api.interference(m, n, k, hardware=h, **kw)
                cells.append(f"{r['gemm_slowdown_pct']:19.1f}%")
            print(f"{label:36s} {f'{m}x{n}x{k}':18s}" + "".join(cells))
    print(
        f"{len(COMMS) * len(SHAPES) * len(variants)} interference predictions in {time.perf_counter() - t0:.1f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
