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

from t3.validation import load_dataset
from t3.validation.runner import Predictor

GRID = [round(6.0 + 0.05 * i, 2) for i in range(161)]  # GB/s: 6.0 ... 14.0


def rows():
    out = [r for r in load_dataset() if r.hardware == "h100-8" and r.category == "collective_busbw"
           and r.workload["op"] == "all_to_all" and r.id.endswith("-xxrjun")]  # fmt: skip
    return sorted(out, key=lambda r: (r.workload["gpus"], r.workload["nbytes"]))


def outcome(r, gbps: float):
    """The row predicted as ``t3 validate`` predicts it, with ``p2p_connection_Bps`` = gbps GB/s (0: no
    limit); measured and predicted in GB/s of bus bandwidth."""
    return Predictor({"collective.p2p_connection_Bps": gbps * 1e9}).predict(r)


def main() -> None:
    rs = rows()
    cal = [r for r in rs if r.role == "calibration"]
    print(f"{len(rs)} all-to-all rows of h100-8 (xxrjun), {len(cal)} of them calibration")
    best = None
    for gbps in GRID:
        med = statistics.median(abs(outcome(r, gbps).error) for r in cal)
        if best is None or med < best[0] - 1e-12:
            best = (med, gbps)
    med, gbps = best
    print(f"p2p_connection_Bps = {gbps:g}e9 B/s: median |error| {100 * med:.2f} % on the calibration rows")
    print(f"{'row':34s} {'role':12s} {'measured':>9s} {'predicted':>10s} {'error':>8s} {'no limit':>9s}")
    for r in rs:
        o, off = outcome(r, gbps), outcome(r, 0.0)
        print(
            f"{r.id:34s} {r.role:12s} {o.measured:6.1f} GB/s {o.predicted:6.1f} GB/s {100 * o.error:+7.1f} %"
            f" {100 * off.error:+7.1f} %"
        )


if __name__ == "__main__":
    main()
