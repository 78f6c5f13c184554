"""Builds the compiled engine core (:mod:`t3.sim._native`) from its Cython source; everything else
is in pyproject.toml. The extension is optional: without a C compiler the install goes on and the
engine runs in pure Python (same results, bit for bit; ``t3 --version`` says which one runs). The
source's sha256 is compiled in, so a core older than its source is never used
(:func:`t3.sim.engine._load_native`)."""

import hashlib
from pathlib import Path

from setuptools import Extension, setup

SOURCE = "src/t3/sim/_native.pyx"


def extensions() -> list:
    from Cython.Build import cythonize  # a build requirement (pyproject.toml)

    sha = hashlib.sha256((Path(__file__).parent / SOURCE).read_bytes()).hexdigest()[:16]
    ext = Extension(
        "t3.sim._native", [SOURCE], optional=True, define_macros=[("T3_NATIVE_SOURCE", f'"{sha}"')]
    )
    return cythonize([ext], language_level=3, quiet=True)


setup(ext_modules=extensions())
