"""Profiles of real runs: import a PyTorch profiler trace into the project's own objects
(:mod:`t3.traces.schema`), pair GEMMs with their collectives, and project what overlap would save.

Only :mod:`t3.traces.kineto` knows the file format; only :mod:`t3.traces.predict` calls the simulator.
"""

from __future__ import annotations

from pathlib import Path

from t3.traces.schema import ImportedTrace, Pair, TraceCollective, TraceError, TraceGemm


def import_trace(path: str | Path, model=None) -> ImportedTrace:
    """One rank's trace with its GEMM / collective pairs (``model``: a ModelSpec or name/path, to label
    the pairs with its TP sublayers)."""
    from t3.traces.kineto import load
    from t3.traces.pairing import pair_trace

    if isinstance(model, str | Path):
        from t3.workload import get_model

        model = get_model(model)
    return pair_trace(load(path), model)


__all__ = ["ImportedTrace", "Pair", "TraceCollective", "TraceError", "TraceGemm", "import_trace"]
