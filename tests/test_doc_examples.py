"""Every code example of README.md and docs/*.md runs, as written.

A fenced block's language says what it is:

- ``console``: commands, one per line (``# comment`` ends a line). ``t3 ...`` runs in this process
  through the CLI's entry point (the same code the console script calls, without an interpreter
  start per line); ``python ...``, ``PYTHONPATH=src python ...`` and ``torchrun ...`` run as
  subprocesses with a timeout. Each must exit with status 0.
- ``python``: executed. ``python file=NAME`` is written to NAME instead (a second block with the
  same name is appended), for a ``console`` line to run, e.g. under ``torchrun``.
- ``toml``: parsed; ``toml file=NAME`` is written to NAME.
- ``sh``: set-up commands (virtual environment, pip), run by CI (``tests/test_setup_docs.py`` checks
  that CI runs the README's); ``text``: output, grammars, diagrams. Neither is run.

Blocks of one document run in order in one scratch directory that links the repository's top-level
folders, so later examples see the files earlier ones wrote and repository paths resolve. Indented
(unfenced) code blocks are not allowed: they could not say what they are.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUN = {"console", "python", "toml"}
NOT_RUN = {"sh", "text"}
TIMEOUT_S = 180
FENCE = re.compile(r"^```(\S*)\s*(.*)$")


@dataclass
class CodeBlock:
    doc: Path
    line: int
    lang: str
    info: dict[str, str]
    code: str

    @property
    def where(self) -> str:
        return f"{self.doc.relative_to(ROOT)}:{self.line}"


def code_blocks(doc: Path) -> list[CodeBlock]:
    out, cur, buf = [], None, []
    for i, line in enumerate(doc.read_text().splitlines(), 1):
        m = FENCE.match(line)
        if cur is None and m:
            info = dict(x.split("=", 1) for x in m.group(2).split() if "=" in x)
            cur, buf = CodeBlock(doc, i, m.group(1), info, ""), []
        elif cur is not None and line.startswith("```"):
            cur.code = "\n".join(buf) + "\n"
            out.append(cur)
            cur = None
        elif cur is not None:
            buf.append(line)
    assert cur is None, f"{doc.relative_to(ROOT)}:{cur.line}: unclosed code block"
    return out


def indented_code(doc: Path) -> list[int]:
    """Lines that start an indented code block: 4+ spaces after a blank line, outside fences and lists."""
    out, fenced, prev, in_list = [], False, "", False
    for i, line in enumerate(doc.read_text().splitlines(), 1):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced:
            if re.match(r"^\s*([-*+]|\d+\.)\s", line):
                in_list = True
            elif line.strip() and not line.startswith(" "):
                in_list = False
            if line.startswith("    ") and line.strip() and not prev.strip() and not in_list:
                out.append(i)
        prev = line
    return out


def test_every_code_block_says_what_it_is():
    bad = []
    for doc in DOCS:
        for b in code_blocks(doc):
            if b.lang not in RUN | NOT_RUN:
                bad.append(f"{b.where}: ```{b.lang} (use one of {sorted(RUN | NOT_RUN)})")
        bad += [f"{doc.relative_to(ROOT)}:{n}: indented code block (fence it)" for n in indented_code(doc)]
    assert not bad, "\n".join(bad)


def test_the_readme_runtime_example_runs_on_two_processes():
    blocks = code_blocks(ROOT / "README.md")
    runs = [x for b in blocks if b.lang == "console" for x in b.code.splitlines() if x.startswith("torchrun")]
    assert any("--nproc-per-node 2" in x for x in runs), runs
    files = {b.info["file"] for b in blocks if b.lang == "python" and "file" in b.info}
    assert any(f in x for f in files for x in runs), (files, runs)


def _commands(code: str) -> list[str]:
    out, cur = [], ""
    for line in code.splitlines():
        if line.rstrip().endswith("\\"):
            cur += line.rstrip()[:-1] + " "
            continue
        cur += line
        if cur.strip() and not cur.strip().startswith("#"):
            out.append(cur.strip())
        cur = ""
    return out


def _run_t3(argv: list[str], where: str) -> None:
    from t3.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    code: int | str | None = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(argv)
        except SystemExit as e:
            code = e.code
    assert code in (0, None), f"{where}: t3 {shlex.join(argv)} exited {code}\n{err.getvalue()[-3000:]}"


def _run_process(argv: list[str], env_add: dict[str, str], cwd: Path, where: str) -> None:
    if argv[0] in ("python", "python3"):
        argv = [sys.executable, *argv[1:]]
    elif argv[0] == "torchrun":
        argv = [sys.executable, "-m", "torch.distributed.run", *argv[1:]]
    else:
        pytest.fail(f"{where}: don't know how to run {argv[0]!r} (t3, python, python3, torchrun)")
    env = dict(os.environ)
    env.update(env_add)
    env["PYTHONPATH"] = str(ROOT / "src")  # this checkout, whatever the line says
    try:
        p = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{where}: {shlex.join(argv)} did not finish within {TIMEOUT_S} s")
    assert p.returncode == 0, (
        f"{where}: {shlex.join(argv)} exited {p.returncode}\n{(p.stdout + p.stderr)[-3000:]}"
    )


def _run_console(b: CodeBlock, cwd: Path) -> None:
    for line in _commands(b.code):
        argv = shlex.split(line, comments=True)
        env: dict[str, str] = {}
        while argv and re.match(r"^[A-Z_][A-Z0-9_]*=", argv[0]):
            k, _, v = argv.pop(0).partition("=")
            env[k] = v
        where = f"{b.where}: {line}"
        if argv[0] == "t3":
            _run_t3(argv[1:], where)
        else:
            _run_process(argv, env, cwd, where)


def _scratch(tmp_path: Path) -> Path:
    for entry in ("src", "tests", "examples", "benchmarks", "docs", "README.md", "pyproject.toml"):
        if (ROOT / entry).exists():
            (tmp_path / entry).symlink_to(ROOT / entry)
    return tmp_path


RUNNABLE = [d for d in DOCS if any(b.lang in RUN for b in code_blocks(d))]


@pytest.mark.parametrize("doc", RUNNABLE, ids=[str(d.relative_to(ROOT)) for d in RUNNABLE])
def test_examples_run(doc: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    cwd = _scratch(tmp_path)
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    for b in code_blocks(doc):
        if b.lang not in RUN:
            continue
        if "file" in b.info:
            with open(cwd / b.info["file"], "a") as f:
                f.write(b.code)
        elif b.lang == "toml":
            tomllib.loads(b.code)
        elif b.lang == "python":
            exec(compile(b.code, b.where, "exec"), {"__name__": "__doc_example__"})  # noqa: S102
        else:
            _run_console(b, cwd)
