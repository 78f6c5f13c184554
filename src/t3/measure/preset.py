"""Writing a calibrated preset: the base preset's own text with the fitted lines replaced.

Everything else of the base file (its comments, its order, its other values) is kept; a fitted line
gets its new value and a comment naming the measurement, and the indented comment lines that continued
the old comment are dropped. A fitted field the base file does not list is added at the end of its
section.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

COMMENT_COLUMN = 30  # the presets align their comments here


@dataclass(frozen=True)
class Edit:
    section: str  # "compute", "hbm"
    key: str  # a field of the section
    value: float | dict[str, float]  # an inline table for per-dtype fields (gemm_clock_hz)
    comment: str


def number(v: float) -> str:
    """A TOML float with 5 significant digits (always a float literal: 1.0, not 1)."""
    s = f"{v:.5g}"
    return s if any(c in s for c in ".en") else s + ".0"


def _value(v: float | dict[str, float]) -> str:
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {number(x)}" for k, x in v.items()) + " }"
    return number(v)


def _line(e: Edit) -> str:
    head = f"{e.key} = {_value(e.value)}"
    pad = " " * max(2, COMMENT_COLUMN - len(head))
    return f"{head}{pad}# {e.comment}"


_KEY = re.compile(r"^(\w+)\s*=")
_CONT = re.compile(r"^\s{2,}#")


def _section(lines: list[str], name: str) -> tuple[int, int]:
    """Index of the first line after ``[name]`` and of the next table header (or the end)."""
    try:
        start = next(i for i, ln in enumerate(lines) if ln.strip() == f"[{name}]") + 1
    except StopIteration:
        raise KeyError(name) from None
    end = next((i for i in range(start, len(lines)) if lines[i].lstrip().startswith("[")), len(lines))
    return start, end


def apply(text: str, name: str, header: list[str], edits: list[Edit]) -> str:
    """The base preset ``text`` with ``name`` set, ``header`` comment lines on top and ``edits`` applied."""
    lines = text.splitlines()
    first = next((i for i, ln in enumerate(lines) if ln.lstrip().startswith("[")), len(lines))
    at = next(
        (i for i in range(first) if _KEY.match(lines[i]) and _KEY.match(lines[i]).group(1) == "name"), None
    )
    if at is None:
        lines.insert(first, f'name = "{name}"')
    else:
        lines[at] = f'name = "{name}"'
    for e in edits:
        try:
            start, end = _section(lines, e.section)
        except KeyError:
            lines += ["", f"[{e.section}]"]
            start, end = len(lines), len(lines)
        at = next(
            (i for i in range(start, end) if _KEY.match(lines[i]) and _KEY.match(lines[i]).group(1) == e.key),
            None,
        )
        if at is not None:
            j = at + 1
            while j < end and _CONT.match(lines[j]):
                j += 1
            lines[at:j] = [_line(e)]
            continue
        last = max((i for i in range(start, end) if _KEY.match(lines[i])), default=start - 1)
        while last + 1 < end and _CONT.match(lines[last + 1]):
            last += 1
        lines.insert(last + 1, _line(e))
    return "\n".join([f"# {h}" if h else "#" for h in header] + lines) + "\n"
