"""``python -m t3.measure``: the kit without the ``t3`` command (argparse only), for a GPU machine whose
Python has PyTorch but not ``t3``'s dependencies (``benchmarks/device_measure.sh`` runs a copy of this
package this way). Options as ``t3 measure``; exit status 2 for bad input, 1 when no row was written."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .compat import ConfigError
from .runner import MeasureOptions, print_summary, run_measure


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="t3-measure", description=__doc__)
    p.add_argument("--out", required=True, type=Path, help="output directory (measured.toml, run.json)")
    p.add_argument(
        "--overwrite", action="store_true", help="replace measured.toml and run.json in a non-empty --out"
    )
    p.add_argument("--device", default="auto", help="auto, cuda (CUDA or ROCm) or cpu")
    p.add_argument(
        "--hardware", default=None, help="the preset the rows are filed under (default: from the GPU's name)"
    )
    p.add_argument("--only", default=None, help="comma-separated suites: gemm,hbm,latency,interference")
    p.add_argument("--quick", action="store_true", help="a subset of every grid (a few times faster)")
    p.add_argument(
        "--allow-cpu", action="store_true", help="write rows from a CPU run (plumbing, not GPU data)"
    )
    p.add_argument(
        "--budget", type=float, default=None, help="seconds after which remaining measurements are skipped"
    )
    p.add_argument(
        "--blocks",
        default=None,
        help="thread-block counts of the k-block copies, e.g. 1,2,4,8 (default: the plan's)",
    )
    p.add_argument("--tag", default=None, help="row id prefix (default: <preset>-<date>-<time>)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON (progress goes to stderr)")
    a = p.parse_args(argv)
    opts = MeasureOptions(
        a.out, a.overwrite, a.device, a.hardware, a.only, a.quick, a.allow_cpu, a.budget, a.tag, a.blocks
    )
    log = sys.stderr if a.json else sys.stdout
    try:
        summary = run_measure(opts, log)
    except ConfigError as err:
        print(f"error: {' '.join(str(err).split())}", file=sys.stderr)
        return 2
    if a.json:
        print(json.dumps(summary, indent=1))
    else:
        print_summary(summary, log)
    return 0 if summary["rows"] else 1


if __name__ == "__main__":
    sys.exit(main())
