"""Does compiling a module pay for itself? Its compile cost against what it saves a run.

Run (from a checkout installed with ``pip install -e .``; Cython importable, e.g. ``pip install cython``):

    python benchmarks/bench_compile.py [--repeat N] [--command "t3 reproduce t3 --workers 1"] [--only M ...]

For every module that is or could be compiled (the engine core ``t3.sim._native``,
:data:`t3._compiled.COMPILED` and :data:`t3._compiled.NOT_COMPILED`) it measures

- the CPU time (user + sys, seconds) of building that module alone, as ``pip install`` builds it:
  Cython, then the C compiler and linker, with the flags of ``setup.py`` (one process), into a scratch
  directory (what the install has built is neither used nor touched);
- the CPU time of the command with every one of these modules from its Python source (the engine's
  Python loop for the core), and with only that module compiled (the one just built); the difference
  is what compiling the module saves on one run of the command. A last row compiles them all.

CPU time, not wall time, so that a loaded machine changes the numbers less; each runtime figure is the
minimum over ``--repeat`` runs; the noise between two runs of the same case is a few per cent of the
command's CPU time, so a saving smaller than that is none. Not a test: no assertion. The default
command runs with ``--workers 1``, so that its CPU time is all in processes the script waits for; a
command that does not start with ``t3`` runs as given (``--command "python -m pytest -q tests/ficco"``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORE = "t3.sim._native"

# Builds one module as setup.py does, in a scratch directory: argv = module, source, scratch dir.
_BUILD_ONE = textwrap.dedent(
    """
    import sys
    from setuptools import Distribution, Extension
    from Cython.Build import cythonize
    name, src, tmp = sys.argv[1:4]
    if src.endswith(".pyx"):
        exts = cythonize([Extension(name, [src])], language_level=3, quiet=True, force=True,
                         build_dir=tmp)
    else:
        py = {"binding": True, "annotation_typing": False, "infer_types": False}
        exts = cythonize([Extension(name, [src])], language_level=3, quiet=True, force=True,
                         build_dir=tmp, compiler_directives=py)
    for e in exts:
        e.extra_compile_args = ["-ffp-contract=off", "-fno-fast-math"]
        e.extra_link_args = ["-ffp-contract=off", "-fno-fast-math"]
    if src.endswith(".pyx"):
        import hashlib
        from pathlib import Path
        sha = hashlib.sha256(Path(src).read_bytes()).hexdigest()[:16]
        exts[0].define_macros = [("T3_NATIVE_SOURCE", f'"{sha}"')]
    d = Distribution({"ext_modules": exts, "script_args": ["build_ext", "--build-temp", tmp + "/t",
                      "--build-lib", tmp + "/l", "--force"]})
    d.parse_command_line()
    d.run_commands()
    print(d.get_command_obj("build_ext").get_ext_fullpath(name))
    """
)

# First on sys.meta_path in every process of the command (PYTHONPATH's sitecustomize, so that pool
# workers get it too; t3._compiled's finder, put before it, only redirects a compiled module that is
# stale, and the install is fresh): T3_BENCH = {"source": [modules run from their .py; the core cannot be imported,
# so the engine runs its Python loop], "built": {module: compiled file to load}}.
_SITE = textwrap.dedent(
    """
    import importlib.abc, importlib.util, json, os, sys
    from pathlib import Path
    _bench = json.loads(os.environ.get("T3_BENCH", "{}"))
    _source, _built = set(_bench.get("source", ())), _bench.get("built", {})

    class _Bench(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name in _built:
                return importlib.util.spec_from_file_location(name, _built[name])
            if name not in _source or not path:
                return None
            if name == "t3.sim._native":
                raise ModuleNotFoundError(f"{name} left out by bench_compile.py")
            for d in path:
                src = Path(d) / (name.rpartition(".")[2] + ".py")
                if src.is_file():
                    return importlib.util.spec_from_file_location(name, src)
            return None

    if _bench:
        sys.meta_path.insert(0, _Bench())
    """
)


def _cpu_of(cmd: list[str], env: dict | None = None, cwd: Path | None = None) -> tuple[float, str]:
    """User + sys CPU seconds of ``cmd`` and every process it waited for, and its stdout."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        sys.exit(
            f"{shlex.join(cmd)} failed (exit status {p.returncode}):\n{p.stdout[-2000:]}{p.stderr[-2000:]}"
        )
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), p.stdout


def modules() -> list[tuple[str, str]]:
    """(module, source) of every module that is or could be compiled."""
    sys.path.insert(0, str(ROOT / "src"))
    from t3._compiled import COMPILED, NOT_COMPILED

    out = [(CORE, "src/t3/sim/_native.pyx")]
    out += [(m, "src/" + m.replace(".", "/") + ".py") for m in (*COMPILED, *NOT_COMPILED)]
    return out


def build(name: str, src: str, into: Path) -> tuple[float, str]:
    """Compile CPU seconds of one module, and the compiled file (under ``into``)."""
    cpu, out = _cpu_of([sys.executable, "-c", _BUILD_ONE, name, src, str(into)], cwd=ROOT)
    return cpu, out.strip().splitlines()[-1]


def run_cpu(command: list[str], source: list[str], built: dict[str, str], repeat: int, site: Path, out: bool):
    env = os.environ.copy()
    env.pop("T3_ENGINE", None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH", "")]))
    env["T3_BENCH"] = json.dumps({"source": [m for m in source if m not in built], "built": built})
    times = []
    for _ in range(repeat):
        with tempfile.TemporaryDirectory() as d:
            times.append(_cpu_of([*command, *(["--out", d] if out else [])], env=env)[0])
    return min(times), max(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=1, help="runs of the command per case (minimum kept)")
    ap.add_argument(
        "--command",
        default="t3 reproduce t3 --workers 1",
        help="the command to time; a t3 command gets an --out directory (any other runs as given)",
    )
    ap.add_argument("--only", nargs="+", metavar="MODULE", help="these modules only (default: every one)")
    a = ap.parse_args()
    every = modules()
    if a.only and (bad := sorted(set(a.only) - {m for m, _ in every})):
        ap.error(f"--only: {', '.join(bad)} is not a module that could be compiled; valid: "
                 f"{', '.join(m for m, _ in every)}")  # fmt: skip
    mods = [(m, src) for m, src in every if not a.only or m in a.only]
    t3_cmd = a.command.startswith("t3 ")
    command = [sys.executable, "-m", *shlex.split(a.command)] if t3_cmd else shlex.split(a.command)
    names = [m for m, _ in every]
    with tempfile.TemporaryDirectory() as tmp:
        site = Path(tmp)
        (site / "sitecustomize.py").write_text(_SITE)
        source, worst = run_cpu(command, names, {}, a.repeat, site, t3_cmd)
        print(f"command: {a.command}; load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
        print(
            f"every module from source (the engine's Python loop): {source:.2f} s CPU per run"
            + (f" (the slowest of {a.repeat} runs: {worst:.2f} s)" if a.repeat > 1 else "")
        )
        print(
            f"{'module compiled':24s} {'compile CPU (s)':>15s} {'run CPU (s)':>12s} {'saving/run (s)':>15s}"
        )
        built: dict[str, str] = {}
        total = 0.0
        for name, src in mods:
            cc, built[name] = build(name, src, site / name)
            total += cc
            with_it, _ = run_cpu(command, names, {name: built[name]}, a.repeat, site, t3_cmd)
            print(f"{name:24s} {cc:15.2f} {with_it:12.2f} {source - with_it:15.2f}", flush=True)
        if len(mods) > 1:
            every_one, _ = run_cpu(command, names, built, a.repeat, site, t3_cmd)
            print(f"{'all of the above':24s} {total:15.2f} {every_one:12.2f} {source - every_one:15.2f}")


if __name__ == "__main__":
    main()
