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
    ("rs-ring-exit", 3, Case("rs", "ring", "shard", "m", "int"), 1, "exit", "tiled"),
    ("ag-ring-exit", 3, Case("ag", "ring", "ficco", "m", "int"), 1, "exit", "tiled"),
    ("ar-direct-exit", 2, Case("ar", "direct", "shard", "m", "int"), 0, "exit", "tiled"),
    ("rs-direct-hang", 2, Case("rs", "direct", "ficco", "n", "int"), 1, "hang", "tiled"),
    ("ag-direct-hang", 3, Case("ag", "direct", "shard", "m", "int"), 2, "hang", "tiled"),
    ("rs-reference-hang", 2, Case("rs", "ring", "shard", "m", "int"), 0, "hang", "reference"),
    ("ag-all-peer-exit", 3, Case("ag", "direct", "all-peer", "m", "int"), 1, "exit", "tiled"),
    ("rs-all-peer-hang", 2, Case("rs", "direct", "all-peer", "n", "int"), 1, "hang", "tiled"),
]


@pytest.mark.parametrize(
    ("name", "world", "case", "victim", "mode", "path"), SCENARIOS, ids=[s[0] for s in SCENARIOS]
)
def test_survivors_raise_peer_error_within_timeout(name, world, case, victim, mode, path) -> None:
    results = run_group(
        peer_failure, world, case, victim, mode, TIMEOUT_S, path, deadline_s=60.0, pg_timeout_s=30.0
    )
    victim_res = results[victim]
    if mode == "exit":
        assert victim_res.status == "exited", victim_res
    raised = 0
    for r in results:
        if r.rank == victim:
            continue
        # never a hang: every survivor reported back (the harness kills ranks at its deadline)
        assert r.status == "ok", f"rank {r.rank}: {r.status}: {r.value}"
        v = r.value
        if v["error"] is None:
            # a survivor that had received everything it needed before the victim died may finish
            # (e.g. in a 3-rank ring the rank two hops downstream); one that waited for it may not
            assert mode == "exit" and world > 2, (r.rank, v)
            continue
        raised += 1
        assert v["error"] == "PeerError", v
        assert f"rank {r.rank}" in v["message"] and "process group is unusable" in v["message"], v
        assert v["elapsed"] < TIMEOUT_S + SLACK_S, v
        if world == 2 and v["peer"] is not None:
            assert v["peer"] == victim, v  # the error names the peer that failed
    assert raised >= 1
    if mode == "hang":
        assert raised == world - 1  # everybody waits for a rank that never calls
