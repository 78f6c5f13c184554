"""The all-reduce's own time beside a hipBLASLt GEMM on 8x MI300X: published medians against the model.

Run: PYTHONPATH=src python benchmarks/mi300x_comm_beside_gemm.py [--experiment]

Published: ROCm/tritonBLAS at commit 3b84da43 (branch neoblizz/df-counters-experiments), the per-size
runs ``results/overlap_data/torch_<size>.json`` and ``torch_12k_nch<C>.json`` (torch.matmul = hipBLASLt,
bf16, the same local GEMM on every GPU; a torch.distributed all_reduce of a bf16 tensor on a second
stream, launched first; 100 or 150 steps after 15 warm-up, each after a device synchronize). The medians
of their per-iteration lists ``comm_all`` (one all-reduce call timed alone) and ``rot_overlap_comm_all``
(the same call's window while the GEMM runs beside it, rotating GEMM buffers) are the dataset's seven
``mi300x-gemm*-comm-tritonblas-*`` validation rows (``src/t3/validation/data/interference.toml``, each
with its source and conventions), which this script reads.

What it shows: on five of the seven runs the all-reduce beside the GEMM takes 1.71-1.76 x its time
alone, close to the MI300X's engine clock over its GEMM clock (``compute.clock_hz`` 2.1 GHz, datasheet,
over ``compute.gemm_clock_hz.bf16`` 1.207 GHz, the ROCm blog's median under hipBLASLt at the 750 W
limit: 1.74 x); on the other two (8192 and 16384 cubed) 2.2-2.5 x. The model runs the all-reduce beside
the GEMM at its rate alone (no shared resource limits it there: its CU work is on CUs of its own and its
xGMI links carry nothing of the GEMM's), so it predicts 1.00 x. Not a test, no assertion.

``--experiment`` also runs the dataset's interference rows of ``mi300x-8`` (as ``t3 validate`` does)
twice: as the model has them, and with an experiment that is not the model: while a GEMM and a
collective run together, the collective's CU copy rate and link rate are divided by that clock ratio
for the whole of its run (the clock the GEMM holds, applied to every kernel of the pair). It prints the
median and largest |error| (percentage points) of each, and every row whose error moves by more than
10 points.
"""

from __future__ import annotations

import argparse
import statistics

from t3 import api
from t3.config.hardware import load_hardware

SOURCE = (
    "https://github.com/ROCm/tritonBLAS/tree/3b84da431371dbda01f6109fdf287085cb3717aa/results/overlap_data"
)
MiB = 2**20


def runs() -> list:
    """The dataset's rows of the all-reduce beside a hipBLASLt GEMM on mi300x-8 (victim = comm)."""
    from t3.validation.dataset import load_dataset

    return [
        r
        for r in load_dataset()
        if r.category == "interference" and r.hardware == "mi300x-8" and r.workload["victim"] == "comm"
    ]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--experiment", action="store_true", help="also the rows with the clock experiment")
    a = ap.parse_args()
    table()
    if a.experiment:
        experiment()


def table() -> None:
    hw = load_hardware("mi300x-8")
    clock_ratio = hw.compute.clock_hz / hw.compute.gemm_clock_hz["bf16"]
    print(f"published: {SOURCE}")
    print(
        f"mi300x-8: compute.clock_hz {hw.compute.clock_hz / 1e9:.3f} GHz / compute.gemm_clock_hz.bf16 "
        f"{hw.compute.gemm_clock_hz['bf16'] / 1e9:.3f} GHz = {clock_ratio:.2f} x"
    )
    head = (
        f"{'run':22s} {'GEMM':>6s} {'AR (MiB)':>9s} {'channels':>8s} {'GEMM alone (ms)':>15s} "
        f"{'AR alone (ms)':>13s} {'AR beside (ms)':>14s} {'ratio (x)':>9s} "
        f"{'model AR alone (ms)':>19s} {'model AR beside (ms)':>20s} {'model ratio (x)':>15s}"
    )
    print(head)
    print("-" * len(head))
    for row in runs():
        w, pub = row.workload, row.published
        size, nbytes, ch = w["m"], w["nbytes"], w["channels"]
        alone, beside, gemm = pub["alone_ms"], pub["together_ms"], pub["gemm_alone_ms"]
        r = api.interference(m=size, n=size, k=size, comm="all_reduce", nbytes=nbytes, gpus=8, hardware=hw,
                             channels=ch, arrangement="together", lead_s=w["lead_us"] * 1e-6)  # fmt: skip
        ma, mb = r["comm_alone_s"] * 1e3, r["comm_together_s"] * 1e3
        name = row.locator.split(":")[0].rsplit("/", 1)[-1]
        print(
            f"{name:22s} {size:6d} {nbytes / MiB:9.0f} {ch or 'default':>8} {gemm:15.3f} {alone:13.3f} "
            f"{beside:14.3f} {beside / alone:9.2f} {ma:19.3f} {mb:20.3f} {mb / ma:15.2f}"
        )


def experiment() -> None:
    """The mi300x-8 interference rows as the model predicts them, then with the collective's CU copy and
    link rates divided by compute.clock_hz / compute.gemm_clock_hz[dtype] whenever it runs beside a GEMM
    (an experiment on :func:`t3.ops.interference._run`'s hardware; the model is unchanged)."""
    import t3.ops.interference as inter
    from t3.validation.dataset import load_dataset
    from t3.validation.runner import Predictor

    model_run = inter._run

    def slowed(hw, shape, comm, gemms, comms, *args, **kw):
        if gemms and comms:
            r = hw.compute.gemm_clock_hz.get(shape.dtype, hw.compute.clock_hz) / hw.compute.clock_hz
            hw = hw.with_overrides(
                {
                    "compute.cu_copy_Bps": hw.compute.cu_copy_Bps * r,
                    "link.bandwidth_Bps": hw.link.bandwidth_Bps * r,
                }
            )
        return model_run(hw, shape, comm, gemms, comms, *args, **kw)

    rows = [r for r in load_dataset() if r.category == "interference" and r.hardware == "mi300x-8"]
    before = {r.id: Predictor().predict(r) for r in rows}
    inter._run = slowed
    try:
        after = {r.id: Predictor().predict(r) for r in rows}
    finally:
        inter._run = model_run
    print()
    print(f"mi300x-8 interference rows ({len(rows)}), |predicted - measured| in percentage points:")
    for name, out in (("model", before), ("experiment", after)):
        errs = [abs(o.predicted - o.measured) for o in out.values()]
        print(f"  {name:11s} median {statistics.median(errs):5.1f} pp, max {max(errs):5.1f} pp")
    print(f"  {'row':58s} {'measured (%)':>12s} {'model (%)':>10s} {'experiment (%)':>14s}")
    for r in rows:
        b, x = before[r.id], after[r.id]
        if abs(abs(x.predicted - x.measured) - abs(b.predicted - b.measured)) > 10:
            print(f"  {r.id:58s} {b.measured:12.1f} {b.predicted:10.1f} {x.predicted:14.1f}")


if __name__ == "__main__":
    main()
