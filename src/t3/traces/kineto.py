"""The edge: a PyTorch profiler (Kineto) Chrome-trace JSON file -> :class:`ImportedTrace`.

``torch.profiler`` writes one JSON object per rank (plain or gzipped) whose ``traceEvents`` hold
Chrome "complete" events (``ph: "X"``, ``ts`` / ``dur`` in microseconds, ``pid`` / ``tid``, ``cat``,
``name``, ``args``). The events this reader uses:

- ``cat: cpu_op``: framework ops on host threads. With ``record_shapes=True`` their ``args`` carry
  ``Input Dims`` (one list per input; a TensorList input is a list of lists) and ``Input type``.
  GEMMs are ``aten::mm``, ``aten::addmm``, ``aten::bmm``, ``aten::baddbmm``, ``aten::_scaled_mm``
  (and ``aten::matmul`` / ``aten::linear`` when nothing inside them is one of those).
  Collectives are ``c10d::allreduce_``, ``c10d::_allgather_base_``, ``c10d::_reduce_scatter_base_``,
  ``c10d::alltoall_base_``, ... (host side: enqueue) and ``record_param_comms``, whose args name
  the collective (``Collective name``, ``In msg nelems``, ``Out msg nelems``, ``Group size``,
  ``dtype``, ``Process Group Name``).
- ``cat: user_annotation``: ``ProfilerStep#N`` (one per step), ``nccl:<collective>`` (NCCL, host),
  ``gloo:<collective>`` (gloo's worker thread running the transfer: its time on CPU traces).
- ``cat: cuda_runtime`` / ``cuda_driver``: launches on the host thread; ``args.correlation`` links
  a launch to its device activity (so does the ``ac2g`` flow pair ``ph: "s"`` / ``"f"``, same id).
- ``cat: kernel`` (also ``gpu_memcpy``, ``gpu_memset``): device activity with ``args.correlation``,
  ``External id``, ``device``, ``stream``. NCCL kernels of recent PyTorch repeat the
  ``record_param_comms`` args.
- top-level ``distributedInfo`` (``backend``, ``rank``, ``world_size``, ``pg_config``) and
  ``deviceProperties`` (GPU names).

A kernel belongs to the innermost host op around its launch (the launch's enclosing ops on the same
thread). Times: a GPU GEMM's time is the sum of its kernels; a collective's time is its NCCL kernel
(GPU), its ``gloo:`` worker range (CPU, gloo), or, with neither, its host call (``cpu-enqueue``: a
lower bound, said in the notes). A collective's *exposed* time is the part of its interval during
which no compute ran on the device (GPU: no non-communication kernel on any stream; CPU: no op
outside communication on the ranks' compute threads).
"""

from __future__ import annotations

import bisect
import gzip
import json
import math
import re
import zlib
from pathlib import Path
from typing import Any

from t3.traces.schema import (
    ALL_GATHER,
    ALL_REDUCE,
    ALL_TO_ALL,
    REDUCE_SCATTER,
    ImportedTrace,
    TraceCollective,
    TraceError,
    TraceGemm,
)

US = 1e-6  # trace timestamps are microseconds
TOL_US = 1e-3  # nesting tolerance for rounded timestamps

HOST_CATS = ("cpu_op", "user_annotation", "cuda_runtime", "cuda_driver", "python_function")
DEVICE_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
TORCH_CATS = {*HOST_CATS, *DEVICE_CATS, "ac2g", "gpu_user_annotation", "fwdbwd"}
INNER_GEMMS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::_scaled_mm")
OUTER_GEMMS = ("aten::matmul", "aten::linear")
GEMM_OPS = (*INNER_GEMMS, *OUTER_GEMMS)
STEP_RE = re.compile(r"^ProfilerStep#\d+$")

DTYPES = {
    # "Input type" spellings (C++ type names)
    "float": "fp32", "double": "fp64", "c10::Half": "fp16", "c10::BFloat16": "bf16",
    "c10::Float8_e4m3fn": "fp8", "c10::Float8_e5m2": "fp8", "c10::Float8_e4m3fnuz": "fp8",
    "c10::Float8_e5m2fnuz": "fp8", "long int": "int64", "int": "int32", "signed char": "int8",
    "unsigned char": "uint8", "bool": "bool",
    # record_param_comms "dtype" spellings (ScalarType names)
    "Float": "fp32", "Double": "fp64", "Half": "fp16", "BFloat16": "bf16", "Float8_e4m3fn": "fp8",
    "Float8_e5m2": "fp8", "Long": "int64", "Int": "int32", "Char": "int8", "Byte": "uint8", "Bool": "bool",
}  # fmt: skip


class _Ev:
    """One complete event (internal to the edge)."""

    __slots__ = ("i", "cat", "name", "pid", "tid", "ts", "dur", "end", "args", "parent", "thread")

    def __init__(self, i: int, raw: dict[str, Any], ts: float, dur: float):
        self.i, self.ts, self.dur, self.end = i, ts, dur, ts + dur
        self.cat = str(raw.get("cat", ""))
        self.name = str(raw.get("name", ""))
        self.pid, self.tid = raw.get("pid"), raw.get("tid")
        self.thread = f"{self.pid}:{self.tid}"
        args = raw.get("args")
        self.args: dict[str, Any] = args if isinstance(args, dict) else {}
        self.parent: _Ev | None = None

    def ancestors(self):
        e = self
        while e is not None:
            yield e
            e = e.parent


# ---- reading -----------------------------------------------------------------------------------------


def read_document(path: str | Path) -> dict[str, Any]:
    """The trace's JSON object (gzip detected by its magic bytes); TraceError with the reason."""
    p, s = Path(path), str(path)
    if p.is_dir():
        raise TraceError(f"trace: '{s}' is a directory; pass one rank's trace file (*.pt.trace.json[.gz])")
    if not p.is_file():
        raise TraceError(f"trace: file '{s}' not found")
    raw = p.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as err:
            raise TraceError(f"trace '{s}': damaged or truncated gzip data ({err})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise TraceError(f"trace '{s}': not UTF-8 text, so not a JSON trace") from None
    if not text.strip():
        raise TraceError(f"trace '{s}': the file is empty")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as err:
        cut = " (the text ends early: truncated file?)" if err.pos >= len(text.rstrip()) - 1 else ""
        raise TraceError(
            f"trace '{s}': not valid JSON at line {err.lineno} column {err.colno}: {err.msg}{cut}"
        ) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise TraceError(
            f"trace '{s}': no 'traceEvents' list, so not a torch.profiler Chrome trace "
            "(torch.profiler's export_chrome_trace / tensorboard_trace_handler write one per rank)"
        )
    events = doc["traceEvents"]
    cats = {e.get("cat") for e in events if isinstance(e, dict)}
    if not cats & TORCH_CATS:
        raise TraceError(
            f"trace '{s}': no cpu_op, kernel or user_annotation events, so not a torch.profiler trace "
            "(written by another tool?)"
        )
    return doc


# ---- shapes and names ---------------------------------------------------------------------------------


def _dims(x: Any) -> list[int] | None:
    if isinstance(x, list) and x and all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in x):
        return x
    return None


def _numel(x: Any) -> int | None:
    """Elements of one tensor's dims, or of a TensorList (list of dims); None if unknown/empty."""
    d = _dims(x)
    if d is not None:
        return math.prod(d)
    if isinstance(x, list) and x and all(isinstance(t, list) for t in x):
        parts = [_numel(t) for t in x]
        return sum(parts) if all(p is not None for p in parts) else None
    return None


def gemm_shape(name: str, dims: Any) -> tuple[int, int, int, int] | None:
    """(m, n, k, batch) of a GEMM op from its ``Input Dims``; None if they do not describe one."""
    if not isinstance(dims, list):
        return None
    pick = {"aten::addmm": (1, 2), "aten::baddbmm": (1, 2)}.get(name, (0, 1))
    if len(dims) <= pick[1]:
        return None
    a, b = _dims(dims[pick[0]]), _dims(dims[pick[1]])
    if a is None or b is None:
        return None
    if name == "aten::linear":  # input (..., K), weight (N, K)
        if len(b) != 2 or b[1] != a[-1]:
            return None
        return math.prod(a[:-1]) if len(a) > 1 else 1, b[0], a[-1], 1
    if len(a) == 2 and len(b) == 2:
        return (a[0], b[1], a[1], 1) if a[1] == b[0] else None
    if len(a) >= 3 and len(b) == 2 and name == "aten::matmul":  # (..., M, K) @ (K, N): rows fold into M
        return (math.prod(a[:-1]), b[1], a[-1], 1) if a[-1] == b[0] else None
    if len(a) == len(b) >= 3 and a[:-2] == b[:-2] and a[-1] == b[-2]:
        return a[-2], b[-1], a[-1], math.prod(a[:-2])
    return None


def dtype_of(x: Any) -> str | None:
    if not isinstance(x, str) or not x:
        return None
    return DTYPES.get(x, x)


def canonical(name: str) -> str | None:
    """Canonical collective name of a c10d op, annotation, record_param_comms name or NCCL kernel."""
    s = name.split("(")[0].lower()
    for prefix in ("c10d::", "nccl:", "gloo:", "rccl:"):
        s = s.removeprefix(prefix)
    c = s.replace("_", "")
    for key, op in (("reducescatter", REDUCE_SCATTER), ("allgather", ALL_GATHER), ("allreduce", ALL_REDUCE),
                    ("alltoall", ALL_TO_ALL), ("broadcast", "broadcast"), ("sendrecv", "send/recv"),
                    ("barrier", "barrier")):  # fmt: skip
        if key in c:
            return op
    for key in ("send", "recv", "reduce", "gather", "scatter"):
        if c.startswith(key) or c.startswith(f"nccldevkernel{key}") or c.startswith(f"ncclkernel{key}"):
            return key
    return None


def _c10d_sizes(op: str, name: str, dims: Any) -> tuple[int | None, int | None]:
    """(input elements, output elements) of a c10d op from its Input Dims."""
    if not isinstance(dims, list) or not dims:
        return None, None
    n0 = _numel(dims[0])
    n1 = _numel(dims[1]) if len(dims) > 1 else None
    base = name.removeprefix("c10d::")
    if base in ("allreduce_", "allreduce_coalesced_", "broadcast_", "reduce_"):
        return n0, n0
    if op in (ALL_GATHER, REDUCE_SCATTER, ALL_TO_ALL):  # (outputs, inputs, ...)
        return n1, n0
    return n0, n0


def _int(x: Any) -> int | None:
    if isinstance(x, bool):
        return None
    if isinstance(x, int):
        return x if x > 0 else None
    if isinstance(x, str) and x.strip().isdigit():
        v = int(x)
        return v if v > 0 else None
    return None


# ---- the parse ----------------------------------------------------------------------------------------


class _Parse:
    def __init__(self, doc: dict[str, Any], source: str):
        self.doc, self.source, self.notes = doc, source, []
        self.bad_sizes = 0  # collectives whose In / Out msg nelems were given but not positive counts
        self.bad_groups = 0  # collective annotations whose Group size was given but is not a positive count
        self.host: dict[str, list[_Ev]] = {}
        self.device: list[_Ev] = []
        bad = 0
        for i, raw in enumerate(doc["traceEvents"]):
            if not isinstance(raw, dict) or raw.get("ph") != "X":
                continue
            ts, dur = raw.get("ts"), raw.get("dur", 0)
            if isinstance(ts, str):
                try:
                    ts = float(ts)
                except ValueError:
                    ts = None
            if (
                not isinstance(ts, int | float) or not isinstance(dur, int | float)
                or not math.isfinite(ts) or not math.isfinite(dur) or dur < 0
            ):  # fmt: skip
                bad += 1
                continue
            e = _Ev(i, raw, float(ts), float(dur))
            if e.cat in DEVICE_CATS:
                self.device.append(e)
            elif e.cat in HOST_CATS:
                self.host.setdefault(e.thread, []).append(e)
        if bad:
            self.notes.append(f"{bad} events without a finite, non-negative ts / dur were skipped")
        for evs in self.host.values():
            _nest(evs)
        self.launch: dict[Any, _Ev] = {}
        for evs in self.host.values():
            for e in evs:
                c = e.args.get("correlation")
                if e.cat in ("cuda_runtime", "cuda_driver") and c is not None:
                    self.launch[c] = e
        self._flows(doc["traceEvents"])
        dist = doc.get("distributedInfo") if isinstance(doc.get("distributedInfo"), dict) else {}
        self.backend = dist.get("backend")
        r = dist.get("rank")
        self.rank = r if isinstance(r, int) and not isinstance(r, bool) and r >= 0 else None
        self.world = _int(dist.get("world_size"))
        pgs = dist.get("pg_config")
        self.pg_sizes = (
            {str(g.get("pg_name")): _int(g.get("pg_size")) for g in pgs if isinstance(g, dict)}
            if isinstance(pgs, list) else {}
        )  # fmt: skip

    def _flows(self, raw_events: list) -> None:
        """ac2g flow starts locate launches the runtime events did not name (older traces)."""
        starts = [
            e for e in raw_events if isinstance(e, dict) and e.get("cat") == "ac2g" and e.get("ph") == "s"
        ]
        if not starts:
            return
        by_thread = {t: (sorted(evs, key=lambda e: e.ts)) for t, evs in self.host.items()}
        keys = {t: [e.ts for e in evs] for t, evs in by_thread.items()}
        for f in starts:
            cid = f.get("id")
            if cid in self.launch or not isinstance(f.get("ts"), int | float):
                continue
            t = f"{f.get('pid')}:{f.get('tid')}"
            if t not in by_thread:
                continue
            j = bisect.bisect_right(keys[t], f["ts"] + TOL_US) - 1
            best = None
            while j >= 0:  # innermost host event containing the flow start
                e = by_thread[t][j]
                if (
                    e.ts <= f["ts"] + TOL_US
                    and e.end >= f["ts"] - TOL_US
                    and (best is None or e.dur < best.dur)
                ):
                    best = e
                if f["ts"] - e.ts > 1e6:  # 1 s back is far enough for a launch's parent ops
                    break
                j -= 1
            if best is not None:
                self.launch[cid] = best

    # -- kernels -> host ops --------------------------------------------------------------------------
    def _host_chain(self, k: _Ev) -> list[_Ev]:
        e = self.launch.get(k.args.get("correlation"))
        return list(e.ancestors()) if e is not None else []

    @staticmethod
    def _is_comm_kernel(k: _Ev) -> bool:
        n = k.name.lower()
        return n.startswith(("nccl", "rccl")) or "Collective name" in k.args

    def gemms_gpu(self) -> tuple[list[dict], int]:
        owned: dict[int, dict] = {}
        unshaped = set()
        for k in self.kernels:
            if self._is_comm_kernel(k):
                continue
            chain = self._host_chain(k)
            gemm = next((e for e in chain if e.name in GEMM_OPS and e.cat == "cpu_op"), None)
            if gemm is None:
                continue
            shaped = next(
                (e for e in chain if e.name in GEMM_OPS and gemm_shape(e.name, e.args.get("Input Dims"))),
                None,
            )
            if shaped is None:
                unshaped.add(gemm.i)
                continue
            rec = owned.setdefault(shaped.i, {"op": shaped, "kernels": []})
            rec["kernels"].append(k)
        return list(owned.values()), len(unshaped)

    def gemms_cpu(self) -> tuple[list[dict], int]:
        comm_threads = self.gloo_threads()
        inner: set[int] = set()
        cands = []
        for t, evs in self.host.items():
            if t in comm_threads:
                continue
            for e in evs:
                if e.cat == "cpu_op" and e.name in GEMM_OPS:
                    cands.append(e)
                    for a in list(e.ancestors())[1:]:
                        if a.name in GEMM_OPS:
                            inner.add(a.i)
        out, unshaped = [], 0
        for e in cands:
            if e.i in inner:
                continue
            if gemm_shape(e.name, e.args.get("Input Dims")) is None:
                unshaped += 1
                continue
            out.append({"op": e, "kernels": []})
        return out, unshaped

    # -- collectives ------------------------------------------------------------------------------------
    def gloo_threads(self) -> set[str]:
        return {t for t, evs in self.host.items() if any(e.name.startswith("gloo:") for e in evs)}

    def _group(self, args: dict, default_pg: str | None = None) -> tuple[int | None, str | None]:
        g = _int(args.get("Group size"))
        if g is None and args.get("Group size") is not None:
            self.bad_groups += 1  # (given, but not a positive count: said in the notes)
        pg = args.get("Process Group Name")
        pg = str(pg) if pg is not None else default_pg
        if g is None and pg is not None:
            g = self.pg_sizes.get(pg)
        if g is None and len(self.pg_sizes) <= 1:
            g = self.world or (next(iter(self.pg_sizes.values())) if self.pg_sizes else None)
        return g, pg

    def _describe(self, chain: list[_Ev], kernel: _Ev | None) -> dict[str, Any] | None:
        """What a collective is, from the richest source: record_param_comms args (on the kernel or
        a host op), else the c10d op's dims, else an nccl:/gloo: annotation, else the kernel name."""
        src = [kernel] if kernel is not None else []
        src += chain
        for e in src:
            if "Collective name" in e.args:
                a = e.args
                op = canonical(str(a["Collective name"]))
                if op is None:
                    continue
                g, pg = self._group(a)
                d = {"op": op, "in": _int(a.get("In msg nelems")), "out": _int(a.get("Out msg nelems")),
                     "dtype": dtype_of(a.get("dtype")), "group_size": g, "group": pg}  # fmt: skip
                if d["in"] is None and d["out"] is None:  # some versions leave sizes to the c10d op
                    if a.get("In msg nelems") is not None or a.get("Out msg nelems") is not None:
                        self.bad_sizes += 1  # (given, but not a positive count: said in the notes)
                    dims = self._from_dims(chain) or {}
                    for known in ("group_size", "group"):  # the annotation's group stands
                        if d[known] is not None:
                            dims.pop(known, None)
                    d.update(dims)
                    d["op"] = op
                return d
        d = self._from_dims(chain)
        if d is not None:
            return d
        if kernel is not None:
            op = canonical(kernel.name)
            if op is not None:
                g, pg = self._group({})
                return {"op": op, "in": None, "out": None, "dtype": None, "group_size": g, "group": pg}
        return None

    def _from_dims(self, chain: list[_Ev]) -> dict[str, Any] | None:
        c10d = next((e for e in chain if e.name.startswith("c10d::") and canonical(e.name)), None)
        ann = next((e for e in chain if e.name.startswith(("nccl:", "gloo:")) and canonical(e.name)), None)
        if c10d is None and ann is None:
            return None
        g, pg = self._group({})
        if c10d is not None:
            op = canonical(c10d.name)
            i, o = _c10d_sizes(op, c10d.name, c10d.args.get("Input Dims"))
        else:
            op = canonical(ann.name)
            i = o = None
        if (i is None and o is None) and ann is not None:
            n = _numel((ann.args.get("Input Dims") or [None])[0])
            i = n
            o = n if op == ALL_REDUCE else None
        types = []
        for e in (ann, c10d):
            if e is not None:
                types += [t for t in (e.args.get("Input type") or []) if isinstance(t, str)]
        dt = next((dtype_of(t) for t in types if t in DTYPES), None)
        return {"op": op, "in": i, "out": o, "dtype": dt, "group_size": g, "group": pg}

    def collectives_gpu(self) -> list[dict]:
        groups: dict[Any, dict] = {}
        for k in self.kernels:
            if not self._is_comm_kernel(k):
                continue
            chain = self._host_chain(k)
            host_op = next(
                (e for e in chain if e.name.startswith("c10d::") or e.name == "record_param_comms"), None
            )
            key = ("op", host_op.i) if host_op is not None else ("k", k.i)
            rec = groups.get(key)
            if rec is None:
                d = self._describe(chain, k)
                if d is None:
                    continue
                top = next((e for e in reversed(chain) if e.name.startswith("c10d::")), None)
                launch = top or host_op or (chain[0] if chain else None)
                rec = groups[key] = {**d, "name": k.name.split("(")[0], "spans": [],
                                     "launch": launch.ts if launch else k.ts,
                                     "thread": launch.thread if launch else k.thread,
                                     "device": k.args.get("device", k.pid), "timing": "gpu-kernel"}  # fmt: skip
            rec["spans"].append((k.ts, k.end))
        return list(groups.values())

    def collectives_cpu(self) -> list[dict]:
        gloo = sorted(
            (
                e
                for evs in self.host.values()
                for e in evs
                if e.name.startswith("gloo:") and canonical(e.name)
            ),
            key=lambda e: (e.ts, e.i),
        )
        gthreads = self.gloo_threads()
        calls = sorted(
            (e for t, evs in self.host.items() if t not in gthreads for e in evs
             if e.name.startswith("c10d::") and canonical(e.name)
             and not any(a.name.startswith("c10d::") for a in list(e.ancestors())[1:])),
            key=lambda e: (e.ts, e.i),
        )  # fmt: skip
        out, j = [], 0
        for c in calls:
            chain = [c, *[e for e in _descendants(c, self.host[c.thread]) if e.name == "record_param_comms"]]
            while j < len(gloo) and gloo[j].ts < c.ts - TOL_US:
                out.append(self._gloo_only(gloo[j]))
                j += 1
            work = gloo[j] if j < len(gloo) else None
            if work is not None:
                j += 1
            d = self._describe([*chain[1:], c] + ([work] if work else []), None) or {}
            d.update(op=canonical(c.name))
            if work is not None:
                rec = {**d, "name": work.name, "spans": [(work.ts, work.end)], "timing": "gloo-thread"}
            else:
                rec = {**d, "name": c.name, "spans": [(c.ts, c.end)], "timing": "cpu-enqueue"}
            rec.update(launch=c.ts, thread=c.thread, device="cpu")
            out.append(rec)
        out += [self._gloo_only(w) for w in gloo[j:]]
        return out

    def _gloo_only(self, w: _Ev) -> dict:
        d = self._from_dims([w]) or {}
        return {**d, "name": w.name, "spans": [(w.ts, w.end)], "timing": "gloo-thread",
                "launch": w.ts, "thread": w.thread, "device": "cpu"}  # fmt: skip

    # -- busy intervals -------------------------------------------------------------------------------
    def busy_gpu(self) -> dict[Any, list[tuple[float, float]]]:
        out: dict[Any, list[tuple[float, float]]] = {}
        for k in self.kernels:
            if not self._is_comm_kernel(k):
                out.setdefault(k.args.get("device", k.pid), []).append((k.ts, k.end))
        return {d: _merge(iv) for d, iv in out.items()}

    def busy_cpu(self) -> list[tuple[float, float]]:
        gthreads = self.gloo_threads()
        iv = []
        for t, evs in self.host.items():
            if t in gthreads:
                continue
            for e in evs:
                if e.cat != "cpu_op":
                    continue
                if any(a.name.startswith("c10d::") or a.name == "record_param_comms" for a in e.ancestors()):
                    continue
                iv.append((e.ts, e.end))
        return _merge(iv)


def _nest(evs: list[_Ev]) -> None:
    """Parent links on one host thread (ranges nest; partial overlaps are not children)."""
    evs.sort(key=lambda e: (e.ts, -e.dur, e.i))
    stack: list[_Ev] = []
    for e in evs:
        while stack and not (e.ts >= stack[-1].ts - TOL_US and e.end <= stack[-1].end + TOL_US):
            stack.pop()
        e.parent = stack[-1] if stack else None
        stack.append(e)


def _descendants(e: _Ev, evs: list[_Ev]) -> list[_Ev]:
    """Events nested in ``e`` on its thread (``evs`` sorted by start, as :func:`_nest` leaves them)."""
    i = bisect.bisect_left(evs, (e.ts, -e.dur, e.i), key=lambda x: (x.ts, -x.dur, x.i))
    out = []
    for x in evs[i + 1 :]:
        if x.ts > e.end + TOL_US:
            break
        if any(a is e for a in x.ancestors()):
            out.append(x)
    return out


def _merge(iv: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[list[float]] = []
    for s, e in sorted(iv):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def covered(iv: list[tuple[float, float]], s: float, e: float) -> float:
    """Length of [s, e] covered by merged intervals ``iv``."""
    j = max(0, bisect.bisect_right(iv, (s, math.inf)) - 1)
    tot = 0.0
    while j < len(iv) and iv[j][0] < e:
        a, b = max(iv[j][0], s), min(iv[j][1], e)
        if b > a:
            tot += b - a
        j += 1
    return tot


def parse(doc: dict[str, Any], source: str) -> ImportedTrace:
    """An :class:`ImportedTrace` (pairs not yet formed) from a torch.profiler trace document."""
    p = _Parse(doc, source)
    p.kernels = [e for e in p.device if e.cat == "kernel"]
    gpu = bool(p.kernels)
    if gpu:
        graw, unshaped = p.gemms_gpu()
        craw = p.collectives_gpu()
        busy = p.busy_gpu()
        device_events = p.device
    else:
        graw, unshaped = p.gemms_cpu()
        craw = p.collectives_cpu()
        cpu_busy = p.busy_cpu()
        busy = {"cpu": cpu_busy}
        device_events = [
            e for evs in p.host.values() for e in evs if e.cat == "cpu_op" or e.name.startswith("gloo:")
        ]
        if p.backend == "nccl":
            p.notes.append(
                "NCCL trace without GPU activity: profile with ProfilerActivity.CUDA for device times"
            )
    all_ts = [e.ts for e in device_events] + [e.ts for evs in p.host.values() for e in evs]
    if not all_ts:
        raise TraceError(f"trace '{source}': no complete events with timestamps")
    t0 = min(all_ts)
    w0 = min((e.ts for e in device_events), default=t0)
    w1 = max((e.end for e in device_events), default=t0)

    gemms = []
    for rec in sorted(graw, key=lambda r: (r["op"].ts, r["op"].i)):
        op = rec["op"]
        m, n, k, b = gemm_shape(op.name, op.args["Input Dims"])
        types = op.args.get("Input type") or []
        ai = 1 if op.name in ("aten::addmm", "aten::baddbmm") else 0
        dt = dtype_of(types[ai]) if len(types) > ai else None
        if op.name == "aten::_scaled_mm":
            dt = "fp8"
        ks = rec["kernels"]
        if ks:
            start, end, busy_s = min(x.ts for x in ks), max(x.end for x in ks), sum(x.dur for x in ks)
        else:
            start, end, busy_s = op.ts, op.end, op.dur
        gemms.append(TraceGemm(
            len(gemms), op.name, m, n, k, b, dt or "unknown", (start - t0) * US, (end - t0) * US,
            busy_s * US, (op.ts - t0) * US, op.thread, len(ks),
        ))  # fmt: skip
    colls = []
    enqueue = 0
    for rec in sorted(craw, key=lambda r: (r["launch"], r["spans"][0][0])):
        if rec.get("op") is None:
            continue
        s, e = min(a for a, _ in rec["spans"]), max(b for _, b in rec["spans"])
        iv = busy.get(rec["device"], []) if gpu else busy["cpu"]
        dur_busy = sum(b - a for a, b in rec["spans"])
        exposed = max(0.0, sum(b - a - covered(iv, a, b) for a, b in rec["spans"]))
        exposed = min(exposed, dur_busy)
        enqueue += rec["timing"] == "cpu-enqueue"
        colls.append(TraceCollective(
            len(colls), rec["op"], rec["name"], rec.get("in"), rec.get("out"), rec.get("dtype"),
            rec.get("group_size"), rec.get("group"), (s - t0) * US, (e - t0) * US, (rec["launch"] - t0) * US,
            rec["thread"], min(exposed * US, (e - t0) * US - (s - t0) * US), rec["timing"],
        ))  # fmt: skip
    spans: dict[Any, list[tuple[float, float]]] = {}
    for rec in craw:
        if rec.get("op") is not None:
            spans.setdefault(rec["device"] if gpu else "cpu", []).extend(rec["spans"])
    union = 0.0
    for dev, iv in spans.items():
        b = busy.get(dev, []) if gpu else busy["cpu"]
        union += sum(e - s - covered(b, s, e) for s, e in _merge(iv))
    if p.bad_sizes:
        p.notes.append(
            f"{p.bad_sizes} collective annotations give In / Out msg nelems that are not positive counts:"
            " their sizes are taken from the c10d op's input dims where it has them"
        )
    if p.bad_groups:
        p.notes.append(
            f"{p.bad_groups} collectives' annotations give a Group size that is not a positive count: their"
            " group is taken from the process group's size or the world size instead"
        )
    if enqueue:
        p.notes.append(
            f"{enqueue} collectives have only their host call in the trace (timing cpu-enqueue): "
            "their times are lower bounds, not transfers"
        )
    props = doc.get("deviceProperties")
    name = "CPU"
    if gpu:
        name = "GPU"
        if isinstance(props, list) and props and isinstance(props[0], dict) and props[0].get("name"):
            name = str(props[0]["name"])
    steps = sum(
        1 for evs in p.host.values() for e in evs if e.cat == "user_annotation" and STEP_RE.match(e.name)
    )
    return ImportedTrace(
        source=source,
        device="gpu" if gpu else "cpu",
        device_name=name,
        backend=p.backend,
        rank=p.rank,
        world_size=p.world,
        steps=steps,
        window_s=(w1 - w0) * US,
        window_start_s=(w0 - t0) * US,
        gemms=gemms,
        collectives=colls,
        unshaped_gemms=unshaped,
        exposed_union_s=max(0.0, union) * US,
        notes=p.notes,
    )


def load(path: str | Path) -> ImportedTrace:
    """Read and parse one rank's torch.profiler trace (pairs not yet formed)."""
    return parse(read_document(path), str(path))
