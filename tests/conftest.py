import os

import pytest
from hypothesis import settings

from t3.config.hardware import load_hardware

# Property tests draw the same examples on every run (CI is deterministic); T3_HYPOTHESIS=explore
# draws new ones each run, and T3_HYPOTHESIS_EXAMPLES=N raises the count of the invalid-input
# properties, to hunt for inputs the fixed draw does not reach.
settings.register_profile("ci", derandomize=True, database=None)
settings.register_profile("explore", derandomize=False, database=None)
settings.load_profile(os.environ.get("T3_HYPOTHESIS", "ci"))


@pytest.fixture(scope="session")
def paper_hw():
    return load_hardware("paper-80cu")


def assert_same_outcome(fast, full):
    """Two outcomes of one configuration (symmetric fast path vs all GPUs) agree on every figure."""
    assert fast.time_s == pytest.approx(full.time_s, rel=1e-9)
    for k in fast.breakdown_s:
        assert fast.breakdown_s[k] == pytest.approx(full.breakdown_s[k], rel=1e-9, abs=1e-15)
    for k in fast.dram_bytes:
        assert fast.dram_bytes[k] == pytest.approx(full.dram_bytes[k], rel=1e-12)
    assert fast.link_bytes == pytest.approx(full.link_bytes)


@pytest.fixture
def no_simulation(monkeypatch):
    """Makes any engine run or FiCCO exploration fail: selection must be static."""
    import t3.ficco.losses
    import t3.sim.engine

    def boom(*a, **k):
        raise AssertionError("selection must not simulate")

    monkeypatch.setattr(t3.sim.engine.Engine, "run", boom)
    monkeypatch.setattr(t3.ficco.losses, "explore", boom)


# ---- the measurement kit's tests (tests/measure): the `t3` command in this process, a device table
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
