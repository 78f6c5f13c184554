"""``t3 reproduce``: one-command reproductions of the papers' evaluations (one sub-command each)."""

from __future__ import annotations

import typer

from t3.cli.main import app

reproduce_app = typer.Typer(
    help="Reproduce a paper's evaluation: tables, figures, JSON, report.", no_args_is_help=True
)
app.add_typer(reproduce_app, name="reproduce")
