"""A run of ``t3 measure``: options checked before any work, the suites in order, rows and raw samples
written as they come, a summary at the end.

``DIR/measured.toml`` gets one ``[[row]]`` per measurement the moment it is taken; ``DIR/run.json`` (the
raw samples in seconds, the environment, the plan, notes) is rewritten after each. A measurement that
fails or cannot be made here (no Triton, no FP8) is a printed note and the run goes on.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import gc
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from .backend import Backend, Unavailable, make_backend
from .compat import GPU_PRESETS, ConfigError, command_line, preset_names
from .plan import Plan, plan_for
from .rows import RowContext, RowWriter

SUITES = ("gemm", "hbm", "latency", "interference")
DEVICES = ("auto", "cuda", "cpu")
ROWS_FILE, RAW_FILE = "measured.toml", "run.json"


@dataclasses.dataclass
class MeasureOptions:
    out: Path
    overwrite: bool = False
    device: str = "auto"
    hardware: str | None = None
    only: str | None = None
    quick: bool = False
    allow_cpu: bool = False
    budget_s: float | None = None
    tag: str | None = None
    blocks: str | None = None  # "1,2,4": the thread-block counts of the k-block copies (HBM, interference)


def parse_blocks(blocks: str | None) -> tuple[int, ...] | None:
    """``--blocks 1,2,4,132``: the k of the copies and reductions on k thread blocks, instead of the
    plan's (each at least 1; counts above the GPU's CUs are taken as one block per CU)."""
    if blocks is None:
        return None
    out = []
    for part in blocks.split(","):
        part = part.strip()
        if not part.isdigit() or int(part) < 1:
            raise ConfigError(
                f"--blocks: '{part}' is not a whole number of thread blocks >= 1 (e.g. --blocks 1,2,4,8)"
            )
        if int(part) in out:
            raise ConfigError(f"--blocks: {int(part)} is given twice (each count once)")
        out.append(int(part))
    return tuple(sorted(out))


def parse_only(only: str | None) -> list[str]:
    """``--only gemm,hbm`` -> the suites, in the kit's order."""
    if only is None:
        return list(SUITES)
    want = [s.strip() for s in only.split(",") if s.strip()]
    if not want:
        raise ConfigError(f"--only: no suite named (available: {', '.join(SUITES)})")
    for i, s in enumerate(want):
        if s not in SUITES:
            raise ConfigError(f"--only: unknown suite '{s}' (available: {', '.join(SUITES)})")
        if s in want[:i]:
            raise ConfigError(f"--only: suite '{s}' is named twice (each suite once)")
    return [s for s in SUITES if s in want]


def check_options(o: MeasureOptions) -> list[str]:
    """Every check that needs no device, before any work; returns the suites to run."""
    suites = parse_only(o.only)
    if parse_blocks(o.blocks) is not None and not {"hbm", "interference"} & set(suites):
        raise ConfigError(
            f"--blocks: the k-block copies are measured by the hbm and interference suites; --only {o.only}"
            " runs neither (add one, or leave --blocks out)"
        )
    if o.device not in DEVICES:
        raise ConfigError(f"--device: unknown device '{o.device}' (available: {', '.join(DEVICES)})")
    if o.budget_s is not None and not (math.isfinite(o.budget_s) and o.budget_s > 0):
        raise ConfigError(f"--budget: must be a finite number > 0 seconds, got {o.budget_s}")
    if o.device == "cpu" and not o.allow_cpu:
        raise ConfigError(
            "--device cpu: a CPU run measures the kit's plumbing, not a GPU (its rows are marked as CPU rows);"
            " pass --allow-cpu to write them anyway"
        )
    if o.device == "cpu" and o.hardware is None:
        raise ConfigError(
            "--hardware: a CPU run needs the preset its rows are filed under, e.g. --hardware h100-8"
        )
    if o.hardware is not None:
        check_preset(o.hardware)
    if o.tag is not None and not o.tag.replace("-", "").replace("_", "").replace(".", "").isalnum():
        raise ConfigError(f"--tag: '{o.tag}' must be letters, digits, '.', '_' or '-'")
    out = Path(o.out)
    if str(o.out) == "":
        raise ConfigError("--out: empty path")
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out: '{out}' exists and is not a directory")
    if out.is_dir() and any(out.iterdir()) and not o.overwrite:
        raise ConfigError(
            f"--out: directory '{out}' is not empty (pass --overwrite to replace {ROWS_FILE} and {RAW_FILE} in it)"
        )
    return suites


def check_preset(name: str) -> None:
    names = preset_names()
    if names is not None and name not in names:
        raise ConfigError(f"--hardware: unknown preset '{name}' (available: {', '.join(names)})")


def guess_hardware(gpu: str) -> str:
    """The preset a GPU's name corresponds to (H100 -> h100-8, H200 -> h200-8, MI300X -> mi300x-8)."""
    up = gpu.upper()
    for key, preset in GPU_PRESETS:
        if key in up:
            return preset
    known = ", ".join(f"{k} -> {p}" for k, p in GPU_PRESETS)
    raise ConfigError(
        f"--hardware: cannot tell which preset the GPU '{gpu}' corresponds to ({known}); pass --hardware PRESET"
    )


class Session:
    """One run: the backend, the plan, the row context and writer, the raw record, notes and budget."""

    def __init__(self, bk: Backend, plan: Plan, ctx: RowContext, out: Path, suites: list[str],
                 budget_s: float | None, log: TextIO) -> None:  # fmt: skip
        self.bk, self.plan, self.ctx, self.out, self.log = bk, plan, ctx, out, log
        self.budget_s = budget_s
        self.t0 = time.perf_counter()
        self.cache: dict[Any, Any] = {}
        self.notes: list[str] = list(bk.notes)
        self.failed = 0
        self._budget_noted: set[str] = set()
        env = ctx.device
        header = (
            f"Rows measured by `t3 measure` on {env['gpu']} ({env.get('date', '')}).\n"
            f"Command: {env['command']}\n"
            "Format: docs/measure.md; load with t3.validation.load_dataset([path]) or `t3 validate --data PATH`."
        )
        self.writer = RowWriter(out / ROWS_FILE, header)
        self.raw: dict[str, Any] = {
            "kit": "t3 measure", "command": env["command"], "environment": env, "facts": bk.facts(),
            "plan": dataclasses.asdict(plan), "suites": suites, "tag": ctx.tag, "hardware": ctx.hardware,
            "units": "seconds (samples), bytes", "notes": self.notes, "measurements": [], "complete": False,
        }  # fmt: skip
        self._dump()

    # ---- what suites call ---------------------------------------------------------------------------
    def progress(self, msg: str) -> None:
        print(f"[{time.perf_counter() - self.t0:7.1f} s] {msg}", file=self.log, flush=True)

    def note(self, msg: str) -> None:
        self.notes.append(msg)
        self.progress(f"note: {msg}")

    def skip(self, suite: str, label: str, why: str) -> None:
        self.note(f"{suite}: {label} skipped: {why}")

    @contextlib.contextmanager
    def measuring(self, suite: str, label: str):
        """Runs one measurement; a failure becomes a note and the run goes on."""
        try:
            yield
        except Unavailable as err:
            self.skip(suite, label, str(err))
        except Exception as err:  # noqa: BLE001 - one failed measurement never ends the run
            self.failed += 1
            self.note(f"{suite}: {label} failed: {type(err).__name__}: {' '.join(str(err).split())[:300]}")
            self.release()

    def emit(self, row: dict[str, Any], raw: dict[str, Any]) -> None:
        self.writer.write(row)
        self.raw["measurements"].append({"id": row["id"], "category": row["category"], "measured": row["measured"],
                                         "unit": row["unit"], **raw})  # fmt: skip
        self._dump()

    def over_budget(self, suite: str) -> bool:
        if self.budget_s is None or time.perf_counter() - self.t0 < self.budget_s:
            return False
        if suite not in self._budget_noted:
            self._budget_noted.add(suite)
            self.note(f"budget of {self.budget_s:.3g} s spent: the rest of '{suite}' skipped")
        return True

    def release(self) -> None:
        gc.collect()
        if self.bk.kind != "cpu":
            try:
                self.bk.torch.cuda.empty_cache()
            except RuntimeError as err:  # a failed kernel left the context unusable: say so, go on
                self.notes.append(f"releasing GPU memory failed: {' '.join(str(err).split())[:200]}")

    # ---- record -------------------------------------------------------------------------------------
    def _dump(self, indent: int | None = None) -> None:
        self.raw["elapsed_s"] = time.perf_counter() - self.t0
        tmp = self.out / (RAW_FILE + ".tmp")
        tmp.write_text(json.dumps(self.raw, indent=indent, default=str))
        os.replace(tmp, self.out / RAW_FILE)

    def finish(self) -> dict[str, Any]:
        self.raw["complete"] = True
        self._dump(indent=1)
        counts: dict[str, int] = {}
        for r in self.writer.rows:
            counts[r["category"]] = counts.get(r["category"], 0) + 1
        return {
            "rows": len(self.writer.rows), "by_category": counts, "rows_file": str(self.out / ROWS_FILE),
            "raw_file": str(self.out / RAW_FILE), "elapsed_s": round(time.perf_counter() - self.t0, 3),
            "notes": list(self.notes), "failed": self.failed, "gpu": self.ctx.device["gpu"],
            "hardware": self.ctx.hardware,
        }  # fmt: skip


def run_measure(o: MeasureOptions, log: TextIO | None = None) -> dict[str, Any]:
    """Check the options, open the device, run the suites; returns the summary (rows, files, notes)."""
    log = log or sys.stdout
    suites = check_options(o)
    bk = make_backend(o.device)
    cpu = bk.kind == "cpu"
    hardware = o.hardware or guess_hardware(bk.name)
    out = Path(o.out)
    out.mkdir(parents=True, exist_ok=True)
    for f in (ROWS_FILE, RAW_FILE):
        (out / f).unlink(missing_ok=True)
    env = bk.environment()
    env["command"] = command_line()
    stamp = _dt.datetime.now(_dt.UTC).strftime("%Y%m%d-%H%M%S")
    tag = o.tag or f"{hardware}-{'cpu-' if cpu else ''}{stamp}"
    ctx = RowContext(tag, hardware, env, f"t3 measure run {env['date']}", cpu=cpu)
    plan = plan_for(bk.kind, o.quick)
    blocks = parse_blocks(o.blocks)
    if blocks is not None:
        held = tuple(k for k in plan.reduce_blocks if k == 0 or k in blocks)
        plan = dataclasses.replace(plan, name=f"{plan.name}, --blocks {','.join(map(str, blocks))}",
                                   block_counts=blocks, copy_blocks=blocks, reduce_blocks=held)  # fmt: skip
    s = Session(bk, plan, ctx, out, suites, o.budget_s, log)
    s.progress(
        f"t3 measure on {env['gpu']} ({bk.kind}, {bk.cus} CUs, L2 {bk.l2_bytes / 2**20:.0f} MiB), driver"
        f" {env['driver']}, {env['runtime']}, torch {env['torch']}; rows filed under '{hardware}'; plan"
        f" '{plan.name}'; suites: {', '.join(suites)}"
        + (f"; budget {o.budget_s:.3g} s" if o.budget_s else "")
    )
    from . import interference
    from . import suites as single

    run_suite = {"gemm": single.gemm, "hbm": single.hbm, "latency": single.latency,
                 "interference": interference.interference}  # fmt: skip
    for name in suites:
        if s.over_budget(name):
            continue
        with s.measuring(name, "suite"):
            run_suite[name](s)
    return s.finish()


def print_summary(summary: dict[str, Any], log: TextIO) -> None:
    cats = ", ".join(f"{n} {c}" for c, n in summary["by_category"].items()) or "none"
    print(f"wrote {summary['rows']} rows ({cats}) to {summary['rows_file']}", file=log)
    print(f"wrote the raw samples (seconds) and the environment to {summary['raw_file']}", file=log)
    print(f"{summary['elapsed_s']:.1f} s in all; {len(summary['notes'])} notes, {summary['failed']} failed measurements",
          file=log)  # fmt: skip
