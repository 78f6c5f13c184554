"""``t3 calibrate --measured``: a preset whose single-GPU parameters are fitted to ``t3 measure`` rows."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from t3.cli.common import OUTPUT_RULE, check_output_file
from t3.cli.main import app
from t3.errors import ConfigError, T3Error
from t3.files import write_text

_MEAS = typer.Option(..., "--measured", help="a `t3 measure --out` directory (or its measured.toml)")
_BASE = typer.Option(..., "--base", help="the preset to start from (e.g. h100-8), or a preset TOML file")
_OUT = typer.Option(
    ...,
    "--out",
    help=f"the preset to write (FILE.toml; its name is the file's stem; {OUTPUT_RULE} or with --overwrite)",
)
_OVER = typer.Option(False, "--overwrite", help="replace an existing --out file of any kind")
_CPU = typer.Option(False, "--allow-cpu", help="fit rows measured on the CPU (plumbing runs, not GPU data)")
_JSON = typer.Option(
    False, "--json", help="print one JSON object (fits, skipped parameters, interference rows)"
)


def _show(v: float, f: Any) -> str:
    return f"{v / f.scale:.4g}"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x * 100:.1f} %"


def _interference(rows: list[Any], fitted: Path) -> tuple[list[dict[str, Any]], str]:
    """Interference rows beside t3 validate's predictions (base preset) and the fitted preset's (the
    file just written)."""
    sel = [r for r in rows if r.category == "interference"]
    if not sel:
        return [], ""
    from t3.validation import conventions

    if "interference" not in conventions.COMPARED_UNIT:
        return [], (f"{len(sel)} interference rows are not fitted; they are kept for validation"
                    " (t3 validate has no interference predictor yet)")  # fmt: skip
    from t3.validation.runner import Predictor

    out = []
    p = Predictor()
    for r in sel:
        d: dict[str, Any] = {"id": r.id, "workload": dict(r.workload), "measured_pct": r.measured}
        for key, row in (
            ("predicted_pct", r),
            ("predicted_fitted_pct", dataclasses.replace(r, hardware=str(fitted))),
        ):
            try:
                d[key] = p.predict(row).predicted
            except T3Error as err:
                d[key] = None
                d["not_predicted"] = " ".join(str(err).split())
        out.append(d)
    return out, (f"{len(sel)} interference rows are not fitted (kept for validation: t3 validate --data"
                 " compares them); their slowdowns beside the model's:")  # fmt: skip


@app.command()
def calibrate(
    measured: Path = _MEAS, base: str = _BASE, out: Path = _OUT, overwrite: bool = _OVER, allow_cpu: bool = _CPU,
    as_json: bool = _JSON,
) -> None:  # fmt: skip
    """Fit a preset's single-GPU parameters (GEMM efficiency and clocks, HBM efficiency and turnaround,
    per-CU copy rate, launch / stream-wait / flag latencies) to the rows of `t3 measure` and write it."""
    from t3.config.hardware import hardware_from_dict, load_hardware
    from t3.config.toml_file import parse_toml
    from t3.measure import calibrate as cb
    from t3.measure.preset import apply

    if out.suffix != ".toml":
        raise ConfigError(f"--out: expected a file name ending in .toml, got '{out}'")
    check_output_file(out, "--out", "preset", overwrite=overwrite)
    text, base_name = cb.base_text(base)
    base_hw = hardware_from_dict(parse_toml(text, f"--base '{base}'"), base_name)
    rows_file, rows = cb.load_measured(measured, allow_cpu)
    notes = []
    other = sorted({r.hardware for r in rows} - {base_hw.name})
    if other:
        notes.append(
            f"the rows are filed under {', '.join(other)}, the base is {base_hw.name}: fitted on the base anyway"
        )
    cal = cb.calibrate(rows, base_hw)
    if not cal.fits:
        raise ConfigError(
            f"--measured: no row of '{rows_file}' fits a single-GPU parameter ({'; '.join(cal.skipped)})"
        )
    gpu, date = rows[0].device.get("gpu", "?"), rows[0].device.get("date", "?")
    header = [
        f"{out.stem}: the {base_name} preset with single-GPU parameters fitted by `t3 calibrate --measured {measured}"
        f" --base {base}`",
        f"to rows measured by `t3 measure` on {gpu} ({date}); each fitted line's comment names its measurement.",
        "",
    ]
    new = apply(text, out.stem, header, cb.edits(cal, gpu, date))
    hardware_from_dict(parse_toml(new, f"--out '{out}'"), out.stem)  # valid before it is written
    write_text(out, new)
    load_hardware(out)
    intf, intf_msg = _interference(rows, out)
    if as_json:
        doc = {"base": base_name, "measured": str(rows_file), "out": str(out), "gpu": gpu, "date": date,
               "fits": [f.as_dict() for f in cal.fits], "skipped": cal.skipped, "notes": notes,
               "interference": intf, "interference_note": intf_msg}  # fmt: skip
        print(json.dumps(doc, indent=1))
        return
    c = Console(width=160)
    t = Table(
        title=f"{base_name} fitted to {len(rows)} rows of {rows_file} ({gpu}); error = predicted / measured - 1"
    )
    for col in ("parameter", "base", "fitted", "unit", "rows", "median |error| before", "after", "note"):
        t.add_column(col, justify="left" if col in ("parameter", "unit", "note") else "right")
    for f in cal.fits:
        t.add_row(f.path, _show(f.base, f), _show(f.value, f), f.unit, str(len(f.rows)), _pct(f.before),
                  _pct(f.after), f.note)  # fmt: skip
    c.print(t)
    for s in cal.skipped:
        c.print(f"not fitted: {s}")
    for n in notes:
        c.print(f"note: {n}")
    if intf_msg:
        c.print(intf_msg)
    if intf:
        it = Table()
        for col in (
            "row",
            "GEMM",
            "beside",
            "arrangement",
            "victim",
            "measured",
            "t3 validate",
            "fitted preset",
        ):
            it.add_column(
                col, justify="right" if col in ("measured", "t3 validate", "fitted preset") else "left"
            )
        for d in intf:
            w = d["workload"]
            beside = f"{w['comm']} {w['nbytes'] / 2**20:.0f} MiB" + (
                f" on {w['cus']} CUs" if w["cus"] else ""
            )
            it.add_row(d["id"], f"{w['m']}x{w['n']}x{w['k']} {w['dtype']}", beside, w["arrangement"], w["victim"],
                       f"{d['measured_pct']:+.1f} %", _pp(d["predicted_pct"]), _pp(d["predicted_fitted_pct"]))  # fmt: skip
        c.print(it)
    c.print(f"wrote {out} (loads with t3.config.hardware.load_hardware; use it as --hw {out})")


def _pp(x: float | None) -> str:
    return "not predicted" if x is None or x != x else f"{x:+.1f} %"
