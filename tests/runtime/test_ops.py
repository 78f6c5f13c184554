"""Tile-triggered ops against torch.distributed's own collectives, world sizes 2, 3, 4 (gloo).

Every runtime buffer starts as NaN (T3_RUNTIME_POISON), so an output element the runtime never
writes fails the comparison. Integer-valued inputs must match bit for bit; float inputs within a
tolerance (the GEMM is tiled and the reduction order differs from gloo's).
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

pytest.importorskip("torch")

from dist_harness import run_group, values  # noqa: E402
from workers import (  # noqa: E402
    CASES,
    all_peer_world4,
    by_schedule_name,
    correctness,
    fallbacks,
    invalid_arguments,
)

WORLDS = (2, 3, 4)


@functools.cache
def _correctness(world: int) -> list[dict]:
    return values(run_group(correctness, world, deadline_s=150.0))


def _check(entry: dict, exact: bool, what: str) -> None:
    out, ref = entry["out"], entry["ref"]
    assert out["shape"] == ref["shape"], what
    assert out["dtype"] == ref["dtype"], what
    assert out["stride"] == ref["stride"], what
    assert not np.isnan(out["value"]).any(), f"{what}: unwritten (NaN) output elements"
    if exact:
        np.testing.assert_array_equal(out["value"], ref["value"], err_msg=what)
    else:
        np.testing.assert_allclose(out["value"], ref["value"], rtol=1e-5, atol=1e-5, err_msg=what)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
@pytest.mark.parametrize("world", WORLDS)
def test_tile_triggered_matches_reference(world: int, case) -> None:
    for rank, res in enumerate(_correctness(world)):
        entry = res[case.id]
        assert entry["stats"]["path"] == "tile-triggered", entry["stats"]
        exact = case.data in ("int", "bf16", "f16")
        _check(entry, exact=exact, what=f"world {world} rank {rank} {case.id}")


@pytest.mark.parametrize("op", ["rs", "ar", "ag"])
@pytest.mark.parametrize("world", WORLDS)
def test_reference_path_matches(world: int, op: str) -> None:
    for rank, res in enumerate(_correctness(world)):
        entry = res[f"reference-{op}"]
        assert entry["stats"]["path"] == "reference"
        _check(entry, exact=True, what=f"world {world} rank {rank} reference {op}")


@pytest.mark.parametrize("world", WORLDS)
def test_stats_report_work_and_bytes(world: int) -> None:
    res = _correctness(world)[0]
    rs = res["rs-sd0-ring-shard-int-t5x7"]["stats"]
    # ring RS: W-1 chunks of (M/W x N) float32 leave every rank
    assert rs["bytes_sent"] == (world - 1) * (24 // world) * 24 * 4
    assert rs["regions"] == world
    assert rs["tiles"] > 0 and rs["produce_s"] > 0 and rs["total_s"] >= rs["produce_s"]
    ar = res["ar-direct-ficco-m-int-t5x7"]["stats"]
    assert ar["bytes_sent"] == 2 * (world - 1) * (24 // world) * 24 * 4  # RS + AG, direct
    assert ar["regions"] == 2 * world
    assert "ficco" in ar["plan"]


def test_fallback_says_why() -> None:
    res = values(run_group(fallbacks, 3))
    for r in res:
        assert r["small"][0] and r["small"][1] == "reference" and "small problem" in r["small"][2]
        assert r["big-enough"][0] and r["big-enough"][1] == "tile-triggered"
        assert r["non-contiguous"][0] and r["non-contiguous"][1] == "tile-triggered"
        assert r["ar-uneven"][0] and r["ar-uneven"][1] == "reference" and "not divisible" in r["ar-uneven"][2]


EXPECTED_NAME = {
    "A": "A:",
    "A-3d": "A:",
    "B.dtype": "B.dtype",
    "A.dtype-int": "A.dtype",
    "B.device": "B.device",
    "B-inner": "B:",
    "scatter_dim": "scatter_dim",
    "scatter_dim-uneven": "scatter_dim",
    "scatter_dim-uneven-reference": "scatter_dim",
    "algo": "algo",
    "tile": "tile",
    "tile-type": "tile",
    "plan": "plan",
    "plan.split_dim": "plan.split_dim",
    "plan.pieces": "plan.pieces",
    "plan.split_dim-ag": "plan.split_dim",
    "A rows (M)": "A rows (M)",
    "path": "path",
    "timeout": "timeout",
    "group": "group",
    "check_peers": "check_peers",
    "plan.reduce-ring": "plan.reduce",
    "plan.reduce-ag": "plan.reduce",
    "plan-cu": "(-cu)",
}


@functools.cache
def _invalid() -> list[dict]:
    return values(run_group(invalid_arguments, 3))


@pytest.mark.parametrize("name", sorted(EXPECTED_NAME))
def test_bad_arguments_raise_value_error_naming_them(name: str) -> None:
    for res in _invalid():
        kind, msg = res[name]
        assert kind == "ValueError", (name, kind, msg)
        assert msg.startswith(EXPECTED_NAME[name]) or EXPECTED_NAME[name] in msg, (name, msg)


def test_bad_arguments_move_no_data() -> None:
    # every rank rejected the same call (stating so in the handshake); had any rejected call sent or
    # received operand data, the ranks would be out of step here
    assert all(res["after"] for res in _invalid())


def test_uninitialized_group_is_a_value_error() -> None:
    import torch
    import torch.distributed as dist

    from t3.runtime import matmul_reduce_scatter

    assert not dist.is_initialized()
    with pytest.raises(ValueError, match="group: torch.distributed is not initialized"):
        matmul_reduce_scatter(torch.ones(4, 4), torch.ones(4, 4))


def _reductions(op: str, name: str, world: int, algo: str) -> int:
    """Closed form: additions of received partial sums on one rank. Ring: one per step and piece;
    direct, incremental: one per peer and piece; batched: one per transfer step (FiCCO all-peer: W
    steps of one piece each; shard level: one step carrying everything)."""
    from t3.runtime import Plan

    if op == "ag":
        return 0
    plan = Plan.from_schedule(name, world)
    if plan.reduce == "batched":
        return world if plan.all_peer else 1
    return (world - 1) * plan.n_pieces


def test_ficco_schedule_names_execute() -> None:
    for world in (2, 3):
        for r in values(run_group(by_schedule_name, world)):
            for key, (ok, _plan, reductions, algo) in r.items():
                op, name = key.split(":")
                assert ok, f"world {world}: {key} differs from the reference"
                assert reductions == _reductions(op, name, world, algo), (world, key, reductions)
            W = world
            assert r[f"rs:shard-g{W}-M-dma"][1] == "shard, local first"
            assert r[f"rs:shard-g{W}-M-dma-ll"][1] == "shard, local last"
            assert r[f"rs:shard-g{2 * W}-N-dma-lf"][1] == "ficco(split=n, pieces=2), local first"
            assert r["rs:bulk-g1-M-dma"][1] == "shard, no overlap"
            assert r[f"ag:shard-g{2 * W}-K-dma"][1] == "ficco(split=k, pieces=2), local first"
            assert r[f"ag:shard-g{2 * W}-M-dma-ll"][1] == "ficco(split=m, pieces=2), local last"
            assert (
                r[f"rs:ficco-g{W * W}-N-dma"][1]
                == f"ficco all-peer(split=n, pieces={W}, groups={W * W}), local first"
            )
            assert r[f"rs:ficco-g{W}-N-dma-s1-rb"][1] == (
                f"ficco all-peer(split=n, pieces={W}, groups={W}), local first, batched reductions"
            )
            assert r["ag:ficco-g1-M-dma"][1] == f"ficco all-peer(split=m, pieces={W}, groups=1), local first"
            assert r[f"ar:shard-g{2 * W}-N-dma-rb"][2] == 1  # everything in one reduction
        assert (world == 2) == ("ag:ficco-g2-K-dma" in r)


def test_all_peer_schedules_are_bit_exact_at_world_size_4() -> None:
    for r in values(run_group(all_peer_world4, 4)):
        assert len(r) == 9 and all(r.values()), r


@pytest.mark.parametrize(
    "name,world,expect",
    [
        ("shard-g8-M-dma", 8, ("shard", "m", 1, True, False, 0, True, "incremental")),
        ("shard-g16-K-dma-ll", 8, ("ficco", "k", 2, True, False, 0, False, "incremental")),
        ("shard-g32-N-dma-rb", 8, ("ficco", "n", 4, True, False, 0, True, "batched")),
        ("shard-g16-M-dma-s1-lf", 8, ("ficco", "m", 2, True, False, 0, True, "incremental")),
        ("bulk-g1-M-dma", 4, ("shard", "m", 1, False, False, 0, None, "incremental")),
        ("bulk-g1-M-dma-lf", 4, ("shard", "m", 1, False, False, 0, None, "incremental")),
        ("ficco-g64-M-dma", 8, ("ficco", "m", 8, True, True, 64, True, "incremental")),
        ("ficco-g8-K-dma-ll-rb", 8, ("ficco", "k", 8, True, True, 8, False, "batched")),
        ("ficco-g2-N-dma", 2, ("ficco", "n", 2, True, True, 2, True, "incremental")),
    ],
)
def test_plan_from_schedule_name(name, world, expect) -> None:
    """Every part of the name lands in the plan (none is dropped)."""
    from t3.runtime import Plan

    p = Plan.from_schedule(name, world)
    assert tuple(v for _, v in p.fields()) == expect


def test_all_peer_order_matches_the_simulator_units() -> None:
    """The runtime's FiCCO order is the simulator's unit order (t3.schedules.ficco.unit_order) with
    peer offset o as rank r + o; for GEMM -> RS the own chunk comes last (runtime convention)."""
    from t3.ficco.space import FiccoOperator, parse_name
    from t3.runtime import Plan
    from t3.schedules.ficco import unit_order

    W, r = 4, 1
    for split in ("M", "K"):
        plan = Plan.from_schedule(f"ficco-g{W}-{split}-dma", W)
        sim = unit_order(FiccoOperator("ag-gemm", 64, 64, 64, gpus=W), parse_name(f"ficco-g{W}-{split}-dma"))
        assert plan.all_peer_order(r, W, own_first=True) == [((r + o) % W, j) for o, j in sim]
        last = unit_order(
            FiccoOperator("ag-gemm", 64, 64, 64, gpus=W), parse_name(f"ficco-g{W}-{split}-dma-ll")
        )
        assert plan.all_peer_order(r, W, own_first=False) == [((r + o) % W, j) for o, j in last]
    groups = Plan.from_schedule("ficco-g8-M-dma", W).groups_of(list(range(16)))  # type: ignore[arg-type]
    assert groups == [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9], [10, 11], [12, 13], [14, 15]]


@pytest.mark.parametrize(
    "name,needle",
    [
        ("ficco-g4-K-dma", "must hold one piece"),
        ("ficco-g4-K-dma-ll", "must hold one piece"),
        ("ficco-g3-M-dma", "do not split into 3 compute groups"),
        (
            "shard-g8-M-dma-p1",
            r"prefetch bound \(-p1\).*closest schedule the runtime runs is 'shard-g8-M-dma'",
        ),
        ("shard-g8-M-dma-s2", r"two compute streams \(-s2\).*runs is 'shard-g8-M-dma'"),
        ("shard-g8-M-cu", r"compute units \(-cu\).*runs is 'shard-g8-M-dma'"),
        ("bulk-g1-M-cu", r"\(-cu\).*runs is 'bulk-g1-M-dma'"),
        ("ficco-g8-M-cu-s2-rb", r"\(-s2\).*\(-cu\).*runs is 'ficco-g8-M-dma-rb'"),
        ("ficco-g8-M-cu-p1-ll", r"\(-p1\).*\(-cu\).*runs is 'ficco-g8-M-dma-ll'"),
        ("shard-g8-M-ep-rsum", r"\(-ep\).*\(-rsum\).*runs is 'shard-g8-M-dma-rb'"),
        ("shard-g8-M-dma-fk", r"\(-fk\).*runs is 'shard-g8-M-dma'"),
        ("shard-g8-M-dma-s2-ll-rsum", r"\(-s2\).*\(-rsum\).*runs is 'shard-g8-M-dma-ll-rb'"),
        ("shard-g8-M-dma-s2-ll-rsum-sb", r"\(-s2\).*\(-rsum\).*\(-sb\).*runs is 'shard-g8-M-dma-ll-rb'"),
        ("bulk-g1-M-dma-rb", "bulk is one GEMM"),
        ("bulk-g1-M-dma-ll", "bulk is one GEMM"),
        ("bulk-g8-M-dma", "bulk is one GEMM"),
        ("bulk-g1-K-dma", "bulk is one GEMM"),
        ("shard-g12-M-dma", "not a multiple of the world size"),
        ("shard-8-M", "does not match"),
    ],
)
def test_unsupported_schedule_names_are_value_errors(name, needle) -> None:
    from t3.runtime import Plan

    with pytest.raises(ValueError, match=needle):
        Plan.from_schedule(name, 8)


def test_every_suffix_the_grammar_has_is_executed_or_refused() -> None:
    """The suffix alphabet of t3.ficco.space's grammar: each one either changes the plan (executed)
    or raises (refused); this test fails when the grammar grows a suffix the runtime does not know."""
    from t3.ficco.space import GRAMMAR, NAME_RE
    from t3.runtime import Plan

    base = Plan.from_schedule("shard-g16-M-dma", 8)
    executed = {"-ll": ("local_first", False), "-rb": ("reduce", "batched")}
    same = {"-lf", "-s1"}  # the defaults spelled out: local first, one stream
    refused = {"-cu", "-ep", "-s2", "-p1", "-rsum", "-sb", "-fk"}  # executors -cu / -ep replace -dma
    assert NAME_RE.pattern.count("(?:-") == 6 and GRAMMAR.count("[-") == 6, "the grammar changed"
    assert "(cu|dma|ep)" in NAME_RE.pattern, "the executors changed"
    for suffix, (field, value) in executed.items():
        assert dict(Plan.from_schedule("shard-g16-M-dma" + suffix, 8).fields())[field] == value
        assert dict(base.fields())[field] != value
    for suffix in same:
        assert Plan.from_schedule("shard-g16-M-dma" + suffix, 8) == base
    for suffix in refused:
        name = "shard-g16-M" + suffix if suffix in ("-cu", "-ep") else "shard-g16-M-dma" + suffix
        with pytest.raises(ValueError, match=f"\\({suffix}\\)"):
            Plan.from_schedule(name, 8)


def test_local_order_is_the_simulator_unit_order() -> None:
    """With direct transfers, the region order the jobs use for shard-level names (g = W^2, one
    region per simulator unit) is the simulator's unit order, peer offset o as rank r + o; -ll moves
    the own shard / chunk last."""
    from types import SimpleNamespace

    import torch

    from t3.ficco.space import FiccoOperator, parse_name
    from t3.runtime import Plan
    from t3.runtime.gather_gemm import GatherGemm
    from t3.runtime.gemm_collective import GemmCollective, Layout
    from t3.schedules.ficco import unit_order

    W, r = 4, 1
    peers = SimpleNamespace(rank=r, world=W, op="test", timeout=1.0)
    A, B = torch.zeros(16, 16), torch.zeros(16, 16)
    for op, splits in (("gemm-rs", ("M", "N")), ("ag-gemm", ("M", "K"))):
        for split in splits:
            for suffix in ("", "-ll"):
                name = f"shard-g{W * W}-{split}-dma{suffix}"
                plan = Plan.from_schedule(name, W)
                sim = unit_order(FiccoOperator(op, 64, 64, 64, gpus=W), parse_name(name))
                if op == "gemm-rs":
                    job = GemmCollective(A, B, peers, Layout(16, 16, W, 0, split.lower(), W), "direct", plan,
                                         (4, 4), all_reduce=False)  # fmt: skip
                    order = job.order
                else:
                    order = GatherGemm(A, B, peers, "direct", plan, (4, 4)).order()
                assert order == [((r + o) % W, j) for o, j in sim], name


def test_all_peer_plans_need_direct_transfers_and_whole_pieces() -> None:
    from t3.runtime import Plan, validate

    with pytest.raises(ValueError, match="algo='direct'"):
        validate.options("ring", (4, 4), "ficco-g4-M-dma", "auto", 1.0, 2)
    with pytest.raises(ValueError, match="world size .2. pieces"):
        validate.options("direct", (4, 4), Plan("ficco", "m", 3, all_peer=True), "auto", 1.0, 2)
    with pytest.raises(ValueError, match="plan.all_peer"):
        Plan("shard", all_peer=True)
    assert validate.options("direct", (4, 4), "ficco-g4-M-dma", "auto", 1.0, 2)[1].all_peer
