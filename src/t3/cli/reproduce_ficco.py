"""``t3 reproduce ficco``: the FiCCO scenario set, heuristic accuracy on unseen cases, report."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from t3.cli.reproduce import reproduce_app


@reproduce_app.command("ficco")
def ficco(
    out: Path = typer.Option(Path("results/ficco"), "--out", help="output directory"),
    workers: int | None = typer.Option(None, "--workers", help="processes (default: CPU count, max 8)"),
    limit: int | None = typer.Option(
        None, "--limit", help="only the first LIMIT design and LIMIT unseen operators (quick look)"
    ),
) -> None:
    """Explore every scenario exhaustively on mi300x-8 and h100-8, fit the heuristic on the design
    cases, evaluate it on the unseen ones; writes report.md, ficco.json and PNG figures."""
    from t3.errors import ConfigError
    from t3.experiments.reproduce_ficco import reproduce

    if workers is not None and workers < 1:
        raise ConfigError(f"workers: must be >= 1, got {workers}")
    if limit is not None and limit < 1:
        raise ConfigError(f"limit: need at least 1 operator of each set, got {limit}")
    res = reproduce(out, workers=workers, limit=limit)
    ev = res["evaluation"]
    c = Console()
    for sel in ("estimate", "learned", "pipeline"):
        e = res[f"evaluation_{sel}"]
        u, fr, f2, f3 = e["unseen"], e["fresh"], e["fresh2"], e["fresh3"]
        c.print(f"{sel} selector: unseen {u['right']}/{u['cases']} right ({u['accuracy_pct']:.1f} %), "
                f"fresh blind {fr['right']}/{fr['cases']} ({fr['accuracy_pct']:.1f} %), "
                f"second fresh blind {f2['right']}/{f2['cases']} ({f2['accuracy_pct']:.1f} %), "
                f"third fresh blind {f3['right']}/{f3['cases']} ({f3['accuracy_pct']:.1f} %), "
                f"design {e['design']['accuracy_pct']:.1f} %")  # fmt: skip
    c.print(f"shipped selector: {res['shipped_selector']}")
    a = ev["all"]
    c.print(f"selected schedules: {a['speedup_vs_bulk_geomean']:.3f}x geomean / {a['speedup_vs_bulk_max']:.3f}x max "
            f"over bulk; {a['speedup_vs_shard_geomean']:.3f}x / {a['speedup_vs_shard_max']:.3f}x over shard-level")  # fmt: skip
    c.print(f"wrote {out / 'report.md'}, {out / 'ficco.json'} and figures")
