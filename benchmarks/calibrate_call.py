"""Calibrate ``collective.call_alone_s``: the time from an event recorded on an idle GPU to the kernel's
start on the last rank, for one ``torch.distributed`` collective call issued right after a barrier (the
host's path of the call: PyTorch's dispatch and process group, the library's enqueue, the launch; and the
ranks' spread after the barrier), on the calibration rows that pin it.

Run: PYTHONPATH=src python3 benchmarks/calibrate_call.py

A row timed as one call alone (``timing = "call"``) takes ``call_alone_s`` plus the kernel's own time; the
same call back to back (``timing = "host"``) takes the launch (``compute.kernel_launch_s``) plus the
kernel's time. Per preset, the value is the closed form ``median(...)`` over its calibration call rows of:

- where the row's source times the same call back to back too (``back_to_back_us`` under the row's
  ``[row.published]``): ``time alone - time back to back + launch``, which needs no kernel time from the
  model;
- otherwise: ``time alone - device_s``, ``device_s`` the model's kernel time (``t3.api.collective``),
  which does not depend on the value.

Times are from the rows (a busbw by nccl-tests' formula). The table prints every row and the value.
Validation rows are never used.
"""

from __future__ import annotations

import statistics

from t3 import api
from t3.config.hardware import load_hardware
from t3.validation.conventions import busbw_factor
from t3.validation.dataset import load_dataset


def _time_s(r) -> float:
    w = r.workload
    if r.unit == "us":
        return r.measured * 1e-6
    return busbw_factor(w["op"], w["gpus"]) * w["nbytes"] / (r.measured * 1e9)


def main() -> None:
    alone = [r for r in load_dataset() if r.category == "collective_busbw" and r.role == "calibration"
             and r.workload["timing"] == "call"]  # fmt: skip
    for name in sorted({r.hardware for r in alone}):
        launch = load_hardware(name).compute.kernel_launch_s
        gaps = []
        print(f"{'row':46} {'alone (us)':>11} {'against':>28} {'(us)':>9} {'constant (us)':>14}")
        for r in (r for r in alone if r.hardware == name):
            w, t = r.workload, _time_s(r)
            pair = r.published.get("back_to_back_us")
            if pair is not None:
                gap, what, other = t - pair * 1e-6 + launch, "back to back - launch", pair * 1e-6 - launch
            else:
                d = api.collective(w["op"], w["nbytes"], w["gpus"], hardware=name, algo=w["algo"])["device_s"]
                gap, what, other = t - d, "the model's kernel", d
            gaps.append(gap)
            print(f"{r.id:46} {t * 1e6:11.2f} {what:>28} {other * 1e6:9.2f} {gap * 1e6:14.2f}")
        value = statistics.median(gaps)
        print(f"{name}: collective.call_alone_s = {value:.3g} s (median of {len(gaps)} rows)\n")


if __name__ == "__main__":
    main()
