import pytest

from t3.config.hardware import load_hardware


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
