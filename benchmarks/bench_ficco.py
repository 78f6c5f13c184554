"""FiCCO speed: `select` latency (a reduced model of the engine, no schedule simulated) and `explore` wall
time per operator.

Run: PYTHONPATH=src python3 benchmarks/bench_ficco.py [--repeat N] [--quick] [--reproduce [--against-python]]
     [--phases K]
Prints a table (medians over N repeats; ``--quick``: the first operator on one preset). ``--reproduce``
also times the whole ``python3 -m t3 reproduce ficco`` (N runs in a fresh process each, default worker
count) and prints its median wall time, the size of the JSON and Parquet it writes and a digest of the
results; ``--against-python`` times it with ``T3_ENGINE=python`` too (pure Python: every module from
source, the Python engine loop), the runs interleaved, and prints the ratio. ``--phases K``
runs every K-th case of the reproduction in this process, one after the other, and prints where its CPU
time goes (building schedules, simulating them, the static selectors, the rest) and by kind of case.
Not a test: no assertion on time.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from t3.config.hardware import load_hardware
from t3.ficco.learned import select_shipped as select
from t3.ficco.losses import explore
from t3.ficco.space import FiccoOperator

CASES = [
    FiccoOperator("ag-gemm", 8192, 3584, 4096, label="llama3-8b FC-1"),
    FiccoOperator("gemm-rs", 8192, 4096, 1792, label="llama3-8b FC-2"),
    FiccoOperator("moe", 8192, 14336, 4096, label="mixtral prefill, uniform"),
    FiccoOperator("moe", 8192, 14336, 4096, skew=0.5, label="mixtral prefill, skew 0.5 (all GPUs)"),
]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="the first operator on mi300x-8 only")
    ap.add_argument("--reproduce", action="store_true", help="also time `t3 reproduce ficco` end to end")
    ap.add_argument(
        "--against-python",
        action="store_true",
        help="with --reproduce: also time it with T3_ENGINE=python (pure Python), runs interleaved",
    )
    ap.add_argument(
        "--phases", type=int, metavar="K", help="CPU time by phase of every K-th reproduction case"
    )
    a = ap.parse_args()
    if a.repeat < 1:
        ap.error("--repeat must be at least 1")
    if a.against_python and not a.reproduce:
        ap.error("--against-python times `t3 reproduce ficco`: give --reproduce too")
    if a.phases is not None:
        if a.phases < 1:
            ap.error("--phases must be at least 1")
        phases(a.phases)
        return
    print(f"{'operator':40s} {'hw':9s} {'select (ms)':>12s} {'explore (s)':>12s} {'schedules':>10s}")
    for hwn in ("mi300x-8",) if a.quick else ("mi300x-8", "h100-8"):
        hw = load_hardware(hwn)
        for f in CASES[:1] if a.quick else CASES:
            sel = []
            for _ in range(max(a.repeat, 5)):
                t0 = time.perf_counter()
                select(f, hw)
                sel.append(time.perf_counter() - t0)
            exs = []
            n = 0
            for _ in range(a.repeat if not f.skew else 1):
                t0 = time.perf_counter()
                n = len(explore(f, hw).evaluations)
                exs.append(time.perf_counter() - t0)
            print(
                f"{f.label:40s} {hwn:9s} {1e3 * statistics.median(sel):12.3f} {statistics.median(exs):12.2f} {n:10d}"
            )
    if a.reproduce:
        reproduce(a.repeat, a.against_python)


def reproduce(repeat: int, against_python: bool) -> None:
    """Median wall time of ``t3 reproduce ficco`` over ``repeat`` runs, its output sizes and a digest of its
    results (``ficco.json`` without its provenance, the Parquet table without its metadata). With
    ``against_python`` the same command with ``T3_ENGINE=python`` (every module from source, the Python
    engine loop) runs between them, one after the other, and the ratio of the medians is printed."""
    src = str(Path(__file__).resolve().parents[1] / "src")
    builds = {"as installed": dict(os.environ, PYTHONPATH=src)}
    builds["as installed"].pop("T3_ENGINE", None)
    if against_python:
        builds["T3_ENGINE=python"] = dict(os.environ, PYTHONPATH=src, T3_ENGINE="python")
    walls: dict[str, list[float]] = {b: [] for b in builds}
    sizes: dict[str, dict[str, int]] = {}
    digests: dict[str, set[str]] = {b: set() for b in builds}
    for _ in range(repeat):
        for b, env in builds.items():
            with tempfile.TemporaryDirectory() as tmp:
                t0 = time.perf_counter()
                subprocess.run([sys.executable, "-m", "t3", "reproduce", "ficco", "--out", tmp], env=env,
                               check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
                walls[b].append(time.perf_counter() - t0)
                out = Path(tmp)
                sizes[b] = {
                    f.name: f.stat().st_size for f in out.iterdir() if f.suffix in (".json", ".parquet")
                }
                digests[b].add(results_digest(out))
    print()
    print(
        f"{'t3 reproduce ficco':20s} {'runs':>5s} {'wall median (s)':>16s} {'wall min (s)':>13s} "
        f"{'outputs (MB)':>30s} {'results digest':>16s}"
    )
    for b in builds:
        out = ", ".join(f"{k} {v / 1e6:.2f}" for k, v in sorted(sizes[b].items()))
        dig = next(iter(digests[b])) if len(digests[b]) == 1 else "DIFFER"
        print(
            f"{b:20s} {repeat:5d} {statistics.median(walls[b]):16.1f} {min(walls[b]):13.1f} {out:>30s} {dig:>16s}"
        )
    if against_python:
        ratio = statistics.median(walls["T3_ENGINE=python"]) / statistics.median(walls["as installed"])
        same = "the same" if len(digests["as installed"] | digests["T3_ENGINE=python"]) == 1 else "DIFFERENT"
        print(f"T3_ENGINE=python / as installed: {ratio:.2f}x wall (medians); results {same}")


def results_digest(out: Path) -> str:
    """sha256 (first 12 hex digits) of the results of one reproduction in ``out``: ``ficco.json`` less its
    provenance (which names the commit and engine), and the Parquet table's columns less the file's metadata."""
    import hashlib
    import json

    import pyarrow.parquet as pq

    res = json.loads((out / "ficco.json").read_text())
    res.pop("provenance", None)
    h = hashlib.sha256(json.dumps(res, sort_keys=True).encode())
    for f in sorted(out.glob("*.parquet")):
        t = pq.read_table(f).replace_schema_metadata(None)
        h.update(f.name.encode())
        for name in t.column_names:
            h.update(name.encode())
            h.update(json.dumps(t.column(name).to_pylist(), default=str).encode())
    return h.hexdigest()[:12]


def phases(every: int) -> None:
    """CPU time (s) of every ``every``-th case of the reproduction (its task, as the pool runs it), split
    into building schedules, simulating them (the engine), the static selectors' picks and the rest
    (space enumeration, loss bookkeeping, features, GEMM plans outside the builders); then by kind."""
    import t3.ficco.losses as losses
    from t3.experiments import reproduce_ficco as rf
    from t3.sim.engine import Engine

    spent = {"build": 0.0, "engine": 0.0, "selectors": 0.0}
    count = {"build": 0, "engine": 0, "selectors": 0, "events": 0, "ops": 0}

    def timed(fn, phase):
        def run(*args, **kw):
            t0 = time.process_time()
            out = fn(*args, **kw)
            spent[phase] += time.process_time() - t0
            count[phase] += 1
            if phase == "build":
                count["ops"] += len(out.ops)
            elif phase == "engine":
                count["events"] += out.events
            return out

        return run

    for name in ("ficco_schedule", "gemm_alone_schedule", "fused_gemm_alone_schedule"):
        setattr(losses, name, timed(getattr(losses, name), "build"))
    Engine.run = timed(Engine.run, "engine")
    rf.static_picks = timed(rf.static_picks, "selectors")
    cs = rf.all_cases()[::every]
    kinds: dict[str, list[float]] = {}
    total = 0.0
    for c in cs:
        t0 = time.process_time()
        rf.run_task(("case", c))
        dt = time.process_time() - t0
        total += dt
        kind = c.fop.op + (" skewed" if c.fop.skew else "")
        kinds.setdefault(kind, []).append(dt)
    print(f"{len(cs)} cases (one in {every} of the reproduction's), one after the other: {total:.1f} s CPU")
    print(f"{'phase':12s} {'CPU (s)':>9s} {'share':>7s}  what")
    rest = total - sum(spent.values())
    what = {
        "build": f"{count['build']} schedules built ({count['ops'] / max(1, count['build']):.0f} ops each on average)",
        "engine": f"{count['engine']} simulations, {count['events']} events "
        f"({1e6 * spent['engine'] / max(1, count['events']):.1f} us each)",
        "selectors": "pipeline, learned and estimate picks",
        "rest": "enumeration, losses, features, plans",
    }
    for k, v in (*spent.items(), ("rest", rest)):
        print(f"{k:12s} {v:9.1f} {100 * v / total:6.1f} %  {what[k]}")
    print(f"{'kind':16s} {'cases':>6s} {'CPU (s)':>9s} {'share':>7s} {'per case (s)':>13s}")
    for k, v in sorted(kinds.items()):
        print(f"{k:16s} {len(v):6d} {sum(v):9.1f} {100 * sum(v) / total:6.1f} % {sum(v) / len(v):13.2f}")


if __name__ == "__main__":
    main()
