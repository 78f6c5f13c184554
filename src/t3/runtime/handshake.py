"""Agreement before any data moves: every rank states what it is about to do, every rank compares.

Each call of a runtime op describes itself as an ordered list of ``(field, value)`` pairs
(:func:`describe`): the op, the world size, the operand shapes, dtype and device type, the op's
own arguments, the path that will run and the plan with all its fields. A rank whose arguments
failed their local checks states that instead (:func:`refuse`), so its peers do not wait for it. Before the first byte of
operand data moves, the ranks all-gather these descriptions in one collective of a fixed
``RECORD_BYTES`` per rank on the op's group, issued at the same point of every op on every rank
(gloo needs the same collective issue order everywhere). Every rank then compares the gathered
descriptions itself, so every rank reaches the same decision from the same data: equal, and the op
proceeds; different, and every rank raises the same :class:`PeerError` naming the first field that
differs, each rank's value and the other fields that differ, with the group still usable (nothing
else was sent or received).

A rank that never reaches the handshake (dead, hung, or calling something else) leaves the others
waiting: they raise a :class:`PeerError` after the op's timeout, and then the group is unusable, as
after any peer failure.
"""

from __future__ import annotations

import time
from datetime import timedelta

import torch
import torch.distributed as dist

from t3.runtime.errors import PeerError
from t3.runtime.plan import Plan

MAGIC = b"t3rt1"  # the record format; a peer with another format is reported, not misread
RECORD_BYTES = 1024  # per rank; a description of validated arguments takes about 400 B


def describe(
    op: str,
    world: int,
    A: torch.Tensor,
    B: torch.Tensor,
    path: str,
    algo: str,
    tile: tuple[int, int],
    plan: Plan,
    scatter_dim: int | None = None,
) -> list[tuple[str, str]]:
    """What this rank is about to do, as ordered ``(field, value)`` pairs (the comparison reports
    the first field that differs, so the causes come before what they imply, e.g. shapes before
    the path a size threshold chose)."""
    out = [
        ("op", op),
        ("arguments", "accepted"),
        ("world_size", str(world)),
        ("A.shape", str(tuple(A.shape))),
        ("B.shape", str(tuple(B.shape))),
        ("dtype", str(A.dtype)),
        ("device", A.device.type),
    ]
    if scatter_dim is not None:
        out.append(("scatter_dim", str(scatter_dim)))
    out += [("path", path), ("algo", algo), ("tile", str(tuple(tile)))]
    out += [(f"plan.{k}", repr(v)) for k, v in plan.fields()]
    return out


def _encode(fields: list[tuple[str, str]]) -> bytes:
    text = "\n".join(f"{k}={v}" for k, v in fields).encode()
    rec = MAGIC + len(text).to_bytes(2, "little") + text
    if len(rec) > RECORD_BYTES:  # unreachable for validated arguments; checked before communicating
        raise ValueError(f"internal: call description of {len(rec)} B exceeds {RECORD_BYTES} B")
    return rec


def _decode(rec: bytes) -> list[tuple[str, str]] | None:
    if rec[: len(MAGIC)] != MAGIC:
        return None
    n = int.from_bytes(rec[len(MAGIC) : len(MAGIC) + 2], "little")
    text = rec[len(MAGIC) + 2 : len(MAGIC) + 2 + n].decode(errors="replace")
    return [(k, v) for k, _, v in (line.partition("=") for line in text.split("\n"))]


def _device(group: dist.ProcessGroup | None) -> torch.device:
    """Where the handshake tensor lives: on the CPU unless the group's only backend is NCCL."""
    backend = str(dist.get_backend(group)).lower()
    if backend == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def _ranks(ranks: list[int]) -> str:
    if len(ranks) == 1:
        return f"rank {ranks[0]}"
    return "ranks " + ", ".join(str(r) for r in ranks[:-1]) + f" and {ranks[-1]}"


def _says(values: dict[int, str]) -> str:
    by_value: dict[str, list[int]] = {}
    for r, v in sorted(values.items()):
        by_value.setdefault(v, []).append(r)
    return ", ".join(f"{_ranks(rs)} {'has' if len(rs) == 1 else 'have'} {v}" for v, rs in by_value.items())


def compare(op: str, rank: int, records: list[bytes]) -> PeerError | None:
    """The error every rank raises for these gathered records (None when they all agree).

    Pure function of the gathered data: every rank computes the same decision."""
    decoded = [_decode(r) for r in records]
    bad = [r for r, d in enumerate(decoded) if d is None]
    if bad:
        values = {
            r: ("another record format" if d is None else MAGIC.decode()) for r, d in enumerate(decoded)
        }
        return _disagreement(op, rank, "handshake format", values, ("handshake format",))
    per_rank = [dict(d) for d in decoded]  # type: ignore[arg-type]
    keys: list[str] = []
    for d in decoded:
        for k, _ in d:  # type: ignore[union-attr]
            if k not in keys:
                keys.append(k)
    missing = "(not stated)"
    if any(p.get("arguments", missing).startswith("rejected") for p in per_rank):
        keys = ["op", "arguments"]  # a rank that rejected its arguments states nothing else
    differing = tuple(k for k in keys if len({p.get(k, missing) for p in per_rank}) > 1)
    if not differing:
        return None
    first = differing[0]
    values = {r: p.get(first, missing) for r, p in enumerate(per_rank)}
    return _disagreement(op, rank, first, values, differing)


def _disagreement(
    op: str, rank: int, field: str, values: dict[int, str], differing: tuple[str, ...]
) -> PeerError:
    also = f" (also differing: {', '.join(differing[1:])})" if len(differing) > 1 else ""
    msg = (
        f"t3.runtime.{op} on rank {rank}: the ranks disagree before any data moved: {field}: "
        f"{_says(values)}{also}. Every rank must call the same operation with the same arguments; "
        "nothing was sent, the process group is still usable."
    )
    return PeerError(
        msg, op=op, peer=None, timed_out=False, group_usable=True, field=field, values=values,
        differing=differing,
    )  # fmt: skip


def refuse(group: dist.ProcessGroup | None, op: str, reason: str, timeout: float) -> None:
    """Take part in the handshake as a rank that rejected its arguments (``reason``): the peers that
    accepted theirs raise :class:`PeerError` naming this rank and the reason; this rank returns and
    raises its own error. A peer failure during the handshake still raises :class:`PeerError`."""
    text = " ".join(reason.split())[:600]
    try:
        agree(group, op, [("op", op), ("arguments", f"rejected ({text})")], timeout)
    except PeerError as err:
        if not err.group_usable:
            raise


def agree(group: dist.ProcessGroup | None, op: str, fields: list[tuple[str, str]], timeout: float) -> float:
    """All-gather the call descriptions and compare them; return the seconds it took.

    Raises :class:`PeerError` on every rank when they differ (group usable) or when a peer does not
    take part within ``timeout`` (group unusable). World size 1: nothing to compare, no collective."""
    world = dist.get_world_size(group)
    if world == 1:
        return 0.0
    t0 = time.perf_counter()
    rank = dist.get_rank(group)
    rec = _encode(fields)
    dev = _device(group)
    mine = torch.zeros(RECORD_BYTES, dtype=torch.uint8)
    mine[: len(rec)] = torch.frombuffer(bytearray(rec), dtype=torch.uint8)
    gathered = torch.empty(world * RECORD_BYTES, dtype=torch.uint8, device=dev)
    fn = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    err: Exception | None = None
    ok: bool | None = None
    try:
        work = fn(gathered, mine.to(dev), group=group, async_op=True)
        ok = work.wait(timeout=timedelta(seconds=timeout))
    except Exception as e:  # gloo raises RuntimeError for timeouts and closed connections
        err = e
    if err is not None or ok is False:
        text = "" if err is None else str(err).strip().splitlines()[0]
        timed_out = err is None or "timeout" in text.lower() or "timed out" in text.lower()
        why = (
            f"no progress within the timeout of {timeout:.1f} s (a rank dead, hung, failing an argument "
            "check, or not calling the same operation)"
            if timed_out
            else f"failed ({text})"
        )
        raise PeerError(
            f"t3.runtime.{op} on rank {rank}: handshake (all-gather of the call descriptions): {why}. "
            "The process group is unusable now; destroy and re-create it.",
            op=op,
            peer=None,
            timed_out=timed_out,
        ) from err
    raw = gathered.cpu().numpy().tobytes()
    records = [raw[r * RECORD_BYTES : (r + 1) * RECORD_BYTES] for r in range(world)]
    mismatch = compare(op, rank, records)
    if mismatch is not None:
        raise mismatch
    return time.perf_counter() - t0
