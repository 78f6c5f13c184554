"""The ``t3`` command. Each sub-command lives in its own module and registers itself on ``app``."""

from __future__ import annotations

import sys

import typer

from t3.errors import T3Error

app = typer.Typer(
    name="t3",
    help="Simulate, explore and run fine-grained overlap of GEMMs and collectives (T3, FiCCO).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _register() -> None:
    # one module per command; each registers itself on `app` (or on `reproduce_app`)
    from t3.cli import (  # noqa: F401
        ficco,
        presets,
        reproduce,
        reproduce_ficco,
        reproduce_t3,
        run,
        sweep,
        trace,
        validate,
    )


def main() -> None:
    _register()
    try:
        app()
    except T3Error as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
