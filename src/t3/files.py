"""Output files written whole: a file the project writes appears complete or not at all.

Each output is written to a temporary file beside it and renamed over its name once complete (one
``rename`` within a folder is atomic on POSIX file systems), so a full disk, a failed figure or an
interrupted run leaves the earlier file as it was instead of a truncated one, and no temporary file
behind. A path that exists and is not a regular file (a device such as ``/dev/stdout``, a pipe such as
a shell's ``>(gzip > x)``) is written in place: it is where the user sends the output, not a file to
replace. A symbolic link is followed (the file it names is replaced; the link stays).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def replacing(path: str | Path) -> Iterator[Path]:
    """The path to write ``path``'s new content to: on leaving without an error it replaces ``path``
    at once (keeping an existing file's permission bits); on an error it is removed and ``path`` is
    left as it was. A special file (not a regular file, see the module) is yielded itself."""
    p = Path(path)
    if p.is_symlink():
        p = Path(os.path.realpath(p))
    if p.exists() and not p.is_file():
        yield p
        return
    tmp = p.with_name(f".{p.name}.{os.getpid()}.tmp")
    try:
        yield tmp
        if p.exists():
            shutil.copymode(p, tmp)
        os.replace(tmp, p)
    except OSError as err:  # an error on the temporary file is an error on the file it stands for
        if err.filename is not None and os.fspath(err.filename) == os.fspath(tmp):
            err.filename = os.fspath(path)
        raise
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def write_text(path: str | Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` whole (:func:`replacing`)."""
    with replacing(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def save_figure(fig, path: str | Path, **kwargs) -> None:
    """``fig.savefig(path, ...)`` whole (:func:`replacing`); the format is the name's (``.png``), as
    matplotlib takes it from the name it is given."""
    fmt = Path(path).suffix.lstrip(".") or None
    with replacing(path) as tmp:
        fig.savefig(tmp, format=fmt, **kwargs)


@contextlib.contextmanager
def staged(folder: str | Path, last: str | None = None) -> Iterator[Path]:
    """A staging folder inside ``folder`` for the several files of one output: on leaving without an
    error each file in it replaces its namesake in ``folder`` (``last``, the document that marks the
    folder as the command's output, after all the others), and the staging folder is removed; on an
    error it is removed with everything in it, and ``folder`` is left as it was. So a run that fails
    half-way (a full disk, a figure that cannot be drawn) leaves no report without its figures and no
    marker beside another run's files."""
    out = Path(folder)
    stage = out / f".staging-{os.getpid()}"
    if stage.exists():
        shutil.rmtree(stage)
    stage.mkdir(parents=True)
    try:
        yield stage
        names = sorted(p.name for p in stage.iterdir())
        if last in names:
            names.remove(last)
            names.append(last)
        for name in names:
            with replacing(out / name) as tmp:
                os.replace(stage / name, tmp)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
