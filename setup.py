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

import hashlib
import importlib.util
import os
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).parent
CORE = "src/t3/sim/_native.pyx"
SOURCES: dict[str, str] = {}  # module -> sha256 of the .py it was compiled from (read before cythonize)


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

    sha = hashlib.sha256((ROOT / CORE).read_bytes()).hexdigest()[:16]
    core = Extension(
        "t3.sim._native", [CORE], optional=True, define_macros=[("T3_NATIVE_SOURCE", f'"{sha}"')]
    )
    mods = []
    for m in compiled():
        src = "src/" + m.replace(".", "/") + ".py"
        SOURCES[m] = _compiled.source_digest(ROOT / src)
        mods.append(Extension(m, [src], optional=True))
    # plain Python semantics for the .py modules: no C type from an annotation or inferred for a local
    # (every value stays a Python object: an int stays an int, None stays None), functions bind as
    # Python functions (introspection, pickling by reference)
    py = {"binding": True, "annotation_typing": False, "infer_types": False}
    return [
        *cythonize([core], language_level=3, quiet=True),
        *cythonize(mods, language_level=3, quiet=True, compiler_directives=py),
    ]


class BuildExt(build_ext):
    """Compiles with IEEE arithmetic as Python does it, and writes beside each compiled module the
    sha256 of the source it was compiled from (read by :func:`t3._compiled.stale`), once the module
    is built (an extension that fails to build, they are optional, gets none); an editable install
    copies it into the source tree with the module."""

    # gcc and clang fuse a*b + c into one fused multiply-add wherever the target has one (aarch64
    # always, x86-64 with -march=haswell or later): one rounding instead of Python's two, and the
    # compiled core would no longer equal the Python loop bit for bit (tests/test_native_engine.py
    # fails so); fast-math (from CFLAGS) would reorder sums likewise
    IEEE = ["-ffp-contract=off", "-fno-fast-math"]

    def build_extensions(self):
        if self.compiler.compiler_type == "unix":  # (gcc, clang; MSVC does not contract by default)
            for ext in self.extensions:
                ext.extra_compile_args = [*ext.extra_compile_args, *self.IEEE]
                ext.extra_link_args = [*ext.extra_link_args, *self.IEEE]
        super().build_extensions()

    def build_extension(self, ext):
        super().build_extension(ext)
        if ext.name in SOURCES:
            _compiled.digest_path(Path(self.get_ext_fullpath(ext.name))).write_text(SOURCES[ext.name] + "\n")

    def copy_extensions_to_source(self):
        super().copy_extensions_to_source()
        for ext in self.extensions:
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
