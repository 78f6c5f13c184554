"""Ranks that disagree never produce a result: the handshake before any data moves.

One group per world size (2 and 3) runs every mismatch in sequence: the last rank changes one
argument, every rank must raise the same PeerError naming the field and each rank's value, and a
correct call right after must return the reference's answer (the group stayed usable).
"""

from __future__ import annotations

import functools

import pytest

pytest.importorskip("torch")

from dist_harness import run_group, values  # noqa: E402
from workers import AG_SHAPE, RS_SHAPE, disagreement, world_one  # noqa: E402

M, K, N = RS_SHAPE

# case -> (field named first, the value on the other ranks, the value on the last rank); W = world size
EXPECTED = {
    "M": ("A.shape", lambda W: f"({M}, {K})", lambda W: f"({M + W}, {K})"),
    "N": ("B.shape", lambda W: f"({K}, {N})", lambda W: f"({K}, {N + W})"),
    "K": ("A.shape", lambda W: f"({M}, {K})", lambda W: f"({M}, {K + 1})"),
    "dtype": ("dtype", lambda W: "torch.float32", lambda W: "torch.float64"),
    "plan.pieces": ("plan.pieces", lambda W: "2", lambda W: "4"),
    "plan.local_first": ("plan.local_first", lambda W: "True", lambda W: "False"),
    "plan.reduce": ("plan.reduce", lambda W: "'incremental'", lambda W: "'batched'"),
    "plan-all-peer": ("plan.granularity", lambda W: "'shard'", lambda W: "'ficco'"),
    "algo": ("algo", lambda W: "ring", lambda W: "direct"),
    "scatter_dim": ("scatter_dim", lambda W: "0", lambda W: "1"),
    "op": ("op", lambda W: "matmul_reduce_scatter", lambda W: "matmul_all_reduce"),
    "path": ("path", lambda W: "tile-triggered", lambda W: "reference"),
    "min_flops": ("path", lambda W: "reference", lambda W: "tile-triggered"),
    "tile": ("tile", lambda W: "(5, 7)", lambda W: "(4, 4)"),
    "ag-shard-rows": ("A.shape", lambda W: f"({AG_SHAPE[0]}, {K})", lambda W: f"({AG_SHAPE[0] + 1}, {K})"),
    "ag-reference-dtype": ("dtype", lambda W: "torch.float32", lambda W: "torch.float16"),
}


@functools.cache
def _run(world: int) -> list[dict]:
    return values(run_group(disagreement, world, deadline_s=90.0))


@pytest.mark.parametrize("case", sorted(EXPECTED))
@pytest.mark.parametrize("world", [2, 3])
def test_mismatch_raises_peer_error_on_every_rank(world: int, case: str) -> None:
    field, common, last = EXPECTED[case]
    want = {r: common(world) for r in range(world - 1)} | {world - 1: last(world)}
    for rank, res in enumerate(_run(world)):
        got = res[case]
        assert got["error"] == "PeerError", (rank, got)
        assert got["usable"] is True and got["field"] == field, (rank, got)
        assert got["values"] == want, (rank, got)
        msg = got["message"]
        assert msg.startswith("t3.runtime.") and f"on rank {rank}: " in msg, msg
        assert f"{field}: " in msg and common(world) in msg and last(world) in msg, msg
        assert f"rank {world - 1} has {last(world)}" in msg, msg
        others = "rank 0 has" if world == 2 else "ranks 0 and 1 have"
        assert f"{others} {common(world)}" in msg, msg
        assert "process group is still usable" in msg, msg
        assert got["elapsed"] < 10.0, got  # the op's timeout is 20 s: nobody waited for a peer
        assert got["after"], f"rank {rank}: the correct call after the mismatch failed"


@pytest.mark.parametrize(
    "case,reason",
    [("rejected-M", f"ValueError: scatter_dim 0 size: {M + 1} is not divisible"), ("rejected-plan", "(-cu)")],
)
@pytest.mark.parametrize("world", [2, 3])
def test_a_rank_rejecting_its_arguments_stops_every_rank_at_once(world: int, case: str, reason: str) -> None:
    for rank, res in enumerate(_run(world)):
        got = res[case]
        if rank == world - 1:
            assert got["error"] == "ValueError" and reason.removeprefix("ValueError: ") in got["message"], got
        else:
            assert got["error"] == "PeerError" and got["usable"] and got["field"] == "arguments", got
            assert got["values"][rank] == "accepted", got
            assert (
                got["values"][world - 1].startswith(f"rejected ({reason}")
                or reason in got["values"][world - 1]
            )
            assert f"rank {world - 1} has rejected (" in got["message"], got
        assert got["elapsed"] < 10.0, got
        assert got["after"], f"rank {rank}: the correct call after the rejection failed"


def test_every_differing_field_is_listed() -> None:
    got = _run(2)[0]["K"]
    assert got["differing"] == ("A.shape", "B.shape") and "also differing: B.shape" in got["message"]
    got = _run(2)[0]["op"]
    assert got["differing"][0] == "op" and "scatter_dim" in got["differing"]


def test_handshake_time_is_reported_and_the_opt_out_skips_it() -> None:
    for res in _run(2):
        on, off = res["handshake_s"]
        assert on > 0.0 and off == 0.0


def test_world_size_one_path_tiled_runs_tiled() -> None:
    (res,) = values(run_group(world_one, 1))
    for key, (ok, path, reason, handshake_s) in res.items():
        assert ok, key
        assert handshake_s == 0.0, key  # nobody to agree with: no collective
        if key.endswith(":tiled"):
            assert path == "tile-triggered" and "world size 1: no transfers" in reason, (key, reason)
        else:
            assert path == "reference" and reason == "world size 1: nothing to communicate", (key, reason)
    assert len(res) == 2 * (5 + 5 + 4)


def test_compare_names_every_rank_value() -> None:
    """The decision is a pure function of the gathered records (every rank computes it alike)."""
    import torch

    from t3.runtime import Plan
    from t3.runtime.handshake import _encode, compare, describe

    A, B = torch.zeros(4, 3), torch.zeros(3, 5)
    recs = [
        _encode(describe("op", 3, a, B, "reference", "ring", (2, 2), Plan()))
        for a in (A, torch.zeros(6, 3), A)
    ]
    assert compare("op", 1, recs[:1] + recs[2:]) is None
    err = compare("op", 1, recs)
    assert err is not None and err.field == "A.shape" and err.differing == ("A.shape",)
    assert "A.shape: ranks 0 and 2 have (4, 3), rank 1 has (6, 3)" in str(err)
    assert err.values == {0: "(4, 3)", 1: "(6, 3)", 2: "(4, 3)"} and err.group_usable
    bad = compare("op", 0, [recs[0], b"xx" + recs[0][2:]])
    assert bad is not None and bad.field == "handshake format"
