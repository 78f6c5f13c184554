"""``t3 measure``: measure the GPU present (GEMMs, HBM streams, latencies, interference) into dataset rows."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from t3.cli.common import check_output_dir
from t3.cli.main import app

_OUT = typer.Option(
    ...,
    "--out",
    help="output directory: measured.toml (rows) and run.json (raw samples); created if missing; a non-empty "
    "one only with --overwrite (measurements cannot be recomputed, so even an earlier run's are kept)",
)
_OVER = typer.Option(False, "--overwrite", help="replace measured.toml and run.json in a non-empty --out")
_DEV = typer.Option("auto", "--device", help="auto (the GPU if PyTorch sees one), cuda (CUDA or ROCm) or cpu")
_HW = typer.Option(
    None,
    "--hardware",
    help="preset the rows are filed under (default: from the GPU's name: H100, H200, MI300X)",
)
_ONLY = typer.Option(
    None, "--only", help="comma-separated suites: gemm,hbm,latency,interference (default: all)"
)
_QUICK = typer.Option(False, "--quick", help="a subset of every grid (a few times faster)")
_CPU = typer.Option(
    False, "--allow-cpu", help="write rows from a CPU run (the kit's plumbing, never GPU data)"
)
_BUDGET = typer.Option(None, "--budget", help="seconds after which the remaining measurements are skipped")
_BLOCKS = typer.Option(
    None, "--blocks", help="thread-block counts of the k-block copies, e.g. 1,2,4,8 (default: the plan's)"
)
_TAG = typer.Option(None, "--tag", help="row id prefix (default: <preset>-<date>-<time>)")
_JSON = typer.Option(False, "--json", help="print the summary as one JSON object (progress goes to stderr)")


@app.command()
def measure(
    out: Path = _OUT, overwrite: bool = _OVER, device: str = _DEV, hardware: str = _HW, only: str = _ONLY,
    quick: bool = _QUICK, allow_cpu: bool = _CPU, budget: float = _BUDGET, tag: str = _TAG, as_json: bool = _JSON,
    blocks: str = _BLOCKS,
) -> None:  # fmt: skip
    """Measure this machine's GPU into dataset rows (docs/measure.md): GEMM throughput, HBM bandwidth,
    launch / stream-wait / flag latencies, and a GEMM's slowdown beside copies and reductions."""
    from t3.measure.runner import MeasureOptions, check_options, print_summary, run_measure

    opts = MeasureOptions(out, overwrite, device, hardware, only, quick, allow_cpu, budget, tag, blocks)
    check_options(opts)  # then the folder is created by every command's rule, before the device opens
    check_output_dir(out, "--out")
    log = sys.stderr if as_json else sys.stdout
    summary = run_measure(opts, log)
    if as_json:
        print(json.dumps(summary, indent=1))
    else:
        print_summary(summary, log)
    if not summary["rows"]:
        # (one line naming why, on stderr: the files stay, with the run's notes and settings)
        print(
            f"error: no row was measured within the budget and suites asked for; see {out}", file=sys.stderr
        )
        raise typer.Exit(1)
