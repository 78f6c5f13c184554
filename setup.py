"""Builds the compiled modules; everything else is in pyproject.toml.

- the engine's core, :mod:`t3.sim._native`, from its Cython source (``src/t3/sim/_native.pyx``); its
  sha256 is compiled in, so a core built from another version of the source is never used
  (:func:`t3.sim.engine._load_native`);
- the modules of :data:`t3._compiled.COMPILED` (schedule building, GEMM planning, the FiCCO
  selectors), compiled by Cython from their unchanged Python source: same code, same results; the
  sha256 of the source goes beside each compiled file, and one built from another version of its
  source is skipped for the source (:mod:`t3._compiled`).

Every extension is optional: without a C compiler the install still succeeds and everything runs in
pure Python (same results, bit for bit, slower); ``t3 --version`` says which engine runs.
"""

import importlib.util
import os
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).parent
CORE = "src/t3/sim/_native.pyx"
CORE_NAME = "t3.sim._native"
SOURCES: dict[str, str] = {}  # module -> sha256 of the source it is compiled from (read before cythonize)


def _load():
    """:mod:`t3._compiled` loaded from its file alone (the package is not importable while it is built;
    that module needs nothing but the standard library): the list to compile, where digests go."""
    spec = importlib.util.spec_from_file_location("t3_compiled_list", ROOT / "src/t3/_compiled.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


_compiled = _load()


def compiled() -> list[str]:
    """:data:`t3._compiled.COMPILED`."""
    return list(_compiled.COMPILED)


def extensions() -> list:
    from Cython.Build import cythonize  # a build requirement (pyproject.toml)

    SOURCES[CORE_NAME] = _compiled.source_digest(ROOT / CORE)
    core = Extension(
        CORE_NAME, [CORE], optional=True, define_macros=[("T3_NATIVE_SOURCE", f'"{SOURCES[CORE_NAME][:16]}"')]
    )
    mods = []
    for m in compiled():
        src = "src/" + m.replace(".", "/") + ".py"
        SOURCES[m] = _compiled.source_digest(ROOT / src)
        mods.append(Extension(m, [src], optional=True))
    # plain Python semantics for the .py modules: no C type from an annotation or inferred for a local
    # (every value stays a Python object: an int stays an int, None stays None), functions bind as
    # Python functions (introspection, pickling by reference). Cython translates in parallel (and only
    # a source newer than its .c); the C compiler runs in parallel too (BuildExt.parallel).
    py = {"binding": True, "annotation_typing": False, "infer_types": False}
    jobs = {"nthreads": os.cpu_count() or 1} if len(mods) > 1 else {}
    return [
        *cythonize([core], language_level=3, quiet=True),
        *(cythonize(mods, language_level=3, quiet=True, compiler_directives=py, **jobs) if mods else []),
    ]


class BuildExt(build_ext):
    """Compiles with IEEE arithmetic as Python does it, and writes beside each compiled module the
    sha256 of the source it was compiled from (read by :func:`t3._compiled.stale`), once the module
    is built (an extension that fails to build, they are optional, gets none); an editable install
    copies it into the source tree with the module.

    Builds once: a module whose compiled file in the source tree (left by an earlier ``pip install
    -e .``) records the sha256 of its current source and is newer than this file (the flags) is
    reused, not compiled again, so the test command's ``pip install -e '.[test,...]'`` after the main
    set-up's ``pip install -e .`` takes seconds; an edited source is compiled again, alone. Compiled
    files in the source tree of modules that are no longer compiled are removed (they would shadow
    their source)."""

    # gcc and clang fuse a*b + c into one fused multiply-add wherever the target has one (aarch64
    # always, x86-64 with -march=haswell or later): one rounding instead of Python's two, and the
    # compiled core would no longer equal the Python loop bit for bit (tests/test_native_engine.py
    # fails so); fast-math (from CFLAGS) would reorder sums likewise
    IEEE = ["-ffp-contract=off", "-fno-fast-math"]

    def finalize_options(self):
        super().finalize_options()
        if not self.parallel:  # (the C compiler on every CPU; setup() below asks for it too)
            self.parallel = os.cpu_count() or 1
        self._reused: set[str] = set()

    def build_extensions(self):
        if self.compiler.compiler_type == "unix":  # (gcc, clang; MSVC does not contract by default)
            for ext in self.extensions:
                ext.extra_compile_args = [*ext.extra_compile_args, *self.IEEE]
                ext.extra_link_args = [*ext.extra_link_args, *self.IEEE]
        self._remove_retired()
        super().build_extensions()

    def _in_source(self, name: str) -> Path:
        """Where an editable install puts the compiled module ``name``."""
        return ROOT / "src" / self.get_ext_filename(name)

    def _current(self, ext) -> bool:
        """The compiled file in the source tree stands for the source as it is now, built with these flags."""
        built = self._in_source(ext.name)
        digest = _compiled.digest_path(built)
        try:
            return (
                ext.name in SOURCES
                and digest.read_text().strip() == SOURCES[ext.name]
                and built.stat().st_mtime >= (ROOT / "setup.py").stat().st_mtime
            )
        except OSError:
            return False

    def build_extension(self, ext):
        out = Path(self.get_ext_fullpath(ext.name))
        if self._current(ext):
            out.parent.mkdir(parents=True, exist_ok=True)
            self.copy_file(str(self._in_source(ext.name)), str(out), level=self.verbose)
            self._reused.add(ext.name)
            print(f"reusing {self._in_source(ext.name).relative_to(ROOT)} (built from the current source)")
        else:
            super().build_extension(ext)
        if ext.name in SOURCES and out.is_file():
            _compiled.digest_path(out).write_text(SOURCES[ext.name] + "\n")

    def _remove_retired(self):
        """Compiled files (and their digests, Cython's C files) under src/t3 of modules not built any more."""
        keep = {self.get_ext_filename(ext.name) for ext in self.extensions}
        for built in sorted((ROOT / "src" / "t3").rglob("*")):
            if not any(built.name.endswith(s) for s in EXTENSION_SUFFIXES) or not built.is_file():
                continue
            if str(built.relative_to(ROOT / "src")) in keep:
                continue
            stem = built.name.split(".")[0]
            for f in (built, _compiled.digest_path(built), built.with_name(stem + ".c")):
                if f.is_file() and (
                    f == built or f.suffix != ".c" or built.with_name(stem + ".py").is_file()
                ):
                    print(f"removing {f.relative_to(ROOT)} (no longer compiled)")
                    f.unlink()

    def copy_extensions_to_source(self):
        every = self.extensions
        # (a reused module is already in place: not rewritten under a process that has it loaded)
        self.extensions = [ext for ext in every if ext.name not in self._reused]
        try:
            super().copy_extensions_to_source()
        finally:
            self.extensions = every
        for ext in self.extensions:
            if ext.name in self._reused:
                continue
            name = self.get_ext_filename(ext.name)  # (the module's path under the build directory)
            built = Path(self.build_lib) / name
            if ext.name in SOURCES and _compiled.digest_path(built).is_file():
                into = _compiled.digest_path(ROOT / "src" / name)
                self.copy_file(str(_compiled.digest_path(built)), str(into), level=self.verbose)


if __name__ == "__main__":  # (as pip runs it; tests import compiled())
    setup(
        ext_modules=extensions(),
        cmdclass={"build_ext": BuildExt},
        options={"build_ext": {"parallel": os.cpu_count() or 1}},
    )
