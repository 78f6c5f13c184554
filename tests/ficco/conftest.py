import pytest


@pytest.fixture
def no_simulation(monkeypatch):
    """Makes any engine run or exploration fail: selection must be static."""
    import t3.ficco.losses
    import t3.sim.engine

    def boom(*a, **k):
        raise AssertionError("selection must not simulate")

    monkeypatch.setattr(t3.sim.engine.Engine, "run", boom)
    monkeypatch.setattr(t3.ficco.losses, "explore", boom)
