"""The core (no extras) needs only the declared dependencies: every command loads without torch and
dask, and no module imports a package that only an extra (or a transitive dependency) brings."""

import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_cli_loads_without_optional_packages():
    code = (
        "import sys\n"
        "for m in ('torch', 'dask', 'distributed'):\n"
        "    sys.modules[m] = None  # any import of them now fails\n"
        "sys.argv = ['t3', '--help']\n"
        "from t3.cli.main import main\n"
        "try:\n"
        "    main()\n"
        "except SystemExit as e:\n"
        "    sys.exit(e.code)\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    for cmd in ("run", "reproduce", "sweep", "ficco", "presets"):
        assert cmd in p.stdout


def test_top_level_imports_are_declared_dependencies():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = {re.split(r"[<>=\[ ]", d)[0].lower() for d in meta["dependencies"]}
    stdlib = set(sys.stdlib_module_names)
    # the runtime is the `torch` extra; the measurement kit's GPU kernels import Triton (only on a GPU, lazily)
    optional_ok = {"torch": "src/t3/runtime/", "triton": "src/t3/measure/kernels.py"}
    bad = []
    for path in (ROOT / "src" / "t3").rglob("*.py"):
        rel = path.relative_to(ROOT).as_posix()
        for line in path.read_text().splitlines():
            m = re.match(r"(?:from|import) ([A-Za-z_][\w]*)", line)  # module-level imports only
            if not m:
                continue
            mod = m.group(1)
            if mod in stdlib or mod in ("t3", "__future__") or mod.lower() in declared:
                continue
            if mod in optional_ok and rel.startswith(optional_ok[mod]):
                continue
            bad.append(f"{rel}: {line.strip()}")
    assert not bad, "module-level imports of undeclared packages:\n" + "\n".join(bad)
