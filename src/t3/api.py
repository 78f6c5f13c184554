"""Public entry points, each returning a plain record (times in seconds, bandwidths in bytes/s).

- :func:`run`: one tensor-parallel sublayer under one configuration (``t3 run``).
- :func:`gemm`: one GEMM alone on one GPU of a preset (``time_s``, ``tflops``).
- :func:`collective`: one collective on ``gpus`` GPUs, sized like nccl-tests (``time_s``, ``algbw_Bps``,
  ``busbw_Bps`` and the ``algo`` that ran).
- :func:`overlap`: one communication-dependent GEMM (FiCCO's ``ag-gemm`` / ``gemm-rs`` / ``moe``) under one
  named schedule, or the fastest one (``schedule="best"``).

Every input is validated before any simulation; a bad one raises :class:`t3.errors.T3Error` naming the
field. ``t3 validate`` compares these predictions with published measurements (``docs/validation.md``).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from t3 import size
from t3.config.hardware import Hardware, load_hardware, tp_refusal
from t3.errors import ConfigError, SimulationError
from t3.schedules import Outcome, RunOptions, get_config
from t3.workload import get_model, sublayer_operator
from t3.workload.sublayers import GemmShape, Operator


def resolve(
    model: str | Path, tp: int, sublayer: str, config: str, hardware: str | Path | Hardware,
    tokens: int | None = None, hw_overrides: dict[str, Any] | None = None,
) -> tuple[Operator, Hardware, Any]:  # fmt: skip
    """Validate every input (raising :class:`t3.errors.T3Error` naming the field) before any simulation."""
    spec = get_config(config)
    if hw_overrides is not None and not isinstance(hw_overrides, dict):
        raise ConfigError(f"hw_overrides: expected a dict of dotted paths, got {hw_overrides!r}")
    hw = hardware if isinstance(hardware, Hardware) else load_hardware(hardware)
    if hw_overrides:
        hw = hw.with_overrides(hw_overrides)
    op = sublayer_operator(get_model(model), sublayer, tp, tokens)
    if why := tp_refusal(hw, op.tp):  # the TP group must fit the hardware's topology
        raise ConfigError(why)
    return op, hw, spec


def check_run(op: Operator, hw: Hardware, spec: Any, options: RunOptions, force: bool = False) -> None:
    """Everything about one simulation that can be refused before it starts: the options' types, the
    configuration's parameters, functional mode, and the size guard (:mod:`t3.size`; ``force`` skips it)."""
    if not isinstance(options, RunOptions):
        raise ConfigError(f"options: expected a t3.RunOptions, got {type(options).__name__}")
    spec.check(options)
    if spec.requires is not None:
        spec.requires(op, hw)
    if options.functional:
        from t3.schedules.t3 import require_functional

        require_functional(spec.name)
    size.check(
        size.run_work(op, hw, spec.name, options.symmetric, options.functional, options.comm_cus), force=force
    )


def record(op: Operator, hw: Hardware, config: str, out: Outcome) -> dict[str, Any]:
    """The JSON record of ``t3 run`` (times in seconds, bytes per GPU)."""
    rec: dict[str, Any] = {
        "model": op.model,
        "tp": op.tp,
        "sublayer": op.sublayer,
        "phase": op.phase,
        "config": config,
        "hardware": hw.name,
        "tokens": op.tokens,
        "gemm": {"m": op.gemm.m, "n": op.gemm.n, "k": op.gemm.k, "dtype": op.gemm.dtype},
        "time_s": out.time_s,
        "breakdown_s": dict(out.breakdown_s),
        "dram_bytes": dict(out.dram_bytes),
        "dram_bytes_total": sum(out.dram_bytes.values()),
        "link_bytes": out.link_bytes,
        "hbm_work_bytes": out.hbm_work_bytes,
        "sim": {"events": out.events, "ops": sum(len(r.schedule.ops) for r in out.results)},
    }
    rec.update(out.extra)
    return rec


def run(
    model: str | Path = "t-nlg", tp: int = 8, sublayer: str = "fc2", config: str = "sequential",
    hardware: str | Path | Hardware = "paper-80cu", tokens: int | None = None,
    hw_overrides: dict[str, Any] | None = None, options: RunOptions | None = None, force: bool = False,
) -> dict[str, Any]:  # fmt: skip
    """Simulate one sublayer and return its record (see :func:`record`). Every input is checked first
    (:class:`t3.errors.T3Error` naming the field); work above :data:`t3.size.LIMIT_OPS` is refused
    (:class:`t3.errors.TooLargeError`) unless ``force``."""
    op, hw, spec = resolve(model, tp, sublayer, config, hardware, tokens, hw_overrides)
    options = RunOptions() if options is None else options
    check_run(op, hw, spec, options, force)
    return record(op, hw, config, simulate(op, hw, spec, options))


def simulate(op: Operator, hw: Hardware, spec: Any, options: RunOptions) -> Outcome:
    """Run a checked configuration; a time that overflows (extreme hardware values, e.g. a link of
    1e-300 B/s) is a :class:`t3.errors.SimulationError`, never an ``inf`` in the output."""
    out = spec.run(op, hw, options)
    bad = {k: v for k, v in {"time_s": out.time_s, **out.breakdown_s}.items() if not math.isfinite(v)}
    if bad:
        raise SimulationError(
            f"{spec.name}: simulated {', '.join(bad)} = {next(iter(bad.values()))} is not finite; a hardware "
            "value is too extreme for double precision (check bandwidths, latencies and clocks)"
        )
    return out


# --------------------------------------------------------------------------------------------------
# Predictions for single operations: a GEMM, a collective, an overlapped GEMM + collective.
# Each is a thin layer: validate the inputs, call one model entry point, return a record.

COLLECTIVE_OPS = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all")

# nccl-tests size conventions: all_reduce size = the buffer; reduce_scatter size = the full input;
# all_gather size = the full output; all_to_all size = the whole send buffer of one GPU.
# busbw = algbw x factor(n), algbw = size / time (nccl-tests doc/PERFORMANCE.md).
_BUSBW_FACTOR = {
    "all_reduce": lambda n: 2.0 * (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
}


def busbw_factor(op: str, gpus: int) -> float:
    """nccl-tests bus-bandwidth factor of ``op`` on ``gpus`` GPUs (busbw = size / time x factor)."""
    _check_choice("op", op, COLLECTIVE_OPS)
    return _BUSBW_FACTOR[op](_check_int("gpus", gpus, 2))


def _check_int(field: str, value: Any, minimum: int) -> int:
    from t3.errors import ConfigError

    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{field}: must be an integer, got {value!r}")
    if value < minimum:
        raise ConfigError(f"{field}: must be >= {minimum}, got {value}")
    return value


def _check_force(force: Any) -> None:
    if not isinstance(force, bool):
        raise ConfigError(f"force: must be True or False, got {force!r}")


def _check_choice(field: str, value: Any, choices: tuple[str, ...] | list[str]) -> str:
    from t3.errors import ConfigError

    if value not in choices:
        raise ConfigError(f"{field}: unknown {field} {value!r} (available: {', '.join(choices)})")
    return value


def _hardware(hardware: str | Path | Hardware) -> Hardware:
    return hardware if isinstance(hardware, Hardware) else load_hardware(hardware)


def _check_dtype(dtype: Any, hw: Hardware) -> str:
    from t3.errors import ConfigError
    from t3.workload.sublayers import DTYPE_BYTES

    _check_choice("dtype", dtype, tuple(DTYPE_BYTES))
    if dtype not in hw.compute.matrix_flops_per_clk_per_cu:
        have = ", ".join(sorted(hw.compute.matrix_flops_per_clk_per_cu))
        raise ConfigError(f"dtype: hardware '{hw.name}' has no matrix rate for {dtype} (have {have})")
    return dtype


def _check_gpus(gpus: Any, hw: Hardware) -> int:
    from t3.errors import ConfigError

    n = _check_int("gpus", gpus, 2)
    if why := tp_refusal(hw, n, "gpus"):  # the rule t3 run's TP follows (whole nodes on a ring)
        raise ConfigError(why)
    return n


GEMM_LOOPS = ("short", "sustained")


def gemm(
    m: int, n: int, k: int, dtype: str = "bf16", hardware: str | Path | Hardware = "h100-8",
    force: bool = False, loop: str = "short", out_dtype: str | None = None,
) -> dict[str, Any]:  # fmt: skip
    """One GEMM ``(m x k) @ (k x n)`` alone on one GPU (all CUs, one kernel launch).

    Returns ``time_s`` and ``tflops`` (2 m n k / time / 1e12) with the inputs echoed, and the kernel
    the model chose with the time's parts (:meth:`t3.ops.gemm.GemmPlan.breakdown`): ``tile``,
    ``tiles``, ``waves`` of ``wave_size``, ``split_k`` (1: no K split), ``kernels`` (2 with a K split:
    its reduction kernel), ``clock_hz``,
    ``tile_flops_per_s`` and ``tile_bound``, ``launch_s``, ``prologue_s``, ``body_s``, ``compute_s``.
    ``loop``: ``short`` (the GEMM timed within its first 0.2 s of running: the preset's GEMM clock) or
    ``sustained`` (run back to back for longer: at most the rate the board's power limit allows,
    :func:`t3.ops.gemm.power_limited_s`, on presets with a ``power`` section; elsewhere the preset's GEMM
    clock serves both). Also returned: ``loop``, ``short_s`` (the time at the GEMM clock), ``power_s``
    (the power limit's bound; None where not modelled or short) and ``power_bound`` (it sets the time).
    ``out_dtype``: the output's type (``fp32``, ``fp16``, ``bf16``, ``fp8``; e.g. ``fp32`` for a
    cublasGemmEx call with an FP32 C): its bytes are what each tile stores; None (the default) is the
    libraries' default, the input's type (a 16-bit output for FP8); returned as the type the model
    charged. Work above :data:`t3.size.LIMIT_OPS` is refused (:class:`t3.errors.TooLargeError`) unless
    ``force``."""
    for field, v in (("m", m), ("n", n), ("k", k)):
        _check_int(field, v, 1)
    hw = _hardware(hardware)
    _check_dtype(dtype, hw)
    if out_dtype is not None:
        from t3.workload.sublayers import DTYPE_BYTES

        _check_choice("out_dtype", out_dtype, tuple(DTYPE_BYTES))
    _check_force(force)
    _check_choice("loop", loop, GEMM_LOOPS)
    if loop == "sustained" and hw.power is not None and dtype not in hw.power.flop_j:
        from t3.errors import ConfigError

        raise ConfigError(
            f"loop: 'sustained' needs power.flop_j for dtype '{dtype}' on hardware '{hw.name}' (have"
            f" {sorted(hw.power.flop_j)}): its power-limited rate is not measured"
        )
    size.check(size.gemm_work(m, n, k, dtype, hw), force=force, flag="force=True")
    shape = GemmShape(m, n, k, dtype, out_dtype)
    t, plan = _gemm_time_s(shape, hw)
    power_s = None
    if loop == "sustained" and hw.power is not None:
        from t3.ops.gemm import power_limited_s

        power_s = power_limited_s(hw, plan)
    total = max(t, power_s or 0.0)
    return {
        "m": m, "n": n, "k": k, "dtype": dtype, "hardware": hw.name,
        "out_dtype": shape.out_type, "time_s": total, "tflops": 2.0 * m * n * k / total / 1e12,
        **plan.breakdown(hw),
        "loop": loop, "short_s": t, "power_s": power_s, "power_bound": power_s is not None and power_s > t,
    }  # fmt: skip


def _gemm_time_s(shape: GemmShape, hw: Hardware):
    """The GEMM model entry point: the tiled plan of ``t3.ops.gemm`` run alone by the engine; returns
    (seconds, the plan)."""
    from t3.ops.gemm import add_gemm, plan_gemm
    from t3.sim.engine import Engine
    from t3.sim.schedule import ScheduleBuilder

    plan = plan_gemm(shape, hw)
    b = ScheduleBuilder("gemm", hw, hw.topology.gpus, symmetric=True)
    add_gemm(b, 0, plan)
    return Engine().run(b.build()).makespan, plan


def collective_algos(
    op: str, hardware: str | Path | Hardware = "h100-8", gpus: int | None = None
) -> list[str]:
    """Algorithms ``collective(op, ..., algo=...)`` accepts on ``hardware`` (``auto`` first), e.g.
    ``ring/simple``, ``ring/ll128``, ``nvls/simple``; a name without a protocol means ``/simple``."""
    from t3.ops.collectives import valid_algos

    _check_choice("op", op, COLLECTIVE_OPS)
    hw = _hardware(hardware)
    if op == "all_to_all" and hw.topology.kind == "ring":
        return []
    valid = valid_algos(op, hw, gpus or hw.topology.gpus)
    return valid if valid[:1] == ["auto"] else ["auto", *valid]


def collective(
    op: str, nbytes: int, gpus: int = 8, hardware: str | Path | Hardware = "h100-8", algo: str = "auto",
    force: bool = False, gpus_per_thread: int = 1,
) -> dict[str, Any]:  # fmt: skip
    """One collective alone on ``gpus`` GPUs, sized as nccl-tests sizes it.

    ``nbytes``: all_reduce = the buffer; reduce_scatter = the full input; all_gather = the full output;
    all_to_all = one GPU's whole send buffer (``nbytes / gpus`` to each peer). Returns ``time_s``,
    ``algbw_Bps`` (= nbytes / time) and ``busbw_Bps`` (= algbw x the nccl-tests factor: 2(n-1)/n for
    all_reduce, (n-1)/n otherwise), ``device_s`` (the kernel's own time, without its launch: what a
    profile's kernel span shows) and ``algo``, the algorithm/protocol that ran (``auto``: the
    collective library's own least-time choice, e.g. ``ring/ll128`` or ``nvls/simple``), and
    ``terms``: the closed form's parts on an idle node (``launch_s``, ``base_latency_s``, ``hops`` and
    ``hop_latency_s``, ``transfer_s``, ``resources_s``: each resource's seconds summed over the steps,
    ``total_s``; :func:`t3.ops.collectives.idle_time`). ``gpus_per_thread``: the GPUs one host thread
    drives (nccl-tests ``-g N``): its calls are issued one after another, so back-to-back calls take at
    least ``gpus_per_thread x collective.host_call_s`` each (``terms["host_s"]``; ``time_s`` is the larger
    of that and the call's launch + device time). ``alone_s``: one call timed alone, as a user times a
    ``torch.distributed`` call issued right after a barrier on an idle GPU: ``collective.call_alone_s`` (the
    host's path of the call and the wait for the last rank, ``terms["call_alone_s"]``) + ``device_s``; where
    the preset does not model it (0), the launch + device time. A buffer
    larger than one GPU's memory is refused (:class:`t3.errors.TooLargeError`) unless ``force``
    (:func:`t3.size.check_collective_bytes`)."""
    from t3.errors import ConfigError

    _check_choice("op", op, COLLECTIVE_OPS)
    nbytes = _check_int("nbytes", nbytes, 1)
    hw = _hardware(hardware)
    n = _check_gpus(gpus, hw)
    _check_force(force)
    per_thread = _check_int("gpus_per_thread", gpus_per_thread, 1)
    if per_thread > n:
        raise ConfigError(
            f"gpus_per_thread: {per_thread} GPUs per host thread, but the collective runs on {n}"
        )
    size.check_collective_bytes(op, nbytes, hw, force=force)
    valid = collective_algos(op, hw, n)
    if not valid:
        raise ConfigError(f"op: {op} is modelled on mesh and switch topologies only, '{hw.name}' is a ring")
    if algo != "auto" and "/" not in algo:
        algo = _protocol_choice(op, algo, nbytes, n, hw, valid)
    _check_choice("algo", algo, valid)
    r = _collective(op, nbytes, n, hw, algo)
    host = per_thread * hw.collective.host_call_s
    t = max(r["time_s"], host)
    algbw = nbytes / t
    alone = hw.collective.call_alone_s
    return {
        "op": op, "nbytes": nbytes, "gpus": n, "hardware": hw.name, "algo": r["algo"], "time_s": t,
        "device_s": r["device_s"], "alone_s": alone + r["device_s"] if alone > 0 else r["time_s"],
        "algbw_Bps": algbw, "busbw_Bps": algbw * _BUSBW_FACTOR[op](n),
        "terms": {**r["terms"], "host_s": host, "call_alone_s": alone},
    }  # fmt: skip


def _protocol_choice(op: str, algo: str, nbytes: int, n: int, hw: Hardware, valid: list[str]) -> str:
    """An algorithm named without a protocol (``ring``) runs with the protocol the library would pick
    for it, among its enabled protocols, as the library picks (:func:`t3.ops.collectives.fastest`: across
    nodes NCCL's estimate, as NCCL_ALGO fixes the algorithm and its tuning model still picks the protocol;
    elsewhere the least predicted time)."""
    from t3.ops.collectives import fastest, parse_algo, protocol

    opts = [a for a in valid if a.startswith(f"{algo}/") and protocol(hw, a.split("/")[1]).enabled]
    if not opts:
        return algo  # not a valid name: the caller's check names it
    size = nbytes * (n - 1) / n if op == "all_to_all" else nbytes
    return str(fastest(op, float(size), hw, n, [parse_algo(op, a, hw, n) for a in opts]))


def _collective(op: str, nbytes: int, n: int, hw: Hardware, algo: str) -> dict[str, Any]:
    """The collective model entry point (:func:`t3.ops.collectives.simulate_collective`)."""
    from t3.ops.collectives import simulate_collective

    return simulate_collective(op, float(nbytes), n, hw, algo)


OVERLAP_OPS = ("ag-gemm", "gemm-rs", "moe")


def overlap(
    op: str, m: int, n: int, k: int, gpus: int = 8, hardware: str | Path | Hardware = "h100-8",
    schedule: str = "bulk-g1-M-cu", dtype: str = "bf16", force: bool = False,
) -> dict[str, Any]:  # fmt: skip
    """One communication-dependent GEMM (FiCCO's operations, sizes as in ``t3 ficco explore``) under
    one schedule. ``schedule``: a FiCCO schedule name (``bulk-g1-M-cu`` = the collective, then the
    GEMM, no overlap) or ``"best"`` (every legal schedule; the fastest is returned with its name).

    Returns ``time_s``, ``schedule`` (the one that ran), ``gemm_alone_s`` and ``comm_alone_s`` (the
    operation's GEMM and collective each alone), ``contention_s`` and ``decomposition_s`` (the losses of
    ``docs/ficco.md``). Work above :data:`t3.size.LIMIT_OPS` (for ``"best"``: the estimate and limit
    of ``t3 ficco explore``) is refused (:class:`t3.errors.TooLargeError`) unless ``force``."""
    from t3.errors import ConfigError
    from t3.ficco.losses import explore
    from t3.ficco.space import FiccoOperator, check_fits, legality, parse_name

    _check_choice("op", op, OVERLAP_OPS)
    for field, v in (("m", m), ("n", n), ("k", k)):
        _check_int(field, v, 1)
    hw = _hardware(hardware)
    g = _check_gpus(gpus, hw)
    _check_dtype(dtype, hw)
    fop = FiccoOperator(op, m, n, k, g, dtype)
    check_fits(fop, hw)
    if not isinstance(schedule, str):
        raise ConfigError(f"schedule: must be a schedule name or 'best', got {schedule!r}")
    axes = None
    if schedule != "best":
        ax = parse_name(schedule)
        why = legality(fop, hw, ax)
        if why:
            raise ConfigError(f"schedule: {schedule} cannot run {fop.describe()} on '{hw.name}': {why}")
        axes = [ax]
    _check_force(force)
    size.check(size.overlap_work(fop, hw, schedule), force=force, flag="force=True")
    ex = explore(fop, hw, axes)
    best = ex.best()
    return {
        "op": op, "m": m, "n": n, "k": k, "gpus": g, "dtype": dtype, "hardware": hw.name,
        "schedule": best.name, "time_s": best.time_s, "gemm_alone_s": ex.gemm_alone_s,
        "comm_alone_s": ex.comm_alone_s, "contention_s": best.contention_s,
        "decomposition_s": best.decomposition_s,
    }  # fmt: skip


INTERFERERS = (
    "all_reduce", "reduce_scatter", "all_gather", "all_to_all", "sm_copy", "sm_reduce", "memcpy", "ce_copy", "ce_d2h",
    "ce_h2d",
)  # fmt: skip


def interference(
    m: int, n: int, k: int, comm: str, nbytes: int, gpus: int = 8, hardware: str | Path | Hardware = "h100-8",
    dtype: str = "bf16", cus: int = 0, algo: str = "auto", arrangement: str = "background",
    executor: str = "cu", channels: int = 0, lead_s: float = 0.0, first: str = "comm",
) -> dict[str, Any]:  # fmt: skip
    """A GEMM ``(m x k) @ (k x n)`` and a communication on the same GPU at the same time
    (:mod:`t3.ops.interference`): ``comm`` is a collective of ``nbytes`` (nccl-tests sizes) on ``gpus``
    GPUs (``all_reduce``, ``reduce_scatter``, ``all_gather``, ``all_to_all``; ``algo`` as
    :func:`collective`), or one GPU's own traffic (``gpus=1``): ``sm_copy`` (a copy kernel of ``nbytes``
    on ``cus`` CUs, 0 = every CU), ``sm_reduce`` (``c = a + b``, ``nbytes`` of output), ``memcpy`` (the
    driver's device-to-device copy, which runs on the SMs), ``ce_copy`` (a copy of ``nbytes`` on the
    copy engines, device to device) or ``ce_d2h`` / ``ce_h2d`` (to / from host
    memory over ``dma.host_link_Bps``). A collective's ``executor``: the library's CU kernels
    (``cu``) or the copy engines (``dma``), and its ``channels`` (0: the preset's). ``arrangement``:
    ``background`` (the other kernel runs back to back for the whole of each one's span), ``held`` (one
    launch of the communication holding its CUs for longer than the GEMM, launched first) or ``together``
    (both launched once at the same moment; ``first``: which is launched first, ``"comm"`` or
    ``"gemm"``; ``lead_s``: the other starts that much later, and its time together includes the wait).
    Elsewhere the communication is launched first. A kernel launched later gets only the CUs the earlier
    one's blocks leave (block dispatch, :mod:`t3.ops.interference`).

    Returns ``gemm_alone_s``, ``gemm_together_s``, ``comm_alone_s``, ``comm_together_s`` and the
    slowdowns ``gemm_slowdown_pct`` / ``comm_slowdown_pct`` (100 x (together / alone - 1)); with
    ``together`` also ``pair_together_s`` (both done) and ``pair_slowdown_pct`` (against the two one
    after the other: negative where running them together gains)."""
    import math

    from t3.errors import ConfigError
    from t3.ops.interference import ARRANGEMENTS, LOCAL, Comm
    from t3.ops.interference import interference as run_interference

    for field, v in (("m", m), ("n", n), ("k", k)):
        _check_int(field, v, 1)
    _check_choice("comm", comm, INTERFERERS)
    nbytes = _check_int("nbytes", nbytes, 1)
    hw = _hardware(hardware)
    _check_dtype(dtype, hw)
    _check_choice("arrangement", arrangement, ARRANGEMENTS)
    _check_choice("executor", executor, ("cu", "dma"))
    cus = _check_int("cus", cus, 0)
    channels = _check_int("channels", channels, 0)
    if (
        isinstance(lead_s, bool)
        or not isinstance(lead_s, int | float)
        or not math.isfinite(lead_s)
        or lead_s < 0
    ):
        raise ConfigError(f"lead_s: must be a finite number of seconds >= 0, got {lead_s!r}")
    if lead_s and arrangement != "together":
        raise ConfigError("lead_s: a lead is a delay after a launch together: arrangement must be 'together'")
    _check_choice("first", first, ("comm", "gemm"))
    if first != "comm" and arrangement != "together":
        raise ConfigError(
            "first: an order of launch is for a launch together: arrangement must be 'together'"
        )
    if comm in LOCAL:
        if channels:
            raise ConfigError(f"channels: {comm} is not a collective (cus sets its CUs)")
        if gpus != 1:
            raise ConfigError(f"gpus: {comm} is one GPU's own traffic: gpus must be 1, got {gpus!r}")
        if algo != "auto":
            raise ConfigError(f"algo: {comm} has no algorithm, got {algo!r}")
        if cus > hw.compute.cus:
            raise ConfigError(f"cus: {cus} exceed the {hw.compute.cus} CUs of '{hw.name}'")
        if cus and comm.startswith("ce_"):
            raise ConfigError(f"cus: {comm} runs on the copy engines, not on CUs")
        if comm in ("ce_d2h", "ce_h2d") and not hw.dma.host_link_Bps:
            raise ConfigError(f"comm: {comm} needs dma.host_link_Bps, which '{hw.name}' does not set")
        if executor != "cu":
            raise ConfigError(f"executor: {comm} says where it runs by its name, got {executor!r}")
    else:
        gpus = _check_gpus(gpus, hw)
        if cus:
            raise ConfigError("cus: a collective runs on the library's channels (set channels), not on cus")
        if channels > hw.compute.cus:
            raise ConfigError(f"channels: {channels} exceed the {hw.compute.cus} CUs of '{hw.name}'")
        valid = collective_algos(comm, hw, gpus)
        if not valid:
            raise ConfigError(f"comm: {comm} is modelled on mesh and switch topologies only")
        if algo != "auto" and "/" not in algo:
            algo = _protocol_choice(comm, algo, nbytes, gpus, hw, valid)
        _check_choice("algo", algo, valid)
        if algo == "auto":
            from t3.ops.collectives import Executor, choose

            size = nbytes * (gpus - 1) / gpus if comm == "all_to_all" else nbytes
            algo = str(choose(comm, float(size), hw, gpus, Executor(executor, channels or None)))
    c = Comm(comm, float(nbytes), gpus, cus, algo, executor, channels)
    r = run_interference(GemmShape(m, n, k, dtype), c, hw, arrangement, float(lead_s), first)
    return {
        "m": m, "n": n, "k": k, "dtype": dtype, "comm": comm, "nbytes": nbytes, "gpus": gpus, "cus": cus,
        "algo": algo, "arrangement": arrangement, "hardware": hw.name,
        "gemm_alone_s": r["gemm_alone_s"], "gemm_together_s": r["gemm_together_s"],
        "comm_alone_s": r["comm_alone_s"], "comm_together_s": r["comm_together_s"],
        "executor": executor, "channels": channels, "lead_s": float(lead_s), "first": first,
        "gemm_slowdown_pct": 100.0 * r["gemm_slowdown"], "comm_slowdown_pct": 100.0 * r["comm_slowdown"],
        **({"pair_together_s": r["pair_together_s"], "pair_slowdown_pct": 100.0 * r["pair_slowdown"]}
           if "pair_together_s" in r else {}),
    }  # fmt: skip


def memory_stream(
    stream: str, nbytes: int, cus: int = 0, hardware: str | Path | Hardware = "h100-8"
) -> dict[str, Any]:
    """One memory stream kernel alone (``t3 measure``'s): ``stream`` = ``read``, ``write``, ``copy`` (1 read
    : 1 write) or ``triad`` (2 reads : 1 write), ``nbytes`` read + written in one pass, on ``cus`` CUs
    (0: every CU). Returns ``time_s`` (the kernel's own, its launch left out) and ``Bps`` = nbytes / time."""
    from t3.errors import ConfigError
    from t3.ops.interference import STREAMS, stream_bandwidth

    _check_choice("stream", stream, tuple(STREAMS))
    nbytes = _check_int("nbytes", nbytes, 1)
    cus = _check_int("cus", cus, 0)
    hw = _hardware(hardware)
    if cus > hw.compute.cus:
        raise ConfigError(f"cus: {cus} exceed the {hw.compute.cus} CUs of '{hw.name}'")
    r = stream_bandwidth(hw, stream, float(nbytes), cus)
    return {"stream": stream, "nbytes": nbytes, "cus": cus, "hardware": hw.name, **r}


LATENCIES = {"kernel_launch": "kernel_launch_s", "event_wait": "stream_wait_s", "flag": "flag_latency_s"}


def latency(what: str, hardware: str | Path | Hardware = "h100-8") -> dict[str, Any]:
    """A fixed cost of the GPU's runtime as the model charges it (``compute.<field>`` of the preset):
    ``kernel_launch`` (one kernel, launch to launch), ``event_wait`` (an event recorded on one stream and
    waited on by another) or ``flag`` (a flag stored by one kernel and seen by another polling it)."""
    _check_choice("what", what, tuple(LATENCIES))
    hw = _hardware(hardware)
    return {"what": what, "hardware": hw.name, "time_s": getattr(hw.compute, LATENCIES[what])}
