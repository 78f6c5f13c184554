"""Functions that run on every rank (see dist_harness.run_group) and the case matrix.

The oracle here is written independently of t3.runtime: plain ``A @ B`` and torch.distributed's
own collectives, exactly as a user would write the unfused code.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

RS_SHAPE = (24, 10, 24)  # M, K, N: divisible by world sizes 2, 3, 4 and by 2 pieces of a chunk
AG_SHAPE = (6, 10, 14)  # per-rank shard rows m, K, N
ODD_TILE = (5, 7)  # does not divide anything: edge tiles are clipped


@dataclass(frozen=True)
class Case:
    op: str  # "rs", "ar", "ag"
    algo: str
    granularity: str  # "shard", "ficco" (2 pieces per shard) or "all-peer" (FiCCO's pattern)
    split: str
    data: str  # "int" (bit-exact) or "float" (tolerance) or "f64"
    scatter_dim: int = 0
    tile: tuple[int, int] = ODD_TILE

    @property
    def id(self) -> str:
        sd = f"-sd{self.scatter_dim}" if self.op == "rs" else ""
        g = "shard" if self.granularity == "shard" else f"{self.granularity}-{self.split}"
        return f"{self.op}{sd}-{self.algo}-{g}-{self.data}-t{self.tile[0]}x{self.tile[1]}"


def _cases() -> list[Case]:
    out: list[Case] = []
    for algo in ("ring", "direct"):
        for data in ("int", "float"):
            for g, split in (("shard", "m"), ("ficco", "m"), ("ficco", "n")):
                for sd in (0, 1):
                    out.append(Case("rs", algo, g, split, data, sd))
                out.append(Case("ar", algo, g, split, data))
            for g, split in (("shard", "m"), ("ficco", "m"), ("ficco", "k")):
                out.append(Case("ag", algo, g, split, data))
    # default tile (bigger than every region), float64
    out += [
        Case("rs", "ring", "shard", "m", "f64", 1, (256, 256)),
        Case("ar", "direct", "shard", "m", "f64", 0, (256, 256)),
    ]
    out += [Case("ag", "ring", "shard", "m", "f64", 0, (256, 256))]
    # half precisions: small integers stay exact (|sums| <= 160 < 2**8)
    for op in ("rs", "ar", "ag"):
        out += [Case(op, "ring", "ficco", "m", "bf16"), Case(op, "direct", "shard", "m", "f16")]
    return out


CASES = _cases()


def make_inputs(op: str, data: str, rank: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1000 * seed + rank)
    m, k, n = AG_SHAPE if op == "ag" else RS_SHAPE
    dtype = {"f64": torch.float64, "bf16": torch.bfloat16, "f16": torch.float16}.get(data, torch.float32)
    if data in ("bf16", "f16"):  # |values| <= 2: every sum of K=10 products is exact in 8-bit mantissas
        return (
            torch.randint(-2, 3, (m, k), generator=g).to(dtype),
            torch.randint(-2, 3, (k, n), generator=g).to(dtype),
        )
    if data == "int":  # small integers: every product and sum is exact in float32
        return (
            torch.randint(-4, 5, (m, k), generator=g).to(dtype),
            torch.randint(-4, 5, (k, n), generator=g).to(dtype),
        )
    return torch.randn(m, k, generator=g, dtype=dtype), torch.randn(k, n, generator=g, dtype=dtype)


def oracle(op: str, A: torch.Tensor, B: torch.Tensor, world: int, scatter_dim: int = 0) -> torch.Tensor:
    if op == "ag":
        parts = [torch.empty_like(A) for _ in range(world)]
        dist.all_gather(parts, A.contiguous())
        return torch.cat(parts) @ B
    C = A @ B
    if op == "ar":
        dist.all_reduce(C)
        return C
    chunks = [c.contiguous() for c in C.chunk(world, dim=scatter_dim)]
    out = torch.empty_like(chunks[0])
    dist.reduce_scatter(out, chunks)
    return out


def call(case: Case, A: torch.Tensor, B: torch.Tensor, **kw: Any) -> Any:
    from t3.runtime import Plan, all_gather_matmul, matmul_all_reduce, matmul_reduce_scatter

    if case.granularity == "all-peer":
        plan = Plan("ficco", case.split, dist.get_world_size(), all_peer=True)  # type: ignore[arg-type]
    else:
        plan = Plan() if case.granularity == "shard" else Plan("ficco", case.split, 2)  # type: ignore[arg-type]
    kw = {"algo": case.algo, "tile": case.tile, "plan": plan, "timeout": 20.0, **kw}
    if case.op == "rs":
        return matmul_reduce_scatter(A, B, scatter_dim=case.scatter_dim, **kw)
    if case.op == "ar":
        return matmul_all_reduce(A, B, **kw)
    return all_gather_matmul(A, B, **kw)


def _pack(t: torch.Tensor) -> dict[str, Any]:
    # float64 holds every value of the dtypes under test exactly (numpy has no bfloat16)
    return {
        "value": t.to(torch.float64).numpy().copy(),
        "shape": tuple(t.shape),
        "stride": t.stride(),
        "dtype": str(t.dtype),
    }


def correctness(rank: int, world: int) -> dict[str, Any]:
    """Every case, tile-triggered, against the oracle; plus the reference path of each op."""
    res: dict[str, Any] = {}
    for case in CASES:
        A, B = make_inputs(case.op, case.data, rank)
        out, stats = call(case, A, B, path="tiled", return_stats=True)
        ref = oracle(case.op, A, B, world, case.scatter_dim)
        res[case.id] = {"out": _pack(out), "ref": _pack(ref), "stats": stats.as_dict()}
    for op in ("rs", "ar", "ag"):
        case = Case(op, "ring", "shard", "m", "int")
        A, B = make_inputs(op, "int", rank, seed=1)
        out, stats = call(case, A, B, path="reference", return_stats=True)
        res[f"reference-{op}"] = {
            "out": _pack(out),
            "ref": _pack(oracle(op, A, B, world)),
            "stats": stats.as_dict(),
        }
    return res


def fallbacks(rank: int, world: int) -> dict[str, Any]:
    """path='auto': small problems and a non-divisible all-reduce run the reference and say why."""
    res: dict[str, Any] = {}
    case = Case("rs", "ring", "shard", "m", "int")
    A, B = make_inputs("rs", "int", rank)
    out, st = call(case, A, B, path="auto", return_stats=True)
    res["small"] = (torch.equal(out, oracle("rs", A, B, world)), st.path, st.reason)
    out, st = call(case, A, B, path="auto", min_flops=0, return_stats=True)
    res["big-enough"] = (torch.equal(out, oracle("rs", A, B, world)), st.path, st.reason)
    # non-contiguous operands (transposed views) give the same values
    At, Bt = A.t().contiguous().t(), B.t().contiguous().t()
    assert not At.is_contiguous() and not Bt.is_contiguous()
    out, st = call(case, At, Bt, path="tiled", return_stats=True)
    res["non-contiguous"] = (torch.equal(out, oracle("rs", A, B, world)), st.path, st.reason)
    A = A[: world * 5 + 1]  # rows not divisible by the world size
    out, st = call(Case("ar", "ring", "shard", "m", "int"), A, B, path="auto", min_flops=0, return_stats=True)
    res["ar-uneven"] = (torch.equal(out, oracle("ar", A, B, world)), st.path, st.reason)
    return res


def invalid_arguments(rank: int, world: int) -> dict[str, Any]:
    """Each bad call must raise ValueError before any data moves; afterwards the group still works."""
    from t3.runtime import Plan, all_gather_matmul, matmul_all_reduce, matmul_reduce_scatter

    A, B = make_inputs("rs", "int", rank)
    bad: dict[str, Any] = {
        "A": lambda: matmul_reduce_scatter(A.numpy(), B),
        "A-3d": lambda: matmul_reduce_scatter(A[None], B),
        "B.dtype": lambda: matmul_reduce_scatter(A, B.double()),
        "A.dtype-int": lambda: matmul_all_reduce(A.long(), B.long()),
        "B.device": lambda: matmul_reduce_scatter(A, B.to("meta")),
        "B-inner": lambda: all_gather_matmul(A, B[:-1]),
        "scatter_dim": lambda: matmul_reduce_scatter(A, B, scatter_dim=2),
        "scatter_dim-uneven": lambda: matmul_reduce_scatter(A[: world * 4 + 1], B, path="tiled"),
        "scatter_dim-uneven-reference": lambda: matmul_reduce_scatter(
            A, B[:, : world * 3 + 1], scatter_dim=1
        ),
        "algo": lambda: matmul_reduce_scatter(A, B, algo="tree"),
        "tile": lambda: matmul_reduce_scatter(A, B, tile=(0, 4)),
        "tile-type": lambda: matmul_all_reduce(A, B, tile=8),
        "plan": lambda: matmul_reduce_scatter(A, B, plan="ficco"),
        "plan.split_dim": lambda: matmul_reduce_scatter(A, B, plan=Plan("ficco", "k", 2)),
        "plan.pieces": lambda: matmul_reduce_scatter(A, B, plan=Plan("ficco", "m", 5), path="tiled"),
        "plan.split_dim-ag": lambda: all_gather_matmul(A, B, plan=Plan("ficco", "n", 2)),
        "A rows (M)": lambda: matmul_all_reduce(A[: world * 4 + 1], B, path="tiled"),
        "path": lambda: matmul_all_reduce(A, B, path="fast"),
        "timeout": lambda: matmul_reduce_scatter(A, B, timeout=0),
        "group": lambda: matmul_reduce_scatter(A, B, group="world"),
        "check_peers": lambda: matmul_reduce_scatter(A, B, check_peers=1),
        "plan.reduce-ring": lambda: matmul_reduce_scatter(A, B, plan=f"shard-g{world}-M-dma-rb"),
        "plan.reduce-ag": lambda: all_gather_matmul(
            A, B[:10], plan=f"shard-g{world}-M-dma-rb", algo="direct"
        ),
        "plan-cu": lambda: matmul_all_reduce(A, B, plan=f"shard-g{world}-M-cu"),
    }
    res: dict[str, Any] = {}
    for name, fn in bad.items():
        try:
            fn()
            res[name] = ("no error", "")
        except ValueError as err:
            res[name] = ("ValueError", str(err))
        except Exception as err:  # noqa: BLE001
            res[name] = (type(err).__name__, str(err))
    # the group is still in step: a tile-triggered op and a collective give the right answer
    case = Case("rs", "ring", "shard", "m", "int")
    out = call(case, A, B, path="tiled")
    res["after"] = bool(torch.equal(out, oracle("rs", A, B, world)))
    return res


def peer_failure(
    rank: int, world: int, case: Case, victim: int, mode: str, timeout: float, path: str = "tiled"
) -> dict[str, Any]:
    """``victim`` dies between its first and second transfer (mode 'exit') or never calls the op
    (mode 'hang'); the other ranks must raise PeerError within the timeout. (Dying later, e.g. in
    the GEMM after all its transfers, may legitimately let the others finish.)"""
    from t3.runtime import PeerError
    from t3.runtime.comm import Peers

    A, B = make_inputs(case.op, "int", rank)
    if rank == victim:
        if mode == "hang":
            time.sleep(timeout + 5.0)
            return {"victim": True}
        calls = {"n": 0}
        orig_isend = Peers.isend

        def isend_then_die(self: Any, *a: Any, **k: Any) -> Any:
            calls["n"] += 1
            if calls["n"] == 2:
                os._exit(3)  # dead in the middle of the operation: one transfer out, the next never
            return orig_isend(self, *a, **k)

        Peers.isend = isend_then_die  # type: ignore[method-assign]
    t0 = time.monotonic()
    try:
        call(case, A, B, path=path, timeout=timeout)
        return {"error": None, "elapsed": time.monotonic() - t0}
    except PeerError as err:
        return {"error": "PeerError", "message": str(err), "elapsed": time.monotonic() - t0, "peer": err.peer}
    except Exception as err:  # noqa: BLE001
        return {"error": type(err).__name__, "message": str(err), "elapsed": time.monotonic() - t0}


def by_schedule_name(rank: int, world: int) -> dict[str, Any]:
    """FiCCO schedule names executed by the runtime equal the oracle; every suffix is executed (local
    order, batched reductions, one stream), as the Plan and the reduction count show."""
    from t3.runtime import all_gather_matmul, matmul_all_reduce, matmul_reduce_scatter

    res: dict[str, Any] = {}
    W, w2 = world, world * world
    names = {
        "rs": [f"shard-g{W}-M-dma", f"shard-g{W}-M-dma-ll", f"shard-g{2 * W}-N-dma-lf", "bulk-g1-M-dma",
               f"ficco-g{w2}-N-dma", f"ficco-g{W}-N-dma-s1-rb", "ficco-g1-N-dma-ll",
               f"shard-g{2 * W}-M-dma-rb", f"shard-g{2 * W}-N-dma-ll-rb"],
        "ar": [f"ficco-g{W}-N-dma-rb", f"shard-g{2 * W}-N-dma-rb", f"shard-g{W}-M-dma-ll"],
        "ag": [f"shard-g{W}-M-dma", f"shard-g{W}-M-dma-ll", f"shard-g{2 * W}-K-dma", f"shard-g{2 * W}-M-dma-ll",
               f"ficco-g{w2}-M-dma", f"ficco-g{W}-M-dma-ll", "ficco-g1-M-dma"]
        + ([f"ficco-g{W}-K-dma"] if AG_SHAPE[1] % W == 0 else []),
    }  # fmt: skip
    fns = {"rs": matmul_reduce_scatter, "ar": matmul_all_reduce, "ag": all_gather_matmul}
    for op, fn in fns.items():
        A, B = make_inputs(op, "int", rank)
        ref = oracle(op, A, B, world)
        for name in names[op]:
            algo = "direct" if name.startswith("ficco") or name.endswith("-rb") else "ring"
            out, st = fn(A, B, plan=name, algo=algo, path="tiled", timeout=20.0, return_stats=True)
            res[f"{op}:{name}"] = (bool(torch.equal(out, ref)), st.plan, st.reductions, algo)
    return res


def all_peer_world4(rank: int, world: int) -> dict[str, Any]:
    """FiCCO's all-peer schedules at world size 4 (shapes divisible into world^2 regions), all three
    ops, integer inputs: bit-exact against torch.distributed (NaN-poisoned outputs)."""
    from t3.runtime import all_gather_matmul, matmul_all_reduce, matmul_reduce_scatter

    g = torch.Generator().manual_seed(7 + rank)

    def ints(*shape: int) -> torch.Tensor:
        return torch.randint(-4, 5, shape, generator=g).to(torch.float32)

    res: dict[str, Any] = {}
    A, B = ints(32, 12), ints(12, 32)  # GEMM -> RS / AR: chunks of 8 rows, pieces of 2 rows or 8 columns
    for name in (f"ficco-g{world * world}-M-dma", f"ficco-g{world}-N-dma-ll", "ficco-g2-M-dma-rb"):
        out = matmul_reduce_scatter(A, B, plan=name, algo="direct", path="tiled", timeout=20.0)
        res[f"rs:{name}"] = bool(torch.equal(out, oracle("rs", A, B, world)))
        out = matmul_all_reduce(A, B, plan=name, algo="direct", path="tiled", timeout=20.0)
        res[f"ar:{name}"] = bool(torch.equal(out, oracle("ar", A, B, world)))
    A, B = ints(8, 16), ints(16, 12)  # AG -> GEMM: shards of 8 rows x K=16, pieces of 2 rows or 4 columns
    for name in (f"ficco-g{world * world}-M-dma", f"ficco-g{world}-K-dma", "ficco-g8-M-dma-ll"):
        out = all_gather_matmul(A, B, plan=name, algo="direct", path="tiled", timeout=20.0)
        res[f"ag:{name}"] = bool(torch.equal(out, oracle("ag", A, B, world)))
    return res


def disagreement(rank: int, world: int) -> dict[str, Any]:
    """The last rank calls with one thing changed; every rank must raise the same PeerError from the
    handshake, and a correct call right after must succeed (the group stayed usable)."""
    from t3.runtime import PeerError, Plan, all_gather_matmul, matmul_all_reduce, matmul_reduce_scatter

    odd = rank == world - 1
    W = world
    A, B = make_inputs("rs", "int", rank)
    Ag, Bg = make_inputs("ag", "int", rank)
    kw: dict[str, Any] = {"path": "tiled", "timeout": 20.0, "tile": ODD_TILE}
    rs, ar, ag = matmul_reduce_scatter, matmul_all_reduce, all_gather_matmul
    wider = torch.cat([A, A[:W]]) if odd else A  # M + W rows: still divisible by the world size
    cases: dict[str, Any] = {
        "M": lambda: rs(wider, B, **kw),
        "N": lambda: rs(A, torch.cat([B, B[:, :W]], 1) if odd else B, **kw),
        "K": lambda: rs(torch.cat([A, A[:, :1]], 1) if odd else A, torch.cat([B, B[:1]]) if odd else B, **kw),
        "dtype": lambda: rs(A.double() if odd else A, B.double() if odd else B, **kw),
        "plan.pieces": lambda: rs(A, B, **kw, plan=Plan("ficco", "m", 4 if odd else 2)),
        "plan.local_first": lambda: rs(A, B, **kw, plan=f"shard-g{W}-M-dma{'-ll' if odd else ''}"),
        "plan.reduce": lambda: rs(A, B, **kw, algo="direct", plan=f"shard-g{W}-M-dma{'-rb' if odd else ''}"),
        "plan-all-peer": lambda: rs(A, B, **kw, algo="direct", plan=f"ficco-g{W}-N-dma" if odd else None),
        "algo": lambda: ar(A, B, **kw, algo="direct" if odd else "ring"),
        "scatter_dim": lambda: rs(A, B, **kw, scatter_dim=int(odd)),
        "op": lambda: (ar if odd else rs)(A, B, **kw),
        "path": lambda: ar(A, B, **{**kw, "path": "reference" if odd else "tiled"}),
        "min_flops": lambda: rs(A, B, **{**kw, "path": "auto"}, min_flops=0 if odd else 2**40),
        "tile": lambda: rs(A, B, **{**kw, "tile": (4, 4) if odd else ODD_TILE}),
        "ag-shard-rows": lambda: ag(torch.cat([Ag, Ag[:1]]) if odd else Ag, Bg, **kw),
        "ag-reference-dtype": lambda: ag(
            Ag.half() if odd else Ag, Bg.half() if odd else Bg, path="reference"
        ),
        # the last rank's own checks reject its call: it raises ValueError, the others PeerError at once
        "rejected-M": lambda: rs(torch.cat([A, A[:1]]) if odd else A, B, **kw),
        "rejected-plan": lambda: ar(A, B, **kw, plan=f"shard-g{W}-M-{'cu' if odd else 'dma'}"),
    }
    res: dict[str, Any] = {}
    ref = oracle("rs", A, B, world)
    for name, fn in cases.items():
        t0 = time.monotonic()
        try:
            fn()
            got: dict[str, Any] = {"error": None}
        except PeerError as err:
            got = {"error": "PeerError", "field": err.field, "values": err.values, "usable": err.group_usable,
                   "differing": err.differing, "message": str(err)}  # fmt: skip
        except Exception as err:  # noqa: BLE001
            got = {"error": type(err).__name__, "message": str(err)}
        got["elapsed"] = time.monotonic() - t0
        # the group is still in step: a correct tile-triggered call gives the reference's answer
        got["after"] = bool(torch.equal(rs(A, B, **kw), ref))
        res[name] = got
    _, st = rs(A, B, **kw, return_stats=True)
    _, off = rs(A, B, **kw, return_stats=True, check_peers=False)
    res["handshake_s"] = (st.handshake_s, off.handshake_s)
    return res


def world_one(rank: int, world: int) -> dict[str, Any]:
    """World size 1: path='tiled' runs the tile-triggered path (no transfers), 'auto' the reference;
    both equal A @ B computed here."""
    from t3.runtime import Plan, all_gather_matmul, matmul_all_reduce, matmul_reduce_scatter

    res: dict[str, Any] = {}
    for op, fn in (("rs", matmul_reduce_scatter), ("ar", matmul_all_reduce), ("ag", all_gather_matmul)):
        A, B = make_inputs(op, "int", rank)
        ref = A @ B
        plans: list[tuple[str, Any]] = [("ring", None), ("direct", Plan("ficco", "m", 2)),
                                        ("direct", "ficco-g1-M-dma"), ("ring", "shard-g2-M-dma-ll")]  # fmt: skip
        if op != "ag":
            plans.append(("direct", "shard-g2-N-dma-rb"))
        for algo, plan in plans:
            for path in ("tiled", "auto"):
                out, st = fn(
                    A, B, algo=algo, plan=plan, path=path, tile=ODD_TILE, min_flops=0, return_stats=True
                )
                res[f"{op}:{algo}:{plan}:{path}"] = (
                    bool(torch.equal(out, ref)),
                    st.path,
                    st.reason,
                    st.handshake_s,
                )
    return res
