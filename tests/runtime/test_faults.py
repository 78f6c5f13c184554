"""A peer that dies or stops answering mid-operation: the others raise PeerError within the
timeout. The harness kills any rank still running at its deadline, so these tests cannot hang."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from dist_harness import run_group  # noqa: E402
from workers import Case, peer_failure  # noqa: E402

TIMEOUT_S = 4.0
SLACK_S = 6.0  # process scheduling on a loaded 2-core CI machine; a hang would take the harness deadline

SCENARIOS = [
    ("rs-ring-exit", 3, Case("rs", "ring", "shard", "m", "int"), 1, "exit"),
    ("ag-ring-exit", 3, Case("ag", "ring", "ficco", "m", "int"), 1, "exit"),
    ("ar-direct-exit", 2, Case("ar", "direct", "shard", "m", "int"), 0, "exit"),
    ("rs-direct-hang", 2, Case("rs", "direct", "ficco", "n", "int"), 1, "hang"),
    ("ag-direct-hang", 3, Case("ag", "direct", "shard", "m", "int"), 2, "hang"),
]


@pytest.mark.parametrize(
    ("name", "world", "case", "victim", "mode"), SCENARIOS, ids=[s[0] for s in SCENARIOS]
)
def test_survivors_raise_peer_error_within_timeout(name, world, case, victim, mode) -> None:
    results = run_group(
        peer_failure, world, case, victim, mode, TIMEOUT_S, deadline_s=60.0, pg_timeout_s=30.0
    )
    victim_res = results[victim]
    if mode == "exit":
        assert victim_res.status == "exited", victim_res
    for r in results:
        if r.rank == victim:
            continue
        assert r.status == "ok", f"rank {r.rank}: {r.status}: {r.value}"
        v = r.value
        assert v["error"] == "PeerError", v
        assert f"rank {r.rank}" in v["message"] and "process group is unusable" in v["message"], v
        assert v["elapsed"] < TIMEOUT_S + SLACK_S, v
        if mode == "hang" and v["peer"] is not None:
            # the peer named is the one this rank was waiting for; in a 2-rank group, the victim
            assert world > 2 or v["peer"] == victim, v
