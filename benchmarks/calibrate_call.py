"""Calibrate ``collective.call_alone_s``: the time from an event recorded on an idle GPU to the kernel's
start on the last rank, for one ``torch.distributed`` collective call issued right after a barrier (the
host's path of the call: PyTorch's dispatch and process group, the library's enqueue, the launch; and the
ranks' spread after the barrier), on the calibration rows that pin it.

Run: PYTHONPATH=src python3 benchmarks/calibrate_call.py

A row timed as one call alone (``timing = "call"``: ml-engineering's ``all_reduce_bench.py``, a
``dist.barrier()`` then CUDA events around one ``dist.all_reduce``) takes ``call_alone_s`` plus the
kernel's own time. The value is the closed form ``median(time - device_s)`` over the preset's calibration
rows with that timing, ``time`` from the row's busbw by nccl-tests' formula and ``device_s`` the model's
kernel time (``t3.api.collective``), which does not depend on the value. The table prints every row and
the value. Validation rows are never used.
"""

from __future__ import annotations

import statistics

from t3 import api
from t3.validation.conventions import busbw_factor
from t3.validation.dataset import load_dataset


def main() -> None:
    rows = [r for r in load_dataset() if r.category == "collective_busbw" and r.role == "calibration"
            and r.workload["timing"] == "call"]  # fmt: skip
    for name in sorted({r.hardware for r in rows}):
        gaps = []
        print(f"{'row':46} {'time (us)':>10} {'kernel (us)':>12} {'time - kernel (us)':>19}")
        for r in (r for r in rows if r.hardware == name):
            w = r.workload
            t = busbw_factor(w["op"], w["gpus"]) * w["nbytes"] / (r.measured * 1e9)
            d = api.collective(w["op"], w["nbytes"], w["gpus"], hardware=name, algo=w["algo"])["device_s"]
            gaps.append(t - d)
            print(f"{r.id:46} {t * 1e6:10.2f} {d * 1e6:12.2f} {(t - d) * 1e6:19.2f}")
        value = statistics.median(gaps)
        print(f"{name}: collective.call_alone_s = {value:.3g} s (median of {len(gaps)} rows)")


if __name__ == "__main__":
    main()
