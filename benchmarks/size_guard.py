"""Calibration of the size guard (:mod:`t3.size`): CPU time and memory per estimated op, per entry point.

Each point runs in a child process of its own; the child reports the CPU seconds of the work alone
(``time.process_time`` around it, plus any worker processes it waited for: ``RUSAGE_CHILDREN``), not
wall time (the machine may be shared), and its peak resident memory (``ru_maxrss``) before and after
the work. The table gives the estimated ops of the guard's formula, the CPU seconds, the peak RSS, and
per 1e6 estimated ops (simulated ops + GEMM waves planned: ``Work.cost``): seconds and GB (of the memory the work added to the process). Several sizes of
one kind check that the cost grows linearly with the estimate (the per-op columns stay flat).

    python benchmarks/size_guard.py            # every point (a few minutes)
    python benchmarks/size_guard.py --quick    # the smallest size of each kind

The guard promises what ``t3.size.PROMISE`` says (``--help`` texts, ``docs/architecture.md``); the last
lines say whether every row holds it within 2x.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time

TRACE = "tests/traces/data/megatron_sp_tp8_h100.constructed.pt.trace.json.gz"

# (kind, entry point, arguments): sizes of one kind grow 2x so the per-op columns show linearity
POINTS = [
    ("run sequential", "run", {"config": "sequential", "tokens": 1_000_000}),
    ("run sequential", "run", {"config": "sequential", "tokens": 2_000_000}),
    ("run sequential", "run", {"config": "sequential", "tokens": 4_000_000}),
    ("run t3", "run", {"config": "t3", "tokens": 500_000}),
    ("run t3", "run", {"config": "t3", "tokens": 1_000_000}),
    ("run t3", "run", {"config": "t3", "tokens": 2_000_000}),
    ("run t3", "run", {"config": "t3", "tokens": 4_000_000}),
    ("run t3-mca", "run", {"config": "t3-mca", "tokens": 1_000_000}),
    ("run seq --all-gpus tp4", "run", {"config": "sequential", "tokens": 250_000, "tp": 4, "all_gpus": True}),
    ("run seq --all-gpus tp4", "run", {"config": "sequential", "tokens": 500_000, "tp": 4, "all_gpus": True}),
    ("run seq --all-gpus tp4", "run", {"config": "sequential", "tokens": 1_000_000, "tp": 4, "all_gpus": True}),
    ("run seq 1x1 tiles", "run", {"config": "sequential", "tokens": 1024, "set": {"compute.tile_m": 1, "compute.tile_n": 1}}),
    ("run seq 1x1 tiles", "run", {"config": "sequential", "tokens": 2048, "set": {"compute.tile_m": 1, "compute.tile_n": 1}}),
    ("run t3 --all-gpus tp4", "run", {"config": "t3", "tokens": 500_000, "tp": 4, "all_gpus": True}),
    ("cli t3 run --config t3", "cli", {"args": ["run", "--config", "t3", "--tokens", "1000000"]}),
    ("api.gemm h100-8", "gemm", {"m": 1_000_000, "n": 8192, "k": 8192}),
    ("api.gemm h100-8", "gemm", {"m": 2_000_000, "n": 8192, "k": 8192}),
    ("api.gemm h100-8", "gemm", {"m": 4_000_000, "n": 8192, "k": 8192}),
    ("api.collective all_reduce", "collective", {"op": "all_reduce", "nbytes": 1 << 30}),
    ("api.overlap named", "overlap", {"op": "ag-gemm", "m": 65536, "n": 8192, "k": 8192, "schedule": "bulk-g1-M-cu"}),
    ("api.overlap named", "overlap", {"op": "ag-gemm", "m": 1048576, "n": 8192, "k": 8192, "schedule": "ficco-g8-M-cu"}),
    ("api.overlap named", "overlap", {"op": "ag-gemm", "m": 2097152, "n": 8192, "k": 8192, "schedule": "ficco-g8-M-cu"}),
    ("api.overlap best", "overlap", {"op": "ag-gemm", "m": 8192, "n": 8192, "k": 8192, "schedule": "best"}),
    ("api.overlap best", "overlap", {"op": "ag-gemm", "m": 16384, "n": 8192, "k": 8192, "schedule": "best"}),
    ("api.overlap best", "overlap", {"op": "ag-gemm", "m": 32768, "n": 8192, "k": 8192, "schedule": "best"}),
    ("cli t3 ficco explore", "cli", {"args": ["ficco", "explore", "--op", "gemm-rs", "--m", "16384", "--n", "8192", "--k", "8192"]}),
    ("cli t3 trace project", "cli", {"args": ["trace", "project", TRACE, "--ficco", "explore"]}),
]  # fmt: skip


def estimate(entry: str, kw: dict) -> float:
    """The guard's estimate of a point (what the entry point checks before running it)."""
    from t3 import size
    from t3.config.hardware import load_hardware

    if entry == "run":
        from t3.api import resolve

        op, hw, _ = resolve(
            "t-nlg", kw.get("tp", 8), "fc2", kw["config"], "paper-80cu", kw["tokens"], kw.get("set")
        )
        return size.run_work(op, hw, kw["config"], not kw.get("all_gpus", False)).cost
    if entry == "gemm":
        return size.gemm_work(kw["m"], kw["n"], kw["k"], "bf16", load_hardware("h100-8")).cost
    if entry == "collective":
        return 100.0  # tens of ops whatever the size (size.validation_work counts it so)
    if entry == "overlap":
        from t3.ficco.space import FiccoOperator

        fop = FiccoOperator(kw["op"], kw["m"], kw["n"], kw["k"], 8, "bf16")
        return size.overlap_work(fop, load_hardware("h100-8"), kw["schedule"]).cost
    args = kw["args"]
    if args[0] == "run":  # the configuration and its Sequential baseline
        from t3.api import resolve

        tok = int(args[args.index("--tokens") + 1])
        cfg = args[args.index("--config") + 1]
        op, hw, _ = resolve("t-nlg", 8, "fc2", cfg, "paper-80cu", tok)
        return size.run_work(op, hw, cfg).cost + size.run_work(op, hw, "sequential").cost
    if args[0] == "ficco":
        from t3.ficco.space import FiccoOperator

        v = {a: int(args[args.index(f"--{a}") + 1]) for a in ("m", "n", "k")}
        fop = FiccoOperator(args[args.index("--op") + 1], v["m"], v["n"], v["k"], 8, "bf16")
        return size.explore_work(fop, load_hardware("h100-8")).cost
    from t3.cli.trace import _import

    return size.trace_work(_import(TRACE, None), load_hardware("h100-8"), "explore").cost


def work(entry: str, kw: dict) -> None:
    from t3 import api

    if entry == "run":
        from t3.schedules import RunOptions

        api.run(tp=kw.get("tp", 8), config=kw["config"], tokens=kw["tokens"], force=True,
                hw_overrides=kw.get("set"), options=RunOptions(symmetric=not kw.get("all_gpus", False)))  # fmt: skip
    elif entry == "gemm":
        api.gemm(kw["m"], kw["n"], kw["k"], force=True)
    elif entry == "collective":
        api.collective(kw["op"], kw["nbytes"], force=True)
    elif entry == "overlap":
        api.overlap(kw["op"], kw["m"], kw["n"], kw["k"], schedule=kw["schedule"], force=True)
    else:
        import contextlib
        import io
        import tempfile

        from t3.cli.main import _register, app

        _register()

        args = list(kw["args"]) + ["--force"]
        with tempfile.TemporaryDirectory() as d, contextlib.redirect_stdout(io.StringIO()):
            if args[0] == "trace":
                args += ["--out", d]
            try:
                app(args, standalone_mode=False)
            except SystemExit as e:
                if e.code:
                    raise


def child(spec: str) -> None:
    """One point, in this process: warm the imports, then measure the work alone."""
    import warnings

    warnings.simplefilter("ignore")
    entry, kw = json.loads(spec)
    est = estimate(entry, kw)  # imports everything the entry point needs
    base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    c0 = time.process_time()
    ch0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    work(entry, kw)
    ch1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = time.process_time() - c0 + (ch1.ru_utime + ch1.ru_stime) - (ch0.ru_utime + ch0.ru_stime)
    peak = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, ch1.ru_maxrss) * 1024
    print(json.dumps({"est": est, "cpu_s": cpu, "base_B": base_rss, "peak_B": peak}))


def main(argv: list[str]) -> int:
    if argv[:1] == ["--child"]:
        child(argv[1])
        return 0
    from t3.size import PROMISE_GB, PROMISE_S

    points = POINTS
    if "--quick" in argv:
        seen: set[str] = set()
        points = [p for p in POINTS if not (p[0] in seen or seen.add(p[0]))]
    hdr = (f"{'point':28} {'args':44} {'est. ops':>10} {'CPU s':>8} {'peak RSS MB':>11} {'added MB':>9} "
           f"{'s per 1e6 ops':>13} {'GB per 1e6 ops':>14}")  # fmt: skip
    print(hdr)
    print("-" * len(hdr))
    worst = []
    for name, entry, kw in points:
        out = subprocess.run(
            [sys.executable, __file__, "--child", json.dumps([entry, kw])], capture_output=True, text=True
        )
        if out.returncode:
            print(f"{name:28} failed: {out.stderr.strip().splitlines()[-1]}")
            continue
        r = json.loads(out.stdout.strip().splitlines()[-1])
        added = max(0, r["peak_B"] - r["base_B"])
        s_per = r["cpu_s"] / r["est"] * 1e6
        gb_per = added / r["est"] * 1e6 / 1e9
        args = " ".join(kw["args"][:6]) if "args" in kw else ", ".join(f"{k}={v}" for k, v in kw.items())
        print(f"{name:28} {args[:44]:44} {r['est']:>10.0f} {r['cpu_s']:>8.2f} {r['peak_B'] / 1e6:>11.0f} "
              f"{added / 1e6:>9.0f} {s_per:>13.1f} {gb_per:>14.2f}", flush=True)  # fmt: skip
        if r["est"] >= 10_000:  # small points are dominated by fixed costs, not per-op ones
            worst.append((name, s_per / PROMISE_S, gb_per / PROMISE_GB))
    print(f"promise: about {PROMISE_S:.0f} s and {PROMISE_GB:g} GB per 1e6 estimated ops (t3.size.PROMISE)")
    if worst:
        t = max(worst, key=lambda w: max(w[1], 1 / w[1]))
        m = max(worst, key=lambda w: w[2])
        print(f"time: measured / promised per op spans {min(w[1] for w in worst):.2f}x to "
              f"{max(w[1] for w in worst):.2f}x (furthest: {t[0]}); memory: at most {m[2]:.2f}x the "
              f"promised GB per op ({m[0]}); points of >= 1e4 estimated ops")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
