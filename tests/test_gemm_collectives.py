"""GEMM and collective models against closed forms."""

import math

import pytest

from t3.config.hardware import load_hardware
from t3.ops.gemm import plan_gemm
from t3.schedules import RunOptions, simulate_schedule
from t3.schedules.baselines import sequential_schedule
from t3.workload import get_model, sublayer_operator
from t3.workload.sublayers import GemmShape, Operator


def _op(m, n, k, tp=8):
    return Operator("x", "fc2", "forward", tp, m, GemmShape(m, n, k))


def test_compute_bound_gemm_matches_flops_over_peak(paper_hw):
    hw = paper_hw
    shape = GemmShape(8192, 4096, 4096)
    t = simulate_schedule(
        sequential_schedule(_op(8192, 4096, 4096), hw, RunOptions(), parts="gemm"), RunOptions()
    ).time_s
    peak = hw.compute.peak_flops("fp16") * hw.compute.gemm_efficiency
    plan = plan_gemm(shape, hw)
    lower = shape.flops / peak
    wave_term = plan.waves[0].compute_s  # one (full) wave of quantization
    first_load = plan.waves[0].read_bytes / hw.hbm.effective_Bps
    assert lower <= t <= lower + wave_term + first_load + hw.compute.kernel_launch_s
    # tiles divide evenly here, so waves are the only quantization
    assert len(plan.waves) == math.ceil(plan.tiles / plan.wave_size)


def _tail(hw, c, k):
    """The final primitive of a ring (recvReduceCopy k=3, recv k=2): k c through the kernel's CUs / HBM."""
    return k * c / min(hw.collective.channels * hw.compute.cu_copy_Bps, hw.hbm.effective_Bps)


@pytest.mark.parametrize("tp", [2, 4, 8, 16])
def test_idle_ring_reduce_scatter_closed_form(paper_hw, tp):
    hw = paper_hw
    op = _op(1024 * tp, 4096, 512, tp)
    t = simulate_schedule(sequential_schedule(op, hw, RunOptions(), parts="rs"), RunOptions()).time_s
    c = op.comm_bytes / tp
    # link-bound steps (HBM: 3 chunks per step per GPU at 0.9 TB/s; CUs: 3 chunks at 16 x 24 GB/s)
    step = max(
        c / hw.link.bandwidth_Bps,
        3 * c / hw.hbm.effective_Bps,
        3 * c / (hw.collective.channels * hw.compute.cu_copy_Bps),
    )
    assert step == pytest.approx(c / hw.link.bandwidth_Bps)
    assert t == pytest.approx(
        hw.compute.kernel_launch_s
        + (tp - 1) * (c / hw.link.bandwidth_Bps + hw.link.latency_s)
        + _tail(hw, c, 3),
        rel=1e-9,
    )


def test_hbm_bound_ring_reduce_scatter_closed_form():
    # no read/write turnaround here (tests/test_collectives.py covers it): the bytes alone set the time
    hw = load_hardware(
        "paper-80cu", {"hbm.bandwidth_Bps": 1e11, "hbm.efficiency": 1.0, "hbm.turnaround": 0.0}
    )
    op = _op(8192, 4096, 512, 8)
    t = simulate_schedule(sequential_schedule(op, hw, RunOptions(), parts="rs"), RunOptions()).time_s
    c = op.comm_bytes / 8
    # send: read c + land c; recvReduceSend: read 2c + land c; then the recvReduceCopy (3c)
    steps = 2 * c / 1e11 + 6 * 3 * c / 1e11
    assert t == pytest.approx(
        hw.compute.kernel_launch_s + 7 * hw.link.latency_s + steps + _tail(hw, c, 3), rel=1e-9
    )


def test_ring_reduce_scatter_on_mesh_closed_form():
    """RCCL's rings span every xGMI link: a step's c spreads over the 7 links of a GPU."""
    hw = load_hardware("mi300x-8")
    op = _op(8192, 8192, 1024, 8)
    t = simulate_schedule(sequential_schedule(op, hw, RunOptions(), parts="rs"), RunOptions()).time_s
    c = op.comm_bytes / 8
    col = hw.collective
    cu = col.channels * hw.compute.cu_copy_Bps
    link = c / 7 / (hw.link.bandwidth_Bps * col.link_efficiency)
    first = max(link, 2 * c / hw.hbm.effective_Bps, 2 * c / cu)
    step = max(link, 3 * c / hw.hbm.effective_Bps, 3 * c / cu)
    expect = hw.compute.kernel_launch_s + col.simple.base_latency_s + 7 * col.simple.step_latency_s
    assert t == pytest.approx(expect + first + 6 * step + _tail(hw, c, 3), rel=1e-9)


def test_ring_all_gather_closed_form(paper_hw):
    hw = paper_hw
    op = sublayer_operator(get_model("mega-gpt-2"), "op", 8)
    t = simulate_schedule(sequential_schedule(op, hw, RunOptions(), parts="ag"), RunOptions()).time_s
    c = op.comm_bytes / 8
    assert t == pytest.approx(
        hw.compute.kernel_launch_s + 7 * (c / hw.link.bandwidth_Bps + hw.link.latency_s) + _tail(hw, c, 2),
        rel=1e-9,
    )


def _a2a_time(hw, matrix, symmetric):
    from t3.ops.collectives import all_to_all
    from t3.sim import Engine, ScheduleBuilder

    b = ScheduleBuilder("a2a", hw, len(matrix), symmetric=symmetric)
    all_to_all(b, matrix, launch=False)
    return Engine().run(b.build()).makespan


def test_all_to_all_closed_form_and_skew():
    # CUs with headroom (80 GB/s each): the links set the time, as the skewed case below assumes
    hw = load_hardware(
        "mi300x-8",
        {
            "collective.simple.base_latency_s": 0.0,
            "collective.simple.step_latency_s": 0.0,
            "compute.cu_copy_Bps": 80e9,
        },
    )
    n, s = 8, 64e6
    even = [[0.0 if g == h else s for h in range(n)] for g in range(n)]
    # each message on its own link; per GPU 7 sends (read s, land s) and 7 receiver copies (read s,
    # write s) on HBM and on the kernel's CUs (a load and a store per byte each)
    bw = hw.link.bandwidth_Bps * hw.collective.link_efficiency
    expect = max(
        s / bw,
        28 * s / hw.hbm.effective_Bps,
        28 * s / (hw.collective.channels * hw.compute.cu_copy_Bps),
    )
    assert _a2a_time(hw, even, True) == pytest.approx(expect)
    assert _a2a_time(hw, even, False) == pytest.approx(expect)
    skew = [row[:] for row in even]
    skew[3][5] = 4 * s  # one hot expert: the slowest link sets the time
    assert _a2a_time(hw, skew, False) == pytest.approx(4 * s / bw)
    with pytest.raises(Exception, match="all-GPU mode"):
        _a2a_time(hw, skew, True)


def test_mesh_rejects_more_gpus_than_the_node():
    from t3.errors import ScheduleError

    hw = load_hardware("mi300x-8")
    op = _op(16 * 128, 4096, 512, 16)
    with pytest.raises(ScheduleError, match="tp: 16 GPUs exceed"):
        sequential_schedule(op, hw, RunOptions())


def test_gemm_memory_phase_slows_under_shared_hbm():
    """Concurrent all-reduce traffic slows the GEMM's load phases; with abundant HBM it does not."""
    from t3.schedules.baselines import concurrent_schedule

    op = sublayer_operator(get_model("t-nlg"), "fc2", 8)
    for hbm, slowed in ((0.3e12, True), (1e15, False)):
        hw = load_hardware("paper-80cu", {"hbm.bandwidth_Bps": hbm})
        k = 16
        res = RunOptions(comm_cus=k).engine().run(concurrent_schedule(op, hw, RunOptions(comm_cus=k)))
        gemm_alone = RunOptions().engine().run(_gemm_only(op, hw, hw.compute.cus - k))
        loads = [o for o in res.schedule.ops if o.kind == "gemm-load"]
        load_time = sum(res.end[o.id] - res.start[o.id] for o in loads)
        alone_loads = [o for o in gemm_alone.schedule.ops if o.kind == "gemm-load"]
        alone_time = sum(gemm_alone.end[o.id] - gemm_alone.start[o.id] for o in alone_loads)
        if slowed:
            assert load_time > 1.2 * alone_time
            assert res.busy("gemm") > gemm_alone.makespan
        else:
            assert load_time == pytest.approx(alone_time, rel=1e-3)


def _gemm_only(op, hw, cus):
    from t3.ops.gemm import add_gemm
    from t3.sim import ScheduleBuilder

    b = ScheduleBuilder("g", hw, op.tp)
    add_gemm(b, 0, plan_gemm(op.gemm, hw, cus=cus))
    return b.build()
