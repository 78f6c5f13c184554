"""Speed beside the analytical peers: configurations per CPU-second on a first sweep of new
configurations, t3 (Sequential and T3-MCA) against Calculon and GenZ, on the same transformer-layer
configurations.

Run: python benchmarks/bench_peers.py [--calculon DIR] [--genz-python PYTHON] [--repeat N] [--quick]

Every tool sweeps the same grid once in a fresh process (a *first* sweep: nothing memoised from an
earlier configuration of the sweep helps a new one beyond what the tool itself keeps), timed with the
child's own CPU clock around the sweep (imports left out); the tools run in turn, A B C A B C ..., and
the table gives the median configurations per CPU-second and t3's ratio to Calculon's. Not a test:
no assertion on time.

The configurations: GPT-3 175B (96 heads, hidden 12288), one transformer layer's forward pass, tensor
parallel 2 to 32, over 512 to 65,536 tokens (40 configurations). Each tool is asked
what its public entry point answers for one layer:
- t3: one sublayer simulation (``t3.schedules`` FC-2: GEMM + reduce-scatter / all-gather, every
  tile wave and collective step simulated) on ``paper-80cu``, Sequential and T3-MCA, each twice: in a
  process as a library caller's runs by default, and (``*``) in one with the cyclic collector's
  thresholds the ``t3`` command sets for itself and its workers (:mod:`t3._gc`), as ``t3 sweep`` runs;
- Calculon (https://github.com/calculon-ai/calculon, not on PyPI: ``--calculon`` points at a
  checkout): ``Llm.compile`` + ``Llm.run`` of its ``models/gpt3-175B.json`` with one block,
  inference, TP as given, on its ``systems/h100_80g_nvl8.json`` (its HBM capacity raised so that
  no configuration is refused for memory, its first network sized to the TP domain);
- GenZ (``pip install genz-llm``, 0.0.16; heavy dependencies, so it may live in another environment:
  ``--genz-python``): ``prefill_moddeling`` of its ``gpt-3`` config with one decoder layer on
  ``H100_GPU``.
A tool that is not installed is reported as such. The tools model different things at different
detail (t3 simulates every wave and step; the peers evaluate closed forms per operator): the table
compares what a user waits for, not what they get.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import textwrap

TP = (2, 4, 8, 16, 32)  # (whole ring nodes of paper-80cu; divide the 96 heads)
TOKENS = (512, 1024, 2048, 4096, 8192, 16384, 32768, 65536)

T3_CHILD = """
import json, sys, time
if sys.argv[3:] == ["command"]:  # the collector's thresholds the t3 command sets (t3._gc), before any work
    from t3._gc import tune
    tune()
from t3.config.hardware import load_hardware
from t3.schedules import RunOptions, get_config
from t3.workload import get_model, sublayer_operator
cfg, grid = sys.argv[1], json.loads(sys.argv[2])
hw, model, spec, opts = load_hardware("paper-80cu"), get_model("gpt-3"), get_config(cfg), RunOptions()
t0 = time.process_time()
for tp, tokens in grid:
    spec.run(sublayer_operator(model, "fc2", tp, tokens), hw, opts)
print(json.dumps({"cpu_s": time.process_time() - t0, "n": len(grid)}))
"""

CALCULON_CHILD = """
import json, logging, sys, time
sys.path.insert(0, sys.argv[1])
from calculon import System
from calculon.llm import Llm
root, grid = sys.argv[1], json.loads(sys.argv[2])
app_json = json.load(open(root + "/models/gpt3-175B.json"))
app_json["num_blocks"] = 1
sys_json = json.load(open(root + "/systems/h100_80g_nvl8.json"))
sys_json["mem1"]["GiB"] = 1 << 20  # (speed only: no configuration refused for its memory
base = json.load(open(root + "/examples/3072_t4_p64_d12_mbs4_full.json"))
log = logging.getLogger("calculon")
t0 = time.process_time()
for tp, tokens in grid:
    app = Llm.Application(dict(app_json, seq_size=tokens))
    exe = Llm.Execution.from_json(dict(
        base, num_procs=tp, tensor_par=tp, pipeline_par=1, data_par=1, tensor_par_net=0, pipeline_par_net=0,
        data_par_net=0, batch_size=1, microbatch_size=1, training=False, activation_recompute="none",
        optimizer_sharding=False, pipeline_interleaving=1))
    sys_json["networks"][0]["size"] = tp  # (its first network must be filled: one TP domain)
    syst = System(sys_json)
    model = Llm(app, log)
    model.compile(syst, exe)
    model.run(syst)
print(json.dumps({"cpu_s": time.process_time() - t0, "n": len(grid)}))
"""

GENZ_CHILD = """
import copy, json, sys, time, warnings
warnings.filterwarnings("ignore")
from GenZ import prefill_moddeling
from GenZ.Models import get_configs
grid = json.loads(sys.argv[1])
cfg = copy.deepcopy(get_configs("gpt-3"))
cfg.num_decoder_layers = 1
t0 = time.process_time()
for tp, tokens in grid:
    prefill_moddeling(model=cfg, batch_size=1, input_tokens=tokens, system_name="H100_GPU", bits="bf16",
                      tensor_parallel=tp)
print(json.dumps({"cpu_s": time.process_time() - t0, "n": len(grid)}))
"""


def _child(cmd: list[str]) -> dict | str:
    """The child's report, or why it did not give one (its last line of error)."""
    p = subprocess.run(cmd, capture_output=True, text=True, env=os.environ.copy())
    for line in reversed(p.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    err = (p.stderr.strip().splitlines() or ["no output"])[-1]
    return err[:100]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calculon", help="a checkout of https://github.com/calculon-ai/calculon")
    ap.add_argument("--genz-python", default=sys.executable, help="a Python with genz-llm installed")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="TP 8 only (8 configurations)")
    a = ap.parse_args()
    grid = [(tp, t) for tp in ((8,) if a.quick else TP) for t in TOKENS]
    g = json.dumps(grid)
    tools = {
        "t3 sequential": [sys.executable, "-c", T3_CHILD, "sequential", g],
        "t3 t3-mca": [sys.executable, "-c", T3_CHILD, "t3-mca", g],
        "t3 sequential *": [sys.executable, "-c", T3_CHILD, "sequential", g, "command"],
        "t3 t3-mca *": [sys.executable, "-c", T3_CHILD, "t3-mca", g, "command"],
        "Calculon": [sys.executable, "-c", CALCULON_CHILD, a.calculon or "", g] if a.calculon else None,
        "GenZ": [a.genz_python, "-c", GENZ_CHILD, g],
    }
    rates: dict[str, list[float]] = {k: [] for k in tools}
    why: dict[str, str] = {}
    if tools["Calculon"] is None:
        why["Calculon"] = "not run: give --calculon DIR (a checkout; not on PyPI)"
    for _ in range(a.repeat):
        for name, cmd in tools.items():
            if cmd is None or name in why:
                continue
            out = _child(cmd)
            if isinstance(out, str):
                missing = "No module named 'GenZ'" in out
                why[name] = (
                    "not installed: pip install -e '.[peers]', or --genz-python"
                    if missing
                    else f"failed: {out}"
                )
                continue
            rates[name].append(out["n"] / out["cpu_s"])
    print(f"{len(grid)} configurations (GPT-3 175B, one layer forward, TP {', '.join(map(str, sorted({t for t, _ in grid})))}, "
          f"{TOKENS[0]}-{TOKENS[-1]} tokens); first sweep in a fresh process, medians of {a.repeat}")  # fmt: skip
    calc = statistics.median(rates["Calculon"]) if rates["Calculon"] else None
    print(f"{'tool':16s} {'configs/CPU-s':>14s} {'min':>10s} {'max':>10s} {'x Calculon':>11s}")
    for name, rs in rates.items():
        if not rs:
            print(f"{name:16s} {why.get(name, 'no result')}")
            continue
        med = statistics.median(rs)
        ratio = f"{med / calc:10.2f}x" if calc else f"{'-':>11s}"
        print(f"{name:16s} {med:14.1f} {min(rs):10.1f} {max(rs):10.1f} {ratio}")
    print(textwrap.fill("(units: configurations per CPU-second of the sweeping process; t3 simulates every "
                        "tile wave and collective step, the peers evaluate closed forms per operator; * : in "
                        "a process set as the t3 command sets its own and its workers' (t3._gc: the cyclic "
                        "collector's older generations collected a hundred times less often), as `t3 sweep` "
                        "runs; without: as a library caller's process runs by default)", 100))  # fmt: skip


if __name__ == "__main__":
    main()
