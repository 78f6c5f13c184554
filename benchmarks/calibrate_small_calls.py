"""Calibrate the base latency of a collective call on a preset whose library's small calls are measured
back to back (``collective.<protocol>.base_latency_s``), on the calibration rows that pin it.

Run: PYTHONPATH=src python3 benchmarks/calibrate_small_calls.py

A call of a few bytes to 1 KiB moves next to nothing: back to back it takes the launch, the protocol's
base latency and its hops' latencies (NCCL's tuning model, ``t3.api.collective``'s ``terms``). Where a
preset's base latencies are another GPU's (``b200-8`` carries ``h100-8``'s), the calibration rows of such
calls (host-timed, at most 1 KiB) measure how much more a call costs there. The closed form is
``median(measured time - the model's time)`` over those rows of each preset, the offset every protocol's
base latency and NVLS's latency take (the extra cost is per call: the rows' collectives of 1 to 14 hops miss by the same
9-11 us, where a per-hop cost would grow with the hops). The table prints every row, the offset and the
base latencies it gives. Validation rows are never used.
"""

from __future__ import annotations

import statistics

from t3 import api
from t3.config.hardware import load_hardware
from t3.validation.dataset import load_dataset

SMALL = 1024  # bytes: a call of at most this moves next to nothing


def main() -> None:
    rows = [r for r in load_dataset() if r.category == "collective_busbw" and r.role == "calibration"
            and r.workload["timing"] == "host" and r.workload["nbytes"] <= SMALL and r.unit == "us"
            and r.workload["gpus_per_thread"] == 1]  # fmt: skip
    for name in sorted({r.hardware for r in rows}):
        gaps = []
        print(f"{'row':42} {'algorithm':>12} {'measured (us)':>14} {'model (us)':>11} {'gap (us)':>9}")
        for r in (r for r in rows if r.hardware == name):
            w = r.workload
            m = api.collective(w["op"], w["nbytes"], w["gpus"], hardware=name, algo=w["algo"])
            gap = r.measured * 1e-6 - m["time_s"]
            gaps.append(gap)
            print(f"{r.id:42} {m['algo']:>12} {r.measured:14.2f} {m['time_s'] * 1e6:11.2f} {gap * 1e6:9.2f}")
        off = statistics.median(gaps)
        c = load_hardware(name).collective
        bases = {f"{p}.base_latency_s": getattr(c, p).base_latency_s + off for p in ("ll", "ll128", "simple")}
        bases["nvls_latency_s"] = c.nvls_latency_s + off
        print(
            f"{name}: every algorithm's and protocol's base latency + {off * 1e6:.2f} us (median of {len(gaps)} "
            "rows): " + ", ".join(f"collective.{k} = {v:.3g} s" for k, v in bases.items()) + "\n"
        )


if __name__ == "__main__":
    main()
