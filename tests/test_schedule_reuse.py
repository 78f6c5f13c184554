"""Reuse across calls: a T3 schedule is built once per (configuration, operator, hardware content,
symmetric mode), the engine keeps what it derives from a schedule for later runs. Oracle: the same
simulation with every cache cleared (a fresh build, a fresh schedule object)."""

from __future__ import annotations

import pickle

from t3.config.hardware import load_hardware
from t3.schedules import RunOptions, get_config
from t3.schedules.t3 import clear_schedule_cache
from t3.sim.engine import Engine
from t3.workload import get_model, sublayer_operator

OP = sublayer_operator(get_model("t-nlg"), "fc2", 8, tokens=2048)


def _key(out):
    r = out.results[0]
    return (out.time_s, out.breakdown_s, out.dram_bytes, out.link_bytes, out.hbm_work_bytes, r.start, r.end)


def test_reused_schedule_gives_the_fresh_outcome():
    hw = load_hardware("paper-80cu")
    spec = get_config("t3-mca")
    clear_schedule_cache()
    first = spec.run(OP, hw, RunOptions())
    again = spec.run(OP, load_hardware("paper-80cu"), RunOptions())  # equal content, another object
    assert again.results[0].schedule is first.results[0].schedule
    clear_schedule_cache()
    fresh = spec.run(OP, hw, RunOptions())
    assert fresh.results[0].schedule is not first.results[0].schedule
    assert _key(again) == _key(first) == _key(fresh)
    assert again.extra == fresh.extra


def test_each_call_runs_with_its_own_engine_options():
    hw = load_hardware("paper-80cu")
    spec = get_config("t3")
    clear_schedule_cache()
    plain = spec.run(OP, hw, RunOptions())
    traced = spec.run(OP, hw, RunOptions(trace=True))
    jittered = spec.run(OP, hw, RunOptions(seed=5, jitter=0.5))
    assert plain.results[0].usage is None and traced.results[0].usage
    assert jittered.time_s != plain.time_s
    clear_schedule_cache()
    assert _key(spec.run(OP, hw, RunOptions(seed=5, jitter=0.5))) == _key(jittered)


def test_hardware_content_is_part_of_the_key():
    hw = load_hardware("paper-80cu")
    slow = hw.with_overrides({"link.bandwidth_Bps": hw.link.bandwidth_Bps / 4})
    spec = get_config("t3-mca")
    clear_schedule_cache()
    spec.run(OP, hw, RunOptions())
    a = spec.run(OP, slow, RunOptions())
    clear_schedule_cache()
    b = spec.run(OP, slow, RunOptions())
    assert _key(a) == _key(b) and a.time_s > spec.run(OP, hw, RunOptions()).time_s


def test_engine_reruns_a_schedule_as_a_fresh_copy():
    """Second run of one schedule object (engine data kept) == first run of an unpickled copy."""
    hw = load_hardware("paper-80cu")
    sched = get_config("t3-mca").run(OP, hw, RunOptions(symmetric=False)).results[0].schedule
    copy = pickle.loads(pickle.dumps(sched))
    assert "_engine_static" in sched.__dict__ and "_engine_static" not in copy.__dict__
    for kw in ({}, {"seed": 3, "jitter": 0.2}):
        r1, r2 = Engine(**kw).run(sched), Engine(**kw).run(copy)
        assert (r1.start, r1.end, r1.events) == (r2.start, r2.end, r2.events)


def test_summary_sums_are_the_ops_traffic_and_hbm_work():
    """Schedule.sums_per_gpu's one pass over the ops gives each traffic category and the HBM work
    summed op by op, per materialised GPU, on a symmetric and an all-GPU schedule."""
    hw = load_hardware("paper-80cu")
    op = sublayer_operator(get_model("t-nlg"), "fc2", 4)
    for sym in (True, False):
        sched = get_config("t3-mca").run(op, hw, RunOptions(symmetric=sym)).results[0].schedule
        sched.__dict__.pop("_summary_sums", None)
        traffic, work = sched.sums_per_gpu()
        cats = {k for o in sched.ops for k in o.traffic}
        g = len(sched.gpus)
        assert traffic == {
            k: sum(o.traffic.get(k, 0.0) for o in sched.ops if k in o.traffic) / g for k in cats
        }
        hbm = [a for o in sched.ops for r, a in o.demands if sched.resources[r].kind == "hbm"]
        assert work == sum(hbm) / g and work > 0
        assert sched.traffic_per_gpu() == traffic and sched.traffic_per_gpu() is not traffic


def test_summary_spans_are_the_critical_gpus_first_start_and_last_end():
    """summarize's spans (op groups kept with the schedule) equal the spans computed op by op here, on
    every run of one schedule: runs whose times differ (seeded jitter) reuse the groups, not the times."""
    from t3.schedules.base import summarize

    hw = load_hardware("paper-80cu")
    op = sublayer_operator(get_model("t-nlg"), "fc2", 4)
    for sym in (True, False):
        sched = get_config("t3-mca").run(op, hw, RunOptions(symmetric=sym)).results[0].schedule
        seen = set()
        for kw in ({}, {"seed": 1, "jitter": 0.3}, {"seed": 2, "jitter": 0.3}):
            res = Engine(**kw).run(sched)
            out = summarize(res)
            last = {g: max(res.end[o.id] for o in sched.ops if o.gpu == g) for g in sched.gpus}
            crit = max(sched.gpus, key=lambda g: last[g])
            busy = {}
            for c in {o.cat for o in sched.ops if o.gpu == crit}:
                ids = [o.id for o in sched.ops if o.gpu == crit and o.cat == c]
                busy[c] = max(res.end[i] for i in ids) - min(res.start[i] for i in ids)
            assert out.breakdown_s == {
                "gemm": busy.get("gemm", 0.0),
                "reduce_scatter": busy.get("rs", 0.0),
                "all_gather": busy.get("ag", 0.0),
                "exposed_comm": res.makespan - busy.get("gemm", 0.0),
            }
            seen.add(out.breakdown_s["gemm"])
        assert len(seen) == 3  # the jittered runs' times differ: the spans follow them
