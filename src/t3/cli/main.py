"""The ``t3`` command. Each sub-command lives in its own module and registers itself on ``app``.

Exit status: 0 success; 1 work that ran and failed (a simulation point, a functional check); 2 bad
input (one line ``error: ...`` naming the field, nothing ran); 130 interrupted.
"""

from __future__ import annotations

import errno
import os
import re
import sys
from typing import Any

import typer
import typer.core

from t3.errors import T3Error

# the click typer runs on (recent typer versions vendor it as typer._click)
_cx = getattr(typer.core, "_click", None) or __import__("click")

app = typer.Typer(
    name="t3",
    help="Simulate, explore and run fine-grained overlap of GEMMs and collectives (T3, FiCCO).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        from t3.provenance import git_commit, version
        from t3.sim.engine import engine_core

        commit = git_commit()
        print(f"t3 {version()}" + (f" (git {commit})" if commit else "") + f"; engine: {engine_core()}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False,
        "--version",
        callback=_version,
        is_eager=True,
        help="print the version (and git commit) and exit",
    ),
) -> None:
    """Simulate, explore and run fine-grained overlap of GEMMs and collectives (T3, FiCCO)."""


def _register() -> None:
    # one module per command; each registers itself on `app` (or on `reproduce_app`)
    from t3.cli import (  # noqa: F401
        calibrate,
        ficco,
        measure,
        presets,
        reproduce,
        reproduce_ficco,
        reproduce_t3,
        run,
        study,
        sweep,
        trace,
        validate,
    )


def _usage_line(err) -> str:
    """A click usage error as one line: the message, and where to read the options."""
    cmd = err.ctx.command_path if err.ctx is not None else "t3"
    cmd = "t3" + cmd[cmd.index(" ") :] if " " in cmd else "t3"
    return f"error: {err.format_message()} (see {cmd} --help)"


def _refuse_empty(args: list[str]) -> None:
    """An empty argument is a mistake whatever it was meant to give: an empty path would name the working
    directory (a reproduction written there), an empty name nothing. Refused before anything runs."""
    from t3.errors import ConfigError

    for i, a in enumerate(args):
        if a.startswith("--") and a.endswith("=") and "=" not in a[:-1]:
            raise ConfigError(f"{a[:-1]}: an empty value; give one")
        if a == "":
            opt = args[i - 1] if i > 0 and args[i - 1].startswith("-") else None
            raise ConfigError(
                f"{opt}: an empty value; give one" if opt else "an empty argument; give a value"
            )


# how a number is written on the command line: digits, nothing else (Python's int() and float() also
# take '1_6' for 16, spaces around it, 'inf' and 'nan')
_NUMBER = {
    int: re.compile(r"[+-]?[0-9]+"),
    float: re.compile(r"[+-]?([0-9]+([.][0-9]*)?|[.][0-9]+)([eE][+-]?[0-9]+)?"),
}


def _command_of(args: list[str]) -> tuple[Any, list[str]]:
    """The click command ``args`` run and the arguments after its name."""
    import typer.main

    cmd, i = typer.main.get_command(app), 0
    while hasattr(cmd, "commands"):
        if i < len(args) and args[i] in cmd.commands:
            cmd, i = cmd.commands[args[i]], i + 1
        elif cmd.name == "sweep" and "run" in cmd.commands:  # `t3 sweep SPEC` is `t3 sweep run SPEC`
            cmd = cmd.commands["run"]
        else:
            break
    return cmd, args[i:]


def _refuse_silent_options(args: list[str]) -> None:
    """Two readings of the command line that would change a run without a word, refused before
    anything runs: an option given twice (click keeps the last value: `--tp 8 --tp 16` ran TP 16), and
    a number not written in digits (`--tp 1_6` ran TP 16, `--tokens ' 512'` 512)."""
    import inspect
    import typing

    from t3.errors import ConfigError

    cmd, rest = _command_of(args)
    if hasattr(cmd, "commands") or cmd.callback is None:
        return
    try:
        hints = typing.get_type_hints(inspect.unwrap(cmd.callback))
    except Exception:  # noqa: BLE001 - (every command's hints resolve; a failure leaves the numbers unchecked)
        hints = {}
    by_opt = {
        o: p for p in cmd.params for o in (*p.opts, *getattr(p, "secondary_opts", ())) if o.startswith("-")
    }
    seen: dict[str, str] = {}
    i = 0
    while i < len(rest):
        a = rest[i]
        i += 1
        if a == "--":
            break
        name, eq, inline = a.partition("=")
        p = by_opt.get(name) if a.startswith("-") else None
        if p is None:
            continue
        if not (getattr(p, "multiple", False) or getattr(p, "count", False)):
            if p.name in seen:
                also = "" if seen[p.name] == name else f" (also as {seen[p.name]})"
                raise ConfigError(f"{name}: given twice{also}; give it once")
            seen[p.name] = name
        if getattr(p, "is_flag", False):
            continue
        value = inline if eq else (rest[i] if i < len(rest) else None)
        if not eq:
            i += 1
        kinds = {t for t in typing.get_args(hints.get(p.name)) or (hints.get(p.name),) if t in _NUMBER}
        if value is not None and len(kinds) == 1:
            (kind,) = kinds
            if not _NUMBER[kind].fullmatch(value):
                what = "an integer" if kind is int else "a number"
                raise ConfigError(f"{name}: '{value}' is not {what} written in digits")


def main(argv: list[str] | None = None) -> None:
    """Entry point: runs the command, turns bad input into one line on stderr and an exit status."""
    from t3 import _gc
    from t3.provenance import set_command

    _gc.tune()  # (the collector's older generations would rescan the simulator's caches: t3._gc)
    if os.environ.get("COLUMNS", "").strip() == "0":  # 0 means "width unknown" (as coreutils read it);
        del os.environ["COLUMNS"]  # rich would print every table 0 columns wide, i.e. empty
    args = sys.argv[1:] if argv is None else list(argv)
    set_command(args)
    try:
        _refuse_empty(args)
        _register()
        _refuse_silent_options(args)
        from t3.sim.engine import check_engine

        check_engine()  # an engine choice the environment asks for and cannot have (T3_ENGINE): one line
        code = app(args=args, prog_name="t3", standalone_mode=False)
    except T3Error as err:
        print(f"error: {' '.join(str(err).split())}", file=sys.stderr)
        sys.exit(err.exit_code)
    except _cx.exceptions.UsageError as err:
        if type(err).__name__ != "NoArgsIsHelpError":  # that one has printed the help already
            print(_usage_line(err), file=sys.stderr)
        sys.exit(err.exit_code)
    except typer.Abort:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
    except _cx.exceptions.ClickException as err:
        print(f"error: {err.format_message()}", file=sys.stderr)
        sys.exit(err.exit_code)
    except UnicodeError as err:  # a path or value that cannot be encoded for the system (lone surrogates)
        print(
            f"error: a path or value that is not valid text ({err.reason}); give it in UTF-8", file=sys.stderr
        )
        sys.exit(2)
    except OSError as err:
        # a path the system refuses (too long, a special file, no space left): one line naming it, not a
        # traceback; 1 where the work ran and its output could not be written, 2 for a path given wrong
        where = f"'{err.filename}': " if err.filename is not None else ""
        print(f"error: {where}{err.strerror or err}", file=sys.stderr)
        sys.exit(1 if err.errno in (errno.ENOSPC, errno.EDQUOT, errno.EIO) else 2)
    sys.exit(code if isinstance(code, int) else 0)
