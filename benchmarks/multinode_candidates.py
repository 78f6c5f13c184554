"""Collectives across nodes: each published row beside the time of every algorithm the model has for it.

    python benchmarks/multinode_candidates.py                 # rows of 1 MiB to 256 MiB (the mid sizes)
    python benchmarks/multinode_candidates.py --all-sizes

For every validation row of `collective_busbw` whose GPUs span nodes, prints the measured time (from its
bus bandwidth, in the row's timing: kernel, host or one call), the model's time for each algorithm and
protocol it models there (`t3.api.collective` with `algo=`, compared in the same timing), the algorithm
the model picks (NCCL's choice where the preset gives NCCL's graphs, ``collective.nccl``: the least of
NCCL's own estimate, :mod:`t3.ops.nccl_tuning`; otherwise its own least time) and the one whose time is
nearest the measurement. Then, per row source and algorithm, the median ratio measured / model, and the
median |error| of the rows whose algorithm the library chooses, taking the pick and taking the model's
fastest algorithm instead. Nothing is fitted: this shows whether a miss is in the parts (no algorithm's
time comes near the measurement) or in the choice (another algorithm's does).
"""

from __future__ import annotations

import argparse
import statistics
from collections import defaultdict

from t3 import api
from t3.config.hardware import load_hardware
from t3.ops import nccl_tuning
from t3.ops.collectives import busbw_factor, spans_nodes
from t3.validation import load_dataset
from t3.validation.conventions import measured_compared
from t3.validation.runner import collective_compared_s

MIB = 1 << 20


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--all-sizes", action="store_true", help="every size, not only 1-256 MiB")
    a = ap.parse_args()
    rows = [r for r in load_dataset() if r.category == "collective_busbw" and r.role == "validation"]
    hws: dict = {}
    ratios: dict[tuple[str, str], list[float]] = defaultdict(list)
    # "preset op": (|error| of the pick, |error| of the model's fastest)
    errors: dict[str, list[tuple[float, float]]] = defaultdict(list)
    print(f"{'row':52} {'size':>9} {'measured':>10}  {'model picks':18} {'nearest':18} every algorithm (us)")
    for row in rows:
        w = row.workload
        hw = hws.setdefault(row.hardware, load_hardware(row.hardware))
        n, s = w["gpus"], w["nbytes"]
        if not spans_nodes(hw, n) or (not a.all_sizes and not MIB <= s <= 256 * MIB):
            continue
        measured = s * busbw_factor(w["op"], n) / (measured_compared(row) * 1e9)  # (GB/s -> s)
        kw = dict(op=w["op"], nbytes=s, gpus=n, hardware=row.hardware, gpus_per_thread=w["gpus_per_thread"])
        picked = api.collective(**kw, algo=w["algo"])
        times = {}
        for algo in api.collective_algos(w["op"], row.hardware, n)[1:]:
            if w["algo"] != "auto" and algo.split("/")[0] != w["algo"].split("/")[0]:
                continue  # (a row that names its algorithm: its protocols only)
            times[algo] = collective_compared_s(api.collective(**kw, algo=algo), w["timing"])
        near = min(times, key=lambda k: abs(times[k] - measured))
        if w["algo"] == "auto":
            fastest = min(times.values())
            pick = collective_compared_s(picked, w["timing"])
            errors[f"{row.hardware} {w['op']}"].append(
                (abs(measured / pick - 1), abs(measured / fastest - 1))
            )
        source = row.id.rsplit("-", 1)[-1]
        for algo, t in times.items():
            ratios[(source, algo)].append(measured / t)
        every = " ".join(f"{k}={1e6 * t:.0f}" for k, t in times.items())
        print(
            f"{row.id[:52]:52} {s / MIB:7.1f}Mi {1e6 * measured:8.0f}us  {picked['algo']:18} {near:18} {every}"
        )
    print()
    print(
        "median measured / model time, per source and algorithm (1.00: the algorithm's time is the measurement's)"
    )
    for (source, algo), rs in sorted(ratios.items()):
        print(f"  {source:28} {algo:18} {statistics.median(rs):5.2f} x  ({len(rs)} rows)")
    print()
    print(
        "rows whose algorithm the library chooses: median |measured / model time - 1|, the pick against the fastest"
    )
    for key, es in sorted(errors.items()):
        preset, op = key.split()
        chooses = hws[preset].collective.nccl is not None and op in nccl_tuning.OPS
        nccl = "NCCL's estimate" if chooses else "the model's fastest"
        print(
            f"  {key:27} {len(es):4d} rows  pick ({nccl:19}) {100 * statistics.median(e for e, _ in es):5.1f} %"
            f"   the model's fastest {100 * statistics.median(f for _, f in es):5.1f} %"
        )


if __name__ == "__main__":
    main()
