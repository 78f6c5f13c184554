"""The build compiles once and only what pays (setup.py, :mod:`t3._compiled`): a second ``pip install -e``
reuses a compiled module whose recorded digest is its current source's and that is newer than setup.py;
compiled files of modules no longer compiled are removed by the build and never imported meanwhile;
the licence is the SPDX string that setuptools >= 77 reads without a deprecation warning."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import tomllib
import warnings
from pathlib import Path

import pytest

from t3 import _compiled

ROOT = Path(__file__).resolve().parents[1]
SUFFIX = importlib.machinery.EXTENSION_SUFFIXES[0]


def _setup_module():
    spec = importlib.util.spec_from_file_location("t3_setup_once", ROOT / "setup.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # (setup() runs only as __main__)
    return mod


@pytest.fixture
def tree(tmp_path, monkeypatch):
    """setup.py's module with its ROOT at a scratch tree holding a setup.py, and a BuildExt on it."""
    from setuptools import Distribution, Extension

    mod = _setup_module()
    (tmp_path / "setup.py").write_text("# flags\n")
    (tmp_path / "src" / "t3" / "ficco").mkdir(parents=True)
    monkeypatch.setattr(mod, "ROOT", tmp_path)
    monkeypatch.setattr(mod, "SOURCES", {"t3.ficco.space": "a" * 64})
    ext = Extension("t3.ficco.space", ["src/t3/ficco/space.py"], optional=True)
    cmd = mod.BuildExt(Distribution({"ext_modules": [ext]}))
    cmd.ensure_finalized()
    return mod, cmd, ext, tmp_path / "src" / cmd.get_ext_filename(ext.name)


def _built(path: Path, digest: str, newer: bool) -> None:
    path.write_bytes(b"")
    _compiled.digest_path(path).write_text(digest + "\n")
    setup_mtime = (path.parents[3] / "setup.py").stat().st_mtime
    t = setup_mtime + (10 if newer else -10)
    os.utime(path, (t, t))


def test_the_build_runs_the_compiler_in_parallel(tree):
    _, cmd, _, _ = tree
    assert cmd.parallel == (os.cpu_count() or 1)


def test_a_module_built_from_the_current_source_is_reused(tree):
    _, cmd, ext, built = tree
    _built(built, "a" * 64, newer=True)
    assert cmd._current(ext)


@pytest.mark.parametrize(
    ("digest", "newer", "exists"),
    [("b" * 64, True, True), ("a" * 64, False, True), (None, True, True), ("a" * 64, True, False)],
    ids=["source-edited", "older-than-setup.py", "no-digest", "not-built"],
)
def test_a_module_is_compiled_again_when_anything_changed(tree, digest, newer, exists):
    _, cmd, ext, built = tree
    if exists:
        _built(built, digest or "a" * 64, newer)
        if digest is None:
            _compiled.digest_path(built).unlink()
    assert not cmd._current(ext)


def test_compiled_files_of_modules_no_longer_compiled_are_removed(tree, capsys):
    mod, cmd, _, built = tree
    gone = built.parents[2] / cmd.get_ext_filename("t3.ficco.losses")
    for f in (gone, _compiled.digest_path(gone), gone.with_name("losses.c"), gone.with_name("losses.py")):
        f.write_text("")
    for f in (built, _compiled.digest_path(built), built.with_name("space.c"), built.with_name("space.py")):
        f.write_text("")
    cmd._remove_retired()
    assert not gone.exists() and not _compiled.digest_path(gone).exists()
    assert not gone.with_name("losses.c").exists() and gone.with_name("losses.py").exists()
    assert built.exists() and _compiled.digest_path(built).exists() and built.with_name("space.c").exists()
    assert f"removing src/t3/ficco/{gone.name} (no longer compiled)" in capsys.readouterr().out


def test_a_module_no_longer_compiled_runs_from_source_even_beside_an_old_build(tmp_path):
    name = _compiled.NOT_COMPILED[0]
    leaf = name.rpartition(".")[2]
    src = tmp_path / f"{leaf}.py"
    src.write_text("X = 1\n")
    built = tmp_path / f"{leaf}{SUFFIX}"
    built.write_bytes(b"")
    _compiled.digest_path(built).write_text(_compiled.source_digest(src) + "\n")  # (even a current one)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        spec = _compiled.SourceWhenStale().find_spec(name, [str(tmp_path)])
    assert spec is not None and spec.origin == str(src)


def test_no_module_is_both_compiled_and_not():
    assert not set(_compiled.COMPILED) & set(_compiled.NOT_COMPILED)
    for m in (*_compiled.COMPILED, *_compiled.NOT_COMPILED):
        assert (ROOT / "src" / (m.replace(".", "/") + ".py")).is_file(), m


def test_the_licence_is_an_spdx_string_with_a_setuptools_that_reads_it():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert meta["project"]["license"] == "Apache-2.0"
    floor = next(r for r in meta["build-system"]["requires"] if r.startswith("setuptools"))
    assert floor.startswith("setuptools>=") and int(floor.split(">=")[1].split(".")[0]) >= 77
