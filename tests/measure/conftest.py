"""Helpers of the measurement kit's tests: the ``t3`` command in this process, and a device table."""

from __future__ import annotations

import pytest

GPU_DEVICE = {
    "gpu": "NVIDIA H100 80GB HBM3",
    "driver": "580.159.04",
    "runtime": "CUDA 13.0",
    "torch": "2.11.0+cu130",
    "command": "t3 measure --out m",
    "date": "2026-01-01T00:00:00Z",
}


@pytest.fixture
def gpu_device() -> dict[str, str]:
    """A [row.device] table as a GPU run writes it."""
    return dict(GPU_DEVICE)


@pytest.fixture
def t3cli(capsys):
    """``t3cli(*argv) -> (exit status, stdout, stderr)`` through the command's entry point."""
    from t3.cli.main import main

    def run(*argv: str) -> tuple[int, str, str]:
        code: int | str | None = 0
        try:
            main([str(a) for a in argv])
        except SystemExit as e:
            code = e.code
        out = capsys.readouterr()
        return (0 if code is None else int(code)), out.out, out.err

    return run
