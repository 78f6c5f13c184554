#!/usr/bin/env bash
# `t3 measure` on a lent GPU, in one call of the device tool (docs/measure.md).
#
# How to call it (from a session that holds the device tool; the machine has no network):
#   run(command="bash benchmarks/device_measure.sh", timeout_s=480)
# What comes back under $OUT (files_at in the tool's reply):
#   $OUT/measure/measured.toml   the rows (dataset format; load with t3.validation.load_dataset)
#   $OUT/measure/run.json        raw samples (seconds), environment, plan, notes
#   $OUT/measure.log             the progress lines
#   $OUT/kernel-facts.json       the library's kernel (name, grid, block) for each GEMM of device_kernel_facts.py
# Then, here: copy the folder into the repository and fit a preset to it:
#   t3 calibrate --measured <folder> --base h100-8 --out my-h100.toml
#
# Nothing is installed from a network. If this Python can run `python -m t3` from src/ (t3's
# dependencies: pydantic, typer, rich), that runs; else a copy of src/t3/measure runs alone as the
# package `t3measure` (PyTorch, numpy and the standard library only; its rows are checked when
# `t3 calibrate` or `t3 validate` load them). Wheels carried in .whl/ (the device tool's README says
# how) are installed into /tmp/site first, without a network.
#
# Environment: T3_MEASURE_BUDGET_S (default 330: seconds of measuring, then the remaining measurements
# are skipped; the default run is sized for 1-2 minutes on an H100), T3_MEASURE_ARGS (more options, e.g.
# "--quick" or "--only gemm,hbm"), PYTHON (default python3).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
OUT="${OUT:-$PWD/measure-out}"
BUDGET="${T3_MEASURE_BUDGET_S:-330}"
PY="${PYTHON:-python3}"
export PYTHONUNBUFFERED=1
mkdir -p "$OUT"

if [ -d .whl ] && ls .whl/*.whl >/dev/null 2>&1; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
fi

echo "== device"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv 2>/dev/null \
  || rocm-smi 2>/dev/null || echo "(no nvidia-smi / rocm-smi)"
"$PY" - <<'EOF'
import torch
print("torch", torch.__version__, "CUDA", torch.version.cuda, "ROCm", getattr(torch.version, "hip", None))
print("GPU", torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none visible")
try:
    import triton
    print("triton", triton.__version__)
except ImportError:
    print("triton: not importable (copies on k blocks and the flag latency are skipped)")
EOF

if PYTHONPATH="src${PYTHONPATH:+:$PYTHONPATH}" "$PY" -m t3 measure --help >/dev/null 2>&1; then
  echo "== python -m t3 measure (from src/)"
  CMD=(env "PYTHONPATH=src${PYTHONPATH:+:$PYTHONPATH}" "$PY" -m t3 measure)
else
  echo "== the kit alone (this Python lacks t3's dependencies): python -m t3measure"
  KIT="$(mktemp -d)"
  cp -r src/t3/measure "$KIT/t3measure"
  CMD=(env "PYTHONPATH=$KIT${PYTHONPATH:+:$PYTHONPATH}" "$PY" -m t3measure)
fi
# shellcheck disable=SC2086  # T3_MEASURE_ARGS is a list of options
timeout --signal=INT --kill-after=30 $((BUDGET + 120)) "${CMD[@]}" --out "$OUT/measure" --overwrite \
  --budget "$BUDGET" ${T3_MEASURE_ARGS:-} 2>&1 | tee "$OUT/measure.log"
rc=${PIPESTATUS[0]}

echo "== the library's kernels for the measured GEMMs (names, grids: split-K or one CTA per tile)"
timeout 120 "$PY" benchmarks/device_kernel_facts.py "$OUT/kernel-facts.json" 2>&1 | tail -30 \
  || echo "(kernel facts not taken)"

echo "== rows (exit status $rc)"
"$PY" - "$OUT/measure/measured.toml" <<'EOF'
import collections
import sys
import tomllib

try:
    rows = tomllib.load(open(sys.argv[1], "rb")).get("row", [])
except (OSError, tomllib.TOMLDecodeError) as err:
    sys.exit(f"no rows: {err}")
by = collections.defaultdict(list)
for r in rows:
    by[r["category"]].append(r)
print(f"{len(rows)} rows: " + ", ".join(f"{len(v)} {k}" for k, v in by.items()))
for r in rows:
    w = r["workload"]
    if r["category"] == "gemm_tflops":
        what = f"GEMM {w['m']}x{w['n']}x{w['k']} {w['dtype']}"
    elif r["category"] == "hbm_bandwidth":
        what = f"{w['stream']} {w['nbytes'] / 2**20:.0f} MiB" + (f" on {w['cus']} blocks" if w.get("cus") else "")
    elif r["category"] == "latency":
        what = w["what"]
    else:
        on = f" on {w['cus']} blocks" if w.get("cus") else ""
        what = (f"{w['victim']}: {w['m']}x{w['n']}x{w['k']} beside {w['comm']} {w['nbytes'] / 2**20:.0f} MiB{on}"
                f" ({w['arrangement']})")
    print(f"  {r['category']:14s} {what:70s} {r['measured']:>10.4g} {r['unit']}")
EOF
exit "$rc"
