"""Named implementations of fused GEMM + collective kernels (executor ``ep``, ``-fk``, ``-rsum``)
against closed forms, limits and the direction of their mechanisms."""

import re
from importlib import resources

import pytest

from t3.config.hardware import load_hardware
from t3.errors import ConfigError
from t3.ficco.losses import LossModel
from t3.ficco.space import FiccoOperator, candidates, legality, parse_name
from t3.ops.gemm import add_gemm, plan_gemm
from t3.schedules.ficco import epilogue_breakdown, ficco_schedule
from t3.sim.engine import Engine
from t3.sim.schedule import ScheduleBuilder, hbm_timing
from t3.workload.sublayers import GemmShape

N = 8
# chunks of 1024 rows and 4096 columns: whole 256x128 tiles, so the GEMM model's per-chunk bytes are exact
RS = FiccoOperator("gemm-rs", 8192, 4096, 1024)
FLUX_RS = "shard-g8-M-ep-rsum"


def _hw(**fused):
    return load_hardware("h100-8", {f"fused.{k}": v for k, v in fused.items()})


def _run(fop, hw, name, **kw):
    return Engine().run(ficco_schedule(fop, hw, parse_name(name), **kw))


def _span(res, key) -> float:
    (op,) = [o for o in res.schedule.ops if o.key == key]
    return res.end[op.id] - res.start[op.id]


def _block(fop) -> float:
    return fop.m // N * fop.n * fop.eb  # one owner's rows of the output


def _reduction_s(hw, fop) -> float:
    """A library sum kernel over the N stacked partials: launch + (N + 1) blocks at its HBM cap."""
    c = _block(fop)
    cap = min(
        hw.fused.reduce_hbm_fraction * hw.hbm.bandwidth_Bps,
        hw.hbm.effective_Bps * hbm_timing(hw).eta(1 / (N + 1)),
    )
    return hw.compute.kernel_launch_s + (N + 1) * c / cap


def _owner_plan(fop, hw):
    """The fused kernel's GEMM: one plan, rows in N chunks (local chunk first), remote chunks uncached."""
    return plan_gemm(GemmShape(fop.m, fop.n, fop.k, fop.dtype), hw, chunks=N, bypass=frozenset(range(1, N)))


@pytest.mark.parametrize("store_Bps", [1e9, 2e9, 1e10])
def test_epilogue_store_gemm_rs_alone_equals_its_closed_form(store_Bps):
    """Idle node: launch + every wave alone + every wave's drain (one link latency, then the remote bytes
    at the slower of the wave's CUs' store rate and the switch port) + the sum kernel."""
    hw = _hw(store_Bps_per_cu=store_Bps, reduce_hbm_fraction=0.3)
    plan = _owner_plan(RS, hw)
    link = hw.link.bandwidth_Bps * hw.collective.link_efficiency
    drain, regimes = 0.0, set()
    for w in plan.waves:
        remote = sum(v for ch, v in w.write_bytes.items() if ch != 0)
        if remote:
            cu_s, link_s = remote / (w.cus_used * store_Bps), remote / link
            regimes.add(cu_s > link_s)
            drain += hw.link.latency_s + max(cu_s, link_s)
    closed = plan.alone_s(hw) + drain + _reduction_s(hw, RS)
    assert _run(RS, hw, FLUX_RS).makespan == pytest.approx(closed, rel=1e-9)
    assert epilogue_breakdown(RS, hw, parse_name(FLUX_RS))["total_s"] == pytest.approx(closed, rel=1e-9)
    assert regimes == {store_Bps * hw.compute.cus < link}  # the CU-bound and the link-bound drains


@pytest.mark.parametrize("fraction", [0.2, 0.4])
@pytest.mark.parametrize("name", [FLUX_RS, "shard-g8-M-dma-rsum", "ficco-g8-M-cu-s2-rsum"])
def test_sum_kernel_reaches_its_fraction_of_hbm(name, fraction):
    """The reduction kernel alone at the end takes launch + (N reads + 1 write of a block) / (fraction x
    HBM peak), whatever moved the partials; its traffic is that of N reads and one write."""
    hw = _hw(reduce_hbm_fraction=fraction)
    assert fraction * hw.hbm.bandwidth_Bps < hw.hbm.effective_Bps * hbm_timing(hw).eta(1 / (N + 1))
    res = _run(RS, hw, name)
    c = _block(RS)
    expect = hw.compute.kernel_launch_s + (N + 1) * c / (fraction * hw.hbm.bandwidth_Bps)
    assert _span(res, "rsum") == pytest.approx(expect, rel=1e-9)
    (op,) = [o for o in res.schedule.ops if o.key == "rsum"]
    assert op.traffic == {"rs_read": pytest.approx(N * c), "rs_write": pytest.approx(c)}
    assert res.end[op.id] == pytest.approx(res.makespan, rel=1e-12)  # it starts after every partial landed


def test_free_stores_reduce_to_the_gemm_alone_plus_the_reduction():
    """Stores that cost nothing (no CU time, link or latency): the fused kernel is its GEMM alone (the
    same plan, every tile written once, remote ones in their owners' HBM) followed by the sum kernel."""
    hw = load_hardware("h100-8", {"fused.store_Bps_per_cu": 1e30, "link.bandwidth_Bps": 1e30,
                                  "link.latency_s": 0.0})  # fmt: skip
    b = ScheduleBuilder("alone", hw, N)
    add_gemm(b, 0, _owner_plan(RS, hw))
    gemm = Engine().run(b.build()).makespan
    assert _run(RS, hw, FLUX_RS).makespan == pytest.approx(gemm + _reduction_s(hw, RS), rel=1e-9)


def test_the_epilogue_moves_the_reduce_scatter_bytes_once():
    hw = _hw()
    t = ficco_schedule(RS, hw, parse_name(FLUX_RS)).traffic_per_gpu()
    out = RS.m * RS.n * RS.eb
    assert t["link"] == pytest.approx(RS.comm_bytes())  # (N-1)/N of the output, as the library's RS
    assert t["gemm_write"] == pytest.approx(out)  # every tile written once, locally or at its owner
    assert t["rs_read"] == pytest.approx(N * _block(RS)) and t["rs_write"] == pytest.approx(_block(RS))


@pytest.mark.parametrize("m", [16384, 32768])
def test_h100_fused_gemm_rs_loses_at_large_m_because_of_its_mechanisms(m):
    """The direction, not a fitted number. A wave's stores drain after it computed (at best at the
    link's rate: the bytes NCCL's reduce-scatter moves), and torch.sum then reads N partials at a
    fraction of HBM: the fused kernel is slower than GEMM + reduce-scatter for any store rate at the
    published fractions (23-43 %), slower the slower either mechanism is, and faster once both are free."""
    fop = FiccoOperator("gemm-rs", m, 8192, 3584)
    bulk = _run(fop, _hw(), "bulk-g1-M-cu").makespan

    def speedup(**fused):
        return bulk / _run(fop, _hw(**fused), FLUX_RS).makespan

    grid = {(st, fr): speedup(store_Bps_per_cu=st, reduce_hbm_fraction=fr)
            for st in (1e9, 2e9, 1e10, 1e30) for fr in (0.23, 0.43)}  # fmt: skip
    assert max(grid.values()) < 1.0
    for fr in (0.23, 0.43):  # a slower drain loses more
        assert grid[(1e9, fr)] < grid[(2e9, fr)] <= grid[(1e10, fr)] <= grid[(1e30, fr)]
    for st in (1e9, 2e9, 1e10, 1e30):  # a slower sum kernel loses more
        assert grid[(st, 0.23)] < grid[(st, 0.43)]
    free = load_hardware("h100-8", {"fused.store_Bps_per_cu": 1e30, "fused.reduce_hbm_fraction": 1.0,
                                    "link.bandwidth_Bps": 1e30, "link.latency_s": 0.0})  # fmt: skip
    assert bulk / _run(fop, free, FLUX_RS).makespan > 1.0


def test_one_fused_kernel_waits_tile_wise_and_adds_no_decomposition():
    """All-gather + GEMM as one kernel (-fk): with free links and copy engines and the copies' HBM
    traffic kept apart (ideal mode) it is exactly its GEMM alone; with real transfers a wave starts
    only after the shards of its chunks landed; its decomposition loss is that of one kernel (edge tiles
    of the chunks), below that of eight kernels."""
    hw = load_hardware("h100-8")
    fop = FiccoOperator("ag-gemm", 8192, 4224, 2048)  # a chunk = 4 x 33 tiles = one wave
    free = load_hardware("h100-8", {"link.bandwidth_Bps": 1e30, "link.latency_s": 0.0,
                                    "dma.bandwidth_Bps": 1e30, "dma.command_overhead_s": 0.0})  # fmt: skip
    plan = plan_gemm(GemmShape(fop.m, fop.n, fop.k, fop.dtype), free, chunks=N)
    t = _run(fop, free, "shard-g8-M-dma-fk", mode="ideal").makespan
    assert t == pytest.approx(plan.alone_s(free), rel=1e-9)
    res = _run(fop, hw, "shard-g8-M-dma-fk")
    end = {o.key: res.end[o.id] for o in res.schedule.ops}
    start = {o.key: res.start[o.id] for o in res.schedule.ops}
    plan = plan_gemm(GemmShape(fop.m, fop.n, fop.k, fop.dtype), hw, chunks=N)
    waited = 0
    for w in plan.waves:
        arrivals = [end[f"d.s{ch}"] for ch, _, _ in w.segments if ch]  # chunk ch = the shard of offset ch
        if arrivals:
            assert start[f"f.L{w.index}"] >= max(arrivals) - 1e-15
            waited += start[f"f.L{w.index}"] == pytest.approx(max(arrivals), rel=1e-12)
    assert waited >= 1  # some wave really waited for its shard
    assert start["f.L0"] == 0.0  # the local chunk needs no transfer
    lm = LossModel(fop, hw)
    fk, pieces = lm.evaluate(parse_name("shard-g8-M-dma-fk")), lm.evaluate(parse_name("shard-g8-M-dma"))
    assert fk.decomposition_gemm_s < pieces.decomposition_gemm_s


@pytest.mark.parametrize(
    "name",
    [
        FLUX_RS,
        "ficco-g64-M-ep-rb",
        "shard-g8-M-dma-rb-fk",
        "shard-g8-M-cu-ll-rsum",
        "shard-g8-M-dma-s2-ll-rsum-sb",
    ],
)
def test_symmetric_quotient_equals_all_gpu_mode(name):
    hw = load_hardware("mi300x-8")  # a mesh: every owner on its own link
    fop = FiccoOperator("gemm-rs", 1024, 512, 256)
    a = _run(fop, hw, name, symmetric=True).makespan
    assert a == pytest.approx(_run(fop, hw, name, symmetric=False).makespan, rel=1e-9)


def test_names_round_trip_and_stay_out_of_the_explored_space():
    for name in (FLUX_RS, "ficco-g64-M-ep-rb", "shard-g8-M-dma-fk", "shard-g8-M-dma-s2-ll-rsum",
                 "ficco-g16-M-cu-rb-fk", "shard-g8-M-dma-s2-ll-rsum-sb", "shard-g8-M-dma-p2-s2-sb"):  # fmt: skip
        assert parse_name(name).name == name
    for op in ("ag-gemm", "gemm-rs", "moe"):
        for ax in candidates(FiccoOperator(op, 1024, 512, 512)):
            assert ax.executor in ("cu", "dma") and not ax.fused and ax.reduce != "sum", ax.name
            assert not ax.handshake, ax.name


@pytest.mark.parametrize(
    "op,name,hw,needle",
    [
        ("ag-gemm", "shard-g8-M-ep-rb", "h100-8", "GEMM -> reduce-scatter only"),
        ("gemm-rs", "shard-g8-M-ep", "h100-8", "-rb or -rsum"),
        ("gemm-rs", "shard-g8-M-ep-rsum-fk", "h100-8", "drop -fk"),
        ("gemm-rs", "shard-g8-N-ep-rsum", "h100-8", "split M"),
        ("gemm-rs", "shard-g1-M-ep-rsum", "h100-8", "one kernel already"),
        ("gemm-rs", "ficco-g8-M-dma-s2-fk", "h100-8", "no second stream"),
        ("ag-gemm", "shard-g8-M-dma-p1-fk", "h100-8", "prefetch"),
        ("moe", "shard-g8-M-dma-fk", "h100-8", "moe"),
        ("ag-gemm", "shard-g8-M-dma-rsum", "h100-8", "reduce-scatter only"),
        ("gemm-rs", "bulk-g1-M-cu-rsum", "h100-8", "reduce-scatter only"),
        ("gemm-rs", "shard-g8-M-dma-s2-ll-sb", "h100-8", "sums the stacked partials (-rsum)"),
        ("gemm-rs", "ficco-g8-M-dma-rsum-sb", "h100-8", "one GEMM piece per peer"),
        ("gemm-rs", "shard-g16-M-dma-rsum-sb", "h100-8", "one GEMM piece per peer"),
        ("ag-gemm", "shard-g8-M-dma-ll-sb", "h100-8", "local shard first"),
        ("moe", "shard-g8-M-dma-sb", "h100-8", "one GEMM piece per peer"),
        ("ag-gemm", "shard-g8-M-dma-sb", "paper-80cu", "no ring"),
    ],
)
def test_illegal_named_implementations_have_reasons(op, name, hw, needle):
    why = legality(FiccoOperator(op, 1024, 512, 512), load_hardware(hw), parse_name(name))
    assert why is not None and needle in why


def test_ring_has_no_epilogue_path(tmp_path):
    text = resources.files("t3.config").joinpath("presets", "paper-80cu.toml").read_text()
    assert re.search(r'kind = "ring"', text)
    why = legality(FiccoOperator("gemm-rs", 1024, 512, 512), load_hardware("paper-80cu"), parse_name(FLUX_RS))
    assert why is not None and "ring" in why


def test_fused_section_is_optional_and_checked(tmp_path):
    text = resources.files("t3.config").joinpath("presets", "h100-8.toml").read_text()
    without = text[: text.index("[fused]")]
    p = tmp_path / "mine.toml"
    p.write_text(without)
    hw = load_hardware(p)
    assert hw.fused.store_Bps_per_cu is None and hw.fused.reduce_hbm_fraction == 1.0
    for field, value in (
        ("reduce_hbm_fraction", 0.0),
        ("reduce_hbm_fraction", 1.5),
        ("store_Bps_per_cu", -1.0),
    ):
        with pytest.raises(ConfigError, match=f"fused.{field}"):
            load_hardware(p, {f"fused.{field}": value})
    for preset in ("h100-8", "h200-8", "mi300x-8", "paper-80cu", "cpu-local"):
        body = resources.files("t3.config").joinpath("presets", f"{preset}.toml").read_text()
        assert "\n[fused]\n" in body, preset  # every preset states its values (and where they come from)


# ---- async-TP's symmetric-memory handshakes (-sb) ------------------------------------------------
ATP_RS = "shard-g8-M-dma-s2-ll-rsum-sb"
ATP_AG = "shard-g8-M-dma-p2-s2-sb"


def _deps(sched, key) -> set:
    (op,) = [o for o in sched.ops if o.key == key]
    return {sched.ops[d].key for d in op.deps}


def test_async_tp_reduce_scatter_steps_follow_the_library_order():
    """torch/distributed/_symmetric_memory _pipelined_produce_and_all2all: per step on one of two
    streams, partial -> barrier -> pull -> barrier; the stream's next partial waits for the second
    barrier; local chunk last; a final barrier before the sum. Every edge is checked."""
    hw = load_hardware("h100-8")
    sched = ficco_schedule(RS, hw, parse_name(ATP_RS))
    from t3.schedules.ficco import plan_pieces

    order = [p.units[0][0] for p in plan_pieces(RS, hw, parse_name(ATP_RS))]
    assert order[-1] == 0 and sorted(order[:-1]) == list(range(1, N))  # -ll: local chunk last
    for i, o in enumerate(order):
        first = {k for k in _deps(sched, f"p{i}.0.L0")} if i >= 2 else set()
        if i >= 2:
            assert f"c.a{order[i - 2]}" in first, (i, first)  # waits for the peer's read of step i-2
        if o:
            assert f"p{i}.end" in _deps(sched, f"c.b{o}")
            assert f"c.b{o}" in _deps(sched, f"c.s{o}")
            assert _deps(sched, f"c.a{o}") == {f"c.s{o}"}
    fin = _deps(sched, "c.fin")
    assert fin == {f"c.a{o}" for o in range(1, N)} | {f"p{N - 1}.end"}
    assert "c.fin" in _deps(sched, "rsum")
    barrier_s = hw.compute.kernel_launch_s + hw.link.latency_s
    for op in sched.ops:
        if op.kind == "barrier":
            assert op.delay_s == barrier_s and not op.demands


@pytest.mark.parametrize("dispatch,crossed", [("shared", 3), ("launch_order", 1)])
def test_async_tp_barriers_cost_what_the_critical_path_holds(dispatch, crossed):
    """The makespan grows with the barrier's cost, at most by all 2(N-1)+1 barriers and at least by
    those every path to the sum crosses in turn. With the two streams' GEMMs sharing the CUs
    (``shared``) the last pull ends the critical path: its barrier, its peer's read barrier and the
    final one (3). Where the GEMMs take turns (``launch_order``) the local chunk's GEMM runs last, the
    other stream's barriers and pull hide under it, and only the final barrier is sure to be crossed."""
    fop = FiccoOperator("gemm-rs", 2048, 4096, 4096)
    over = {"compute.dispatch": dispatch, "link.latency_s": 0.0}
    free = load_hardware("h100-8", {**over, "compute.kernel_launch_s": 0.0})
    base = _run(fop, free, ATP_RS).makespan
    for launch in (5e-6, 20e-6):
        hw = load_hardware("h100-8", {**over, "compute.kernel_launch_s": launch})
        grown = _run(fop, hw, ATP_RS).makespan - _run(fop, hw, "shard-g8-M-dma-s2-ll-rsum").makespan
        grown -= base - _run(fop, free, "shard-g8-M-dma-s2-ll-rsum").makespan
        assert crossed * launch - 1e-12 <= grown <= (2 * (N - 1) + 1) * launch + 1e-12, (launch, grown)


def test_async_tp_all_gather_barrier_gates_every_pull():
    """_pipelined_all_gather_and_consume: local shard copied into the symmetric buffer, one barrier
    before any pull, the local shard copied into the gathered output after its matmul, a final barrier."""
    hw = load_hardware("h100-8")
    fop = FiccoOperator("ag-gemm", 2048, 6656, 4096)
    sched = ficco_schedule(fop, hw, parse_name(ATP_AG))
    assert _deps(sched, "d.b0") == {"d.lc"}
    for o in range(1, N):
        assert "d.b0" in _deps(sched, f"d.s{o}")
    assert _deps(sched, "d.lo") == {"p0.end"}
    assert "d.lo" in _deps(sched, "d.s2")  # -p2: the pull of step 2 queues behind the local copy
    assert _deps(sched, "d.fin") == {f"p{i}.end" for i in range(N)} | {"d.lo"}
    res = Engine().run(sched)
    assert res.makespan == max(res.end)  # the final barrier ends the operation
    (fin,) = [o for o in sched.ops if o.key == "d.fin"]
    assert res.end[fin.id] == res.makespan
