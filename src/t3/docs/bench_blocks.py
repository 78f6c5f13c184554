"""Benchmark measurements on this project's host (recorded: they take minutes and vary with the host's load).

The record is the benchmark's whole output, header included (host, load average, torch version), so
a reader sees what was measured where; it goes stale when the measured code or the benchmark changes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from t3.docs.fingerprint import MODEL_PACKAGES
from t3.docs.sources import Context, Recorded, SourceError

RUNTIME_PACKAGES = ("t3.runtime", *MODEL_PACKAGES)


def _output_record(script: str, args: tuple[str, ...]):
    def make(ctx: Context, given: Path | None) -> dict[str, Any]:
        if given is None:
            text = ctx.script_output(script, args)
        elif not given.is_file():
            raise SourceError(f"no file {given} (the output of {script})")
        else:
            text = given.read_text().strip("\n")
        if not text.strip():
            raise SourceError(f"{script} printed nothing")
        return {"command": f"PYTHONPATH=src python3 {script} {' '.join(args)}".strip(), "output": text}

    return make


RUNTIME_BENCH = Recorded(
    name="runtime-bench",
    command="PYTHONPATH=src python3 benchmarks/bench_runtime.py --reps 15",
    entries=("benchmarks/bench_runtime.py", "benchmarks/_predict.py", "t3.runtime"),
    data_files=("src/t3/config/presets/cpu-local.toml",),
    make=_output_record("benchmarks/bench_runtime.py", ("--reps", "15")),
    packages=RUNTIME_PACKAGES,
)
HANDSHAKE_BENCH = Recorded(
    name="handshake-bench",
    command="PYTHONPATH=src python3 benchmarks/bench_handshake.py --batches 25",
    entries=("benchmarks/bench_handshake.py", "t3.runtime"),
    data_files=(),
    make=_output_record("benchmarks/bench_handshake.py", ("--batches", "25")),
    packages=RUNTIME_PACKAGES,
)


def _output_block(spec: Recorded):
    def render(ctx: Context) -> str:
        d = ctx.record(spec)
        return f"`{d['command']}`:\n\n```text\n{d['output']}\n```"

    return render


runtime_bench = _output_block(RUNTIME_BENCH)
handshake_bench = _output_block(HANDSHAKE_BENCH)
SWEEP_BENCH = Recorded(
    name="sweep-bench",
    command="PYTHONPATH=src python3 benchmarks/bench_sweep.py",
    entries=("benchmarks/bench_sweep.py", "t3.experiments.sweep.run", "t3.experiments.sweep.executors"),
    data_files=("src/t3/config/presets/paper-80cu.toml",),
    make=_output_record("benchmarks/bench_sweep.py", ()),
    packages=("t3.experiments.sweep", *MODEL_PACKAGES),
)
sweep_bench = _output_block(SWEEP_BENCH)
