"""``t3 reproduce ficco``: the FiCCO scenario set, heuristic accuracy on unseen cases, report."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from t3.cli.common import OUTPUT_DIR_RULE, check_count, check_output_dir
from t3.cli.reproduce import reproduce_app

KEEP_GOING = (
    "a case that fails is listed in the report and JSON and left out of the evaluation (exit status 0 "
    "with a warning); without it, a failed case stops the command (exit status 1) and nothing is written"
)


@reproduce_app.command("ficco")
def ficco(
    out: Path = typer.Option(
        Path("results/ficco"),
        "--out",
        help=f"output directory (report, figures, JSON; {OUTPUT_DIR_RULE} unless --overwrite)",
    ),
    overwrite: bool = typer.Option(
        False, "--overwrite", help="replace the files it writes in --out, of any kind"
    ),
    workers: int | None = typer.Option(None, "--workers", help="processes (default: CPU count, max 8)"),
    limit: int | None = typer.Option(
        None, "--limit", help="only the first LIMIT design and LIMIT unseen operators (quick look)"
    ),
    keep_going: bool = typer.Option(False, "--keep-going", help=KEEP_GOING),
) -> None:
    """Explore every scenario exhaustively on mi300x-8 and h100-8, fit the heuristic on the design
    cases, evaluate it on the unseen ones; writes report.md, ficco.json and PNG figures. Shows a progress
    bar on stderr."""
    from t3.experiments.reproduce_ficco import reproduce
    from t3.experiments.sweep.executors import MAX_WORKERS

    check_count(workers, "--workers", maximum=MAX_WORKERS)
    check_count(limit, "--limit")
    check_output_dir(out, "--out", "reproduce-ficco", overwrite=overwrite)
    res = reproduce(out, workers=workers, limit=limit, keep_going=keep_going)
    ev = res["evaluation"]
    c = Console()
    if res["errors"]:
        Console(stderr=True).print(
            f"[bold red]WARNING: {len(res['errors'])} case(s) failed (--keep-going): they are listed in the "
            "report and left out of every evaluation[/]"
        )
    for sel in ("estimate", "learned", "pipeline"):
        e = res[f"evaluation_{sel}"]
        u, fr, f2, f3, f4, f5, f6, f7, f8, f9, f10 = (
            e[k]
            for k in (
                "unseen", "fresh", "fresh2", "fresh3", "fresh4", "fresh5", "fresh6", "fresh7", "fresh8", "fresh9",
                "fresh10",
            )
        )  # fmt: skip
        c.print(f"{sel} selector: unseen {u['right']}/{u['cases']} right ({u['accuracy_pct']:.1f} %), "
                f"fresh blind {fr['right']}/{fr['cases']} ({fr['accuracy_pct']:.1f} %), "
                f"second fresh blind {f2['right']}/{f2['cases']} ({f2['accuracy_pct']:.1f} %), "
                f"third fresh blind {f3['right']}/{f3['cases']} ({f3['accuracy_pct']:.1f} %), "
                f"fourth fresh blind {f4['right']}/{f4['cases']} ({f4['accuracy_pct']:.1f} %), "
                f"fifth fresh blind {f5['right']}/{f5['cases']} ({f5['accuracy_pct']:.1f} %), "
                f"sixth fresh blind {f6['right']}/{f6['cases']} ({f6['accuracy_pct']:.1f} %), "
                f"seventh fresh blind {f7['right']}/{f7['cases']} ({f7['accuracy_pct']:.1f} %), "
                f"eighth fresh blind {f8['right']}/{f8['cases']} ({f8['accuracy_pct']:.1f} %), "
                f"ninth fresh blind {f9['right']}/{f9['cases']} ({f9['accuracy_pct']:.1f} %), "
                f"tenth fresh blind {f10['right']}/{f10['cases']} ({f10['accuracy_pct']:.1f} %), "
                f"design {e['design']['accuracy_pct']:.1f} %")  # fmt: skip
    c.print(f"shipped selector: {res['shipped_selector']}")
    a = ev["all"]
    c.print(f"selected schedules: {a['speedup_vs_bulk_geomean']:.3f}x geomean / {a['speedup_vs_bulk_max']:.3f}x max "
            f"over bulk; {a['speedup_vs_shard_geomean']:.3f}x / {a['speedup_vs_shard_max']:.3f}x over shard-level")  # fmt: skip
    c.print(f"wrote {out / 'report.md'}, {out / 'ficco.json'} and figures")
