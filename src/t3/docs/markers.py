"""Generated blocks in Markdown files: ``<!-- t3:begin NAME -->`` ... ``<!-- t3:end NAME -->``.

A marker stands alone on its line. Blocks do not nest; a name may appear in several files (and more
than once), every occurrence gets the same text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from t3.errors import T3Error

MARKER = re.compile(r"^<!-- t3:(begin|end) ([a-z0-9][a-z0-9-]*) -->[ \t]*$", re.MULTILINE)


class MarkerError(T3Error):
    """Unbalanced, nested or unknown markers."""


@dataclass(frozen=True)
class Span:
    name: str
    start: int  # offset of the first character after the begin marker's line
    end: int  # offset of the end marker's first character
    line: int  # 1-based line of the begin marker


def spans(text: str, where: str) -> list[Span]:
    """Every block of ``text`` in order; ``where`` names the file in errors."""
    out: list[Span] = []
    open_: tuple[str, int, int] | None = None
    for m in MARKER.finditer(text):
        kind, name = m.group(1), m.group(2)
        line = text.count("\n", 0, m.start()) + 1
        if kind == "begin":
            if open_ is not None:
                raise MarkerError(f"{where}:{line}: block '{name}' begins inside block '{open_[0]}' "
                                  f"(line {open_[2]})")  # fmt: skip
            nl = text.find("\n", m.end())
            open_ = (name, len(text) if nl < 0 else nl + 1, line)
        else:
            if open_ is None or open_[0] != name:
                raise MarkerError(f"{where}:{line}: 't3:end {name}' without a matching 't3:begin {name}'")
            out.append(Span(name, open_[1], m.start(), open_[2]))
            open_ = None
    if open_ is not None:
        raise MarkerError(f"{where}:{open_[2]}: block '{open_[0]}' is never closed (t3:end {open_[0]})")
    return out


def replace(text: str, where: str, bodies: dict[str, str]) -> tuple[str, list[Span]]:
    """``text`` with every block named in ``bodies`` replaced by its body (a trailing newline is added
    if missing), and the spans whose text changed."""
    changed: list[Span] = []
    parts: list[str] = []
    pos = 0
    for s in spans(text, where):
        if s.name not in bodies:
            continue
        body = bodies[s.name]
        if body and not body.endswith("\n"):
            body += "\n"
        if text[s.start : s.end] != body:
            changed.append(s)
        parts += [text[pos : s.start], body]
        pos = s.end
    parts.append(text[pos:])
    return "".join(parts), changed
