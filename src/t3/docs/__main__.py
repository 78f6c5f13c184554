"""``python -m t3.docs``: regenerate (or ``--check``) the numbers quoted in README.md and docs/*.md."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from t3.docs import BLOCKS, RECORDS, generate, root_dir
from t3.errors import T3Error


def _record_arg(s: str) -> tuple[str, Path | None]:
    name, _, path = s.partition("=")
    return name, (Path(path) if path else None)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m t3.docs",
        description="Rewrite the generated blocks of README.md and docs/*.md from the runs that produce "
        "their numbers; --check writes nothing and exits 1 naming every stale block or record.",
    )
    ap.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 if a block or record is stale"
    )
    ap.add_argument("--only", action="append", metavar="BLOCK",
                    help=f"only this block (repeatable): {', '.join(b.name for b in BLOCKS)}")  # fmt: skip
    ap.add_argument("--record", action="append", metavar="NAME[=OUTPUT]", type=_record_arg, default=[],
                    help="re-record a slow source from its command's output (a results folder or a file); "
                    f"without =OUTPUT the command is run (minutes): {', '.join(r.name for r in RECORDS)}")  # fmt: skip
    ap.add_argument("--record-all", action="store_true", help="rerun every recorded command (minutes)")
    ap.add_argument(
        "--workers", type=int, default=None, help="processes for the runs (default: CPU count, max 8)"
    )
    ap.add_argument("--t3-results", type=Path, default=None,
                    help="read t3.json from this `t3 reproduce t3` output folder instead of running it")  # fmt: skip
    a = ap.parse_args(argv)
    if a.workers is not None and a.workers < 1:
        print(f"error: --workers: {a.workers} is not a positive count", file=sys.stderr)
        return 2
    record = dict(a.record)
    if a.record_all:
        record = {r.name: record.get(r.name) for r in RECORDS}
    try:
        out = generate(root_dir(), check=a.check, only=a.only, record=record, workers=a.workers,
                       t3_results=a.t3_results, log=lambda s: print(s, file=sys.stderr))  # fmt: skip
    except T3Error as err:
        print(f"error: {err}", file=sys.stderr)
        return err.exit_code
    for line in out:
        print(line)
    if a.check:
        if out:
            print(f"{len(out)} stale: regenerate with `python -m t3.docs` (see its --help)", file=sys.stderr)
            return 1
        print("every generated block and record is up to date", file=sys.stderr)
    elif not out:
        print("nothing changed", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
