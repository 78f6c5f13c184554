"""What a recorded result depends on, as hashes: the model code it imports and the data files it reads.

The code is hashed as its syntax tree without docstrings (``ast.dump``), so comments, docstrings and
formatting do not count, every other change does. The import closure is found statically from the
source (function-level imports included) and limited to the packages that compute results
(:data:`MODEL_PACKAGES`): a reworded CLI message or report does not make a record stale, a change of
the engine, a GEMM model, a preset value or a selector does. TOML files are hashed as their parsed
content (comments do not count), other files byte for byte.
"""

from __future__ import annotations

import ast
import hashlib
import json
import tomllib
from functools import cache
from pathlib import Path

MODEL_PACKAGES = (
    "t3.sim",
    "t3.ops",
    "t3.ficco",
    "t3.schedules",
    "t3.config",
    "t3.hardware",
    "t3.workload",
    "t3.functional",
    "t3.api",
)


def _strip_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                if isinstance(body[0].value.value, str):
                    node.body = body[1:] or [ast.Pass()]
    return tree


def code_hash(path: Path) -> str:
    st = path.stat()
    return _code_hash(str(path), st.st_mtime_ns, st.st_size)


@cache
def _code_hash(path: str, mtime_ns: int, size: int) -> str:  # keyed by the file's state: edits count
    if not path.endswith(".py"):  # Cython source: byte for byte
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]
    tree = _strip_docstrings(ast.parse(Path(path).read_text(), path))
    return hashlib.sha256(ast.dump(tree).encode()).hexdigest()[:16]


def data_hash(path: Path) -> str:
    if path.suffix == ".toml":
        blob = json.dumps(tomllib.loads(path.read_text()), sort_keys=True, default=str).encode()
    else:
        blob = path.read_bytes()
    return hashlib.sha256(blob).hexdigest()[:16]


def module_file(src: Path, name: str) -> Path | None:
    base = src.joinpath(*name.split("."))
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    if base.with_suffix(".py").is_file():
        return base.with_suffix(".py")
    if base.with_suffix(".pyx").is_file():  # a compiled module's source (the engine's core)
        return base.with_suffix(".pyx")
    return None


def _imports(path: Path, name: str | None, src: Path) -> set[str]:
    """Modules of the ``t3`` package that ``path`` imports (anywhere in the file)."""
    st = path.stat()
    return set(_imports_cached(str(path), st.st_mtime_ns, st.st_size, name, str(src)))


@cache
def _imports_cached(path_s: str, mtime_ns: int, size: int, name: str | None, src_s: str) -> frozenset[str]:
    path, src = Path(path_s), Path(src_s)
    if path.suffix != ".py":  # Cython source: it imports no t3 module
        return frozenset()
    tree = ast.parse(path.read_text(), path_s)
    pkg = None if name is None else (name if path.name == "__init__.py" else name.rpartition(".")[0])
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level and pkg is not None:
                parts = pkg.split(".")
                parts = parts[: len(parts) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names)  # `from pkg import module`
    out = set()
    for m in found:
        if m == "t3" or m.startswith("t3."):
            # a package's __init__ runs on every import below it
            parts = m.split(".")
            for i in range(1, len(parts) + 1):
                if module_file(src, ".".join(parts[:i])) is not None:
                    out.add(".".join(parts[:i]))
    return frozenset(out)


def closure(src: Path, entries: tuple[str, ...]) -> list[str]:
    """The ``t3`` modules reachable by imports from ``entries`` (module names, or paths of scripts)."""
    todo: list[tuple[Path, str | None]] = []
    for e in entries:
        if e.endswith(".py"):
            todo.append((src.parent / e, None))
        else:
            f = module_file(src, e)
            if f is None:
                raise FileNotFoundError(f"no module {e} under {src}")
            todo.append((f, e))
    seen: set[str] = {e for e in entries if not e.endswith(".py")}
    while todo:
        path, name = todo.pop()
        for m in _imports(path, name, src):
            if m not in seen:
                seen.add(m)
                f = module_file(src, m)
                if f is not None:
                    todo.append((f, m))
    return sorted(seen)


def fingerprint(
    root: Path,
    entries: tuple[str, ...],
    data_files: tuple[str, ...],
    packages: tuple[str, ...] = MODEL_PACKAGES,
) -> dict[str, str]:
    """``{module or file: hash}`` of the modules of ``packages`` that ``entries`` reach and of
    ``data_files`` (paths relative to ``root``). Scripts among ``entries`` are hashed too."""
    src = root / "src"
    out: dict[str, str] = {}
    for m in closure(src, entries):
        if m in entries or any(m == p or m.startswith(p + ".") for p in packages):
            f = module_file(src, m)
            if f is not None:
                out[m] = code_hash(f)
    for e in entries:
        if e.endswith(".py"):
            out[e] = code_hash(root / e)
    for d in data_files:
        out[d] = data_hash(root / d)
    return dict(sorted(out.items()))


def differences(recorded: dict[str, str], current: dict[str, str]) -> list[str]:
    """What changed between two fingerprints, in words."""
    out = []
    for k in sorted(set(recorded) | set(current)):
        if k not in current:
            out.append(f"{k} no longer used")
        elif k not in recorded:
            out.append(f"{k} newly used")
        elif recorded[k] != current[k]:
            out.append(f"{k} changed")
    return out
