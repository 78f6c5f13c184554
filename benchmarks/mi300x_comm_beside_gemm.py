"""The all-reduce's own time beside a hipBLASLt GEMM on 8x MI300X: published medians against the model.

Run: PYTHONPATH=src python benchmarks/mi300x_comm_beside_gemm.py [--experiment]

Published: ROCm/tritonBLAS at commit 3b84da43 (branch neoblizz/df-counters-experiments), the per-size
runs ``results/overlap_data/torch_<size>.json`` and ``torch_12k_nch<C>.json`` (torch.matmul = hipBLASLt,
bf16, the same local GEMM on every GPU; a torch.distributed all_reduce of a bf16 tensor on a second
stream, launched first; 100 or 150 steps after 15 warm-up). Each file holds per-iteration lists; the
medians below were taken from them: ``comm_all`` (the all-reduce alone, back to back) and
``rot_overlap_comm_all`` (the same all-reduce's own window while the GEMM runs beside it, rotating GEMM
buffers: the convention of the interference rows of the dataset, which use the same files' GEMM and
wall-clock medians). The GEMM-side rows of these runs are validation rows of ``t3 validate``; this
script shows the other side, which those rows leave out (no median of it is published).

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

# (file, GEMM m = n = k, all-reduce bytes (bf16 tensor), NCCL_MAX_NCHANNELS (0: unset), medians (ms) of
# comm_all and rot_overlap_comm_all, rotating_median (the GEMM alone, ms))
RUNS = [
    ("torch_2048.json", 2048, 2048 * 2048 * 2, 0, 0.1419, 0.2463, 0.0628),
    ("torch_4096.json", 4096, 4096 * 4096 * 2, 0, 0.2759, 0.4810, 0.2312),
    ("torch_8192.json", 8192, 8192 * 8192 * 2, 0, 0.8189, 2.0087, 1.6989),
    ("torch_12288.json", 12288, 12288 * 12288 * 2, 0, 1.7476, 3.0760, 5.6770),
    ("torch_16384.json", 16384, 16384 * 16384 * 2, 0, 3.0478, 6.5952, 13.3912),
    ("torch_12k_nch32.json", 12288, 16384 * 16384 * 2, 32, 3.8767, 6.7698, 5.6991),
    ("torch_12k_nch56.json", 12288, 16384 * 16384 * 2, 56, 3.0320, 5.1995, 5.7216),
]
LEAD_S = 47.6e-6  # torch.cuda._sleep(100000) at the 2.1 GHz engine clock (as the dataset's rows)


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
    for name, size, nbytes, ch, alone, beside, gemm in RUNS:
        r = api.interference(m=size, n=size, k=size, comm="all_reduce", nbytes=nbytes, gpus=8,
                             hardware=hw, channels=ch, arrangement="together", lead_s=LEAD_S)  # fmt: skip
        ma, mb = r["comm_alone_s"] * 1e3, r["comm_together_s"] * 1e3
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
