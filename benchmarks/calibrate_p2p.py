"""`collective.p2p_connection_Bps` of h100-8: the bytes/s of remote payload one channel of NCCL's send/recv
kernel sustains per connection (t3.ops.collectives.p2p_connections; the channel count, chunk and slice
rules are NCCL's own, src/enqueue.cc). No rate is published.

Calibration rows (stated in src/t3/validation/data/collectives.toml): xxrjun/nccl-tests-cluster's 8-GPU
alltoall_perf rows of 32-512 MiB, where the connections bound the exchange (one connection per channel).
The value minimises their median |error| on a grid of 0.05 GB/s; the 4-GPU rows of the same node (8
channels per peer instead of 4) and the 8-GPU rows from 1 GiB (two connections per channel: the
links bound) are validation, printed beside.

    PYTHONPATH=src python benchmarks/calibrate_p2p.py
"""

from __future__ import annotations

import statistics

from t3 import api
from t3.config.hardware import load_hardware
from t3.validation import load_dataset

GRID = [round(6.0 + 0.05 * i, 2) for i in range(161)]  # GB/s: 6.0 ... 14.0


def rows():
    out = [r for r in load_dataset() if r.hardware == "h100-8" and r.category == "collective_busbw"
           and r.workload["op"] == "all_to_all" and r.id.endswith("-xxrjun")]  # fmt: skip
    return sorted(out, key=lambda r: (r.workload["gpus"], r.workload["nbytes"]))


def busbw_GBps(r, hw) -> float:
    w = r.workload
    x = api.collective("all_to_all", w["nbytes"], gpus=w["gpus"], hardware=hw)
    return x["busbw_Bps"] / 1e9


def measured_GBps(r) -> float:
    return r.published["busbw_GBps"]


def main() -> None:
    rs = rows()
    cal = [r for r in rs if r.role == "calibration"]
    print(f"{len(rs)} all-to-all rows of h100-8 (xxrjun), {len(cal)} of them calibration")
    best = None
    for gbps in GRID:
        hw = load_hardware("h100-8", {"collective.p2p_connection_Bps": gbps * 1e9})
        med = statistics.median(abs(busbw_GBps(r, hw) / measured_GBps(r) - 1) for r in cal)
        if best is None or med < best[0] - 1e-12:
            best = (med, gbps)
    med, gbps = best
    print(f"p2p_connection_Bps = {gbps:g}e9 B/s: median |error| {100 * med:.2f} % on the calibration rows")
    hw = load_hardware("h100-8", {"collective.p2p_connection_Bps": gbps * 1e9})
    off = load_hardware("h100-8", {"collective.p2p_connection_Bps": 0.0})
    print(f"{'row':34s} {'role':12s} {'measured':>9s} {'predicted':>10s} {'error':>8s} {'no limit':>9s}")
    for r in rs:
        m, p, q = measured_GBps(r), busbw_GBps(r, hw), busbw_GBps(r, off)
        print(
            f"{r.id:34s} {r.role:12s} {m:6.1f} GB/s {p:6.1f} GB/s {100 * (p / m - 1):+7.1f} % {100 * (q / m - 1):+7.1f} %"
        )


if __name__ == "__main__":
    main()
