"""Reading a user's TOML file (hardware, model, sweep spec) with one-line errors naming the file."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from t3.errors import ConfigError


def read_toml(path: str | Path, what: str) -> dict[str, Any]:
    """The parsed TOML document at ``path``; :class:`ConfigError` (``what: ...``) if it is missing, a
    directory, unreadable, not UTF-8 or not valid TOML."""
    return parse_toml(read_text(path, what), f"{what} '{Path(path)}'")


def read_text(path: str | Path, what: str, error: type[Exception] = ConfigError) -> str:
    """The UTF-8 text of the file at ``path``; ``error`` (``what: ...``, default :class:`ConfigError`) if
    it is missing, a directory, not a regular file, unreadable or not UTF-8."""
    p = Path(path)
    if p.is_dir():
        raise error(f"{what}: '{p}' is a directory, not a TOML file")
    if not p.is_file():
        if p.exists():  # (a device, a pipe, a socket: read in place it may never end or be empty)
            raise error(f"{what}: '{p}' is not a regular file (a TOML file is read from disk)")
        raise error(f"{what}: file '{p}' not found")
    try:
        return p.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise error(f"{what} '{p}': not a UTF-8 text file ({err.reason} at byte {err.start})") from None
    except OSError as err:
        raise error(f"{what} '{p}': cannot read: {err.strerror}") from None


def parse_toml(text: str, origin: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{origin}: not valid TOML: {err}") from None
