"""The dataset of published measurements: rows, their schema, and a loader that checks every field.

A row is one published measurement (``data/*.toml``, one ``[[row]]`` table each)::

    [[row]]
    id = "mi300x-ar-1MiB-rocmblog-xgmi"      # unique; letters, digits, . _ -
    category = "collective_busbw"            # what is compared (CATEGORIES)
    role = "calibration"                     # calibration (may be fitted) | validation (never fitted)
    hardware = "mi300x-8"                    # a preset name
    measured = 66.9                          # the published value, in `unit`
    unit = "GB/s"                            # one of the category's units
    source = "https://..."                   # where it was published (URL, or a repository URL + path)
    locator = "first all_reduce_perf output, out-of-place columns"   # the table / line in the source
    conventions = "rccl-tests, out-of-place, CPU-timed, RCCL's default algorithm"
    [row.workload]                           # what was measured: the category's fields (WORKLOADS)
    op = "all_reduce"
    nbytes = 1048576
    [row.published]                          # optional: other numbers of the same source line
    time_us = 27.42

Unknown keys, missing fields, wrong types, unknown units, a source that is not a URL and numbers
that contradict each other (a published time and bandwidth that do not satisfy the nccl-tests
formula) are :class:`DatasetError` naming the file, the row and the field.
"""

from __future__ import annotations

import math
import re
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from t3.api import COLLECTIVE_OPS, OVERLAP_OPS
from t3.config.toml_file import read_text
from t3.errors import ConfigError

ROLES = ("calibration", "validation")

# the concurrent communications an interference row may name (workload field ``comm``)
COLLECTIVE_INTERFERERS = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all")
LOCAL_INTERFERERS = ("sm_copy", "sm_reduce", "memcpy", "ce_copy", "ce_d2h", "ce_h2d")
INTERFERERS = COLLECTIVE_INTERFERERS + LOCAL_INTERFERERS

# category -> accepted units (the first one is the unit the category is compared in)
CATEGORIES: dict[str, tuple[str, ...]] = {
    "collective_busbw": ("GB/s", "us"),  # busbw (1e9 B/s), or the collective's time (busbw derived)
    "gemm_tflops": ("TFLOPS", "ms"),  # 1e12 FLOP/s, or the GEMM's time (TFLOPS derived)
    "overlap_speedup": ("x",),  # sequential time / fused time (> 1: the fused run gains)
    "overlap_time": ("ms", "us"),  # one implementation's time
    # a kernel's slowdown beside a concurrent communication: time together / time alone - 1, in per cent
    # (compared in percentage points), or the ratio time together / time alone
    "interference": ("%", "x"),
    "hbm_bandwidth": ("GB/s",),  # a memory stream kernel's bytes read + written per second (1e9 B/s)
    "latency": ("us",),  # a fixed cost of the GPU's runtime (kernel launch, cross-stream wait, flag)
}


@dataclass(frozen=True)
class Field:
    kind: type
    default: Any = None  # None: required
    choices: tuple[str, ...] = ()
    minimum: int | None = None


_OVERLAP = {
    "op": Field(str, choices=OVERLAP_OPS),
    "m": Field(int, minimum=1),
    "n": Field(int, minimum=1),
    "k": Field(int, minimum=1),
    "gpus": Field(int, 8, minimum=2),
    "dtype": Field(str, "bf16"),
    "schedule": Field(str),
}
WORKLOADS: dict[str, dict[str, Field]] = {
    "collective_busbw": {
        "op": Field(str, choices=COLLECTIVE_OPS),
        "nbytes": Field(int, minimum=1),
        "gpus": Field(int, 8, minimum=2),
        "algo": Field(str, "auto"),
        # what the time measures: "host" (nccl-tests: CPU-timed iterations back to back, the kernel launch
        # included), "device" (the kernel's own span in a profile: no launch) or "call" (one call timed
        # alone: CUDA events around a single torch.distributed call issued right after a barrier on an
        # idle GPU, as ml-engineering's all_reduce_bench.py does: the host's path of the call and the wait
        # for the last rank are in the time)
        "timing": Field(str, "host", choices=("host", "device", "call")),
        # GPUs one host thread drives (nccl-tests -g N: one process, N GPUs); 1: a process per GPU
        "gpus_per_thread": Field(int, 1, minimum=1),
    },
    "gemm_tflops": {
        "m": Field(int, minimum=1),
        "n": Field(int, minimum=1),
        "k": Field(int, minimum=1),
        "dtype": Field(str, "bf16"),
        # what the time measures: "host" (CUDA events around the call: the launch included), "device"
        # (the kernel's own span from a profiler or CUPTI: no launch) or "graph" (calls replayed in a CUDA
        # graph, as triton.testing.do_bench_cudagraph times them: each kernel's span and the device's gap
        # from one kernel to the next, compute.graph_launch_s, not the host's launch)
        "timing": Field(str, "host", choices=("host", "device", "graph")),
        # how long the source ran the GEMM back to back: "sustained" where its procedure (warm-up and
        # timed calls, or its time budget) keeps the GPU on it for at least 0.2 s before the timed calls
        # end, so the clock is the one the power limit allows (benchmarks/device_clock.py: a GEMM's clock
        # settles 0.10-0.15 s after it starts); "short" otherwise
        "loop": Field(str, "short", choices=("short", "sustained")),
        # the output's type where the source sets it (e.g. cublasGemmEx with an FP32 C); "": the library's
        # default (the input's type; 16 bits for FP8)
        "out_dtype": Field(str, ""),
    },
    "overlap_speedup": {**_OVERLAP, "baseline": Field(str, "bulk-g1-M-cu")},
    "overlap_time": dict(_OVERLAP),
    "interference": {
        # whose slowdown the row measures: the GEMM ("compute"), the communication ("comm"), or both
        # launched together against the two run one after the other ("pair": time together / (GEMM alone
        # + communication alone))
        "victim": Field(str, "compute", choices=("compute", "comm", "pair")),
        "m": Field(int, minimum=1),
        "n": Field(int, minimum=1),
        "k": Field(int, minimum=1),
        "dtype": Field(str, "bf16"),
        # the concurrent communication (INTERFERERS): a library collective on `gpus` GPUs, or one GPU's
        # own traffic: a copy kernel (sm_copy) or a reduction kernel (sm_reduce, a + b -> c) on `cus` CUs,
        # the driver's device-to-device copy on one GPU (memcpy: cudaMemcpyAsync, run on the SMs), or copies
        # on the copy engines (ce_copy: device to device; ce_d2h / ce_h2d: to / from host memory)
        "comm": Field(str, choices=INTERFERERS),
        "nbytes": Field(int, minimum=1),  # collectives: the nccl-tests size; others: bytes copied
        "gpus": Field(int, 8, minimum=1),  # GPUs of a collective; 1 for a single GPU's own traffic
        "cus": Field(int, 0, minimum=0),  # CUs (thread blocks) of an sm_* kernel (0: every CU)
        "algo": Field(str, "auto"),  # a collective's algorithm (as api.collective's algo)
        # where a collective's data moves: the library's CU kernels ("cu") or the copy engines ("dma",
        # e.g. NCCL's copy-engine collectives)
        "executor": Field(str, "cu", choices=("cu", "dma")),
        # a collective's channels (CUs of its kernels; NCCL_MAX_NCHANNELS), 0: the library's default (the
        # preset's collective.channels)
        "channels": Field(int, 0, minimum=0),
        # the kernel launched second starts this long after the first (a spin or sleep the benchmark puts
        # on its stream), and its measured time includes it; 0: both start together
        "lead_us": Field(float, 0.0, minimum=0),
        # together: which is launched first, the communication or the GEMM (the other lead_us later, or
        # right behind it: where a kernel fills the SMs, the second waits for it)
        "first": Field(str, "comm", choices=("comm", "gemm")),
        # "background": the communication runs, repeated back to back, for the whole of the victim's
        # time; "together": both are launched once at the same moment
        "arrangement": Field(str, "background", choices=("background", "together", "held")),
    },
    "hbm_bandwidth": {
        # read only, write only, copy (1 read : 1 write) or triad (2 reads : 1 write)
        "stream": Field(str, choices=("read", "write", "copy", "triad")),
        "nbytes": Field(int, minimum=1),  # bytes read + written by one pass
        "cus": Field(int, 0, minimum=0),  # CUs (thread blocks) the stream kernel runs on (0: every CU)
    },
    "latency": {
        # kernel_launch: one empty kernel, launch to launch (back to back on one stream); event_wait: an
        # event recorded on one stream and waited on by another (record -> the waiting kernel starts);
        # flag: a flag written by a kernel on one stream seen by a kernel polling on another
        "what": Field(str, choices=("kernel_launch", "event_wait", "flag")),
    },
}

_TOP = ("id", "category", "role", "hardware", "measured", "unit", "source", "locator", "conventions")
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_KEY = re.compile(r"^[a-z][A-Za-z0-9_]*$")
# two published numbers of one source line agree within this (they are rounded independently)
PUBLISHED_TOLERANCE = 0.01


class DatasetError(ConfigError):
    """A dataset row is malformed; the message names the file, the row and the field."""


@dataclass(frozen=True)
class Row:
    id: str
    category: str
    role: str
    hardware: str
    measured: float
    unit: str
    source: str
    locator: str
    conventions: str
    workload: dict[str, Any]
    published: dict[str, float] = field(default_factory=dict)
    origin: str = ""  # the file the row came from
    # rows measured by `t3 measure`: the GPU, driver, library versions and the command (MEASURED_SOURCE)
    device: dict[str, str] = field(default_factory=dict)
    # written down and committed before any prediction of it existed (reported apart by `t3 validate`)
    blind: bool = False


def data_files() -> list[Path]:
    """The dataset files shipped with the package, in name order."""
    d = resources.files("t3.validation").joinpath("data")
    return sorted((Path(str(p)) for p in d.iterdir() if p.name.endswith(".toml")), key=lambda p: p.name)


def load_dataset(paths: list[Path] | None = None) -> list[Row]:
    """Every row of the given dataset files (default: the shipped ones), checked, in file order."""
    rows: list[Row] = []
    seen: dict[str, str] = {}
    for p in paths if paths is not None else data_files():
        p = Path(p)
        for r in parse_rows(read_text(p, "dataset", DatasetError), p.name):
            if r.id in seen:
                raise DatasetError(f"{p.name}: row '{r.id}': id: duplicate (also in {seen[r.id]})")
            seen[r.id] = p.name
            rows.append(r)
    return rows


def parse_rows(text: str, origin: str) -> list[Row]:
    """The rows of one dataset file's text (``origin`` names it in errors)."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise DatasetError(f"{origin}: not valid TOML: {err}") from None
    extra = sorted(set(doc) - {"row"})
    if extra:
        raise DatasetError(f"{origin}: {extra[0]}: unknown top-level key (rows are [[row]] tables)")
    items = doc.get("row", [])
    if not isinstance(items, list):
        raise DatasetError(f"{origin}: row: must be an array of tables ([[row]])")
    return [_row(item, origin, i) for i, item in enumerate(items, 1)]


def _row(item: Any, origin: str, index: int) -> Row:
    name = item.get("id") if isinstance(item, dict) else None
    where = f"{origin}: row {index}" + (f" ('{name}')" if isinstance(name, str) else "")

    def fail(fieldname: str, msg: str) -> DatasetError:
        return DatasetError(f"{where}: {fieldname}: {msg}")

    if not isinstance(item, dict):
        raise fail("row", "must be a table")
    for k in item:
        if k not in (*_TOP, "workload", "published", "device", "blind"):
            raise fail(k, "unknown field")
    for k in _TOP:
        if k not in item:
            raise fail(k, "missing field")
        if k == "measured":
            continue
        if not isinstance(item[k], str) or not item[k].strip():
            raise fail(k, "must be a non-empty string")
    rid, category, role, unit = item["id"], item["category"], item["role"], item["unit"]
    if not _ID.match(rid):
        raise fail("id", f"'{rid}' must be letters, digits, '.', '_' or '-'")
    if category not in CATEGORIES:
        raise fail("category", f"unknown category '{category}' (available: {', '.join(CATEGORIES)})")
    if role not in ROLES:
        raise fail("role", f"unknown role '{role}' (available: {', '.join(ROLES)})")
    from t3.config.hardware import preset_names

    if item["hardware"] not in preset_names():
        raise fail(
            "hardware", f"unknown preset '{item['hardware']}' (available: {', '.join(preset_names())})"
        )
    if unit not in CATEGORIES[category]:
        raise fail(
            "unit", f"'{unit}' is not a unit of {category} (use one of {', '.join(CATEGORIES[category])})"
        )
    measured = item["measured"]
    if isinstance(measured, bool) or not isinstance(measured, int | float) or not math.isfinite(measured):
        raise fail("measured", f"must be a number, got {measured!r}")
    if unit == "%":
        if measured <= -100:
            raise fail("measured", f"a slowdown in % must be > -100, got {measured}")
    elif measured <= 0:
        raise fail("measured", f"must be > 0, got {measured}")
    device = _device(item, fail)
    blind = item.get("blind", False)
    if not isinstance(blind, bool):
        raise fail("blind", f"must be true or false, got {blind!r}")
    workload = _workload(item.get("workload"), category, fail)
    published = _published(item.get("published", {}), fail)
    row = Row(
        rid, category, role, item["hardware"], float(measured), unit, item["source"], item["locator"],
        item["conventions"], workload, published, origin, device, blind,
    )  # fmt: skip
    _consistency(row, fail)
    return row


def _workload(w: Any, category: str, fail) -> dict[str, Any]:
    if w is None:
        raise fail("workload", "missing table [row.workload]")
    if not isinstance(w, dict):
        raise fail("workload", "must be a table")
    spec = WORKLOADS[category]
    for k in w:
        if k not in spec:
            raise fail(f"workload.{k}", f"unknown field for {category} (fields: {', '.join(spec)})")
    out: dict[str, Any] = {}
    for k, f in spec.items():
        if k not in w:
            if f.default is None:
                raise fail(f"workload.{k}", "missing field")
            out[k] = f.default
            continue
        v = w[k]
        if f.kind is int and (isinstance(v, bool) or not isinstance(v, int)):
            raise fail(f"workload.{k}", f"must be an integer, got {v!r}")
        if f.kind is float and (
            isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v)
        ):
            raise fail(f"workload.{k}", f"must be a number, got {v!r}")
        if f.kind is str and not isinstance(v, str):
            raise fail(f"workload.{k}", f"must be a string, got {v!r}")
        if f.minimum is not None and v < f.minimum:
            raise fail(f"workload.{k}", f"must be >= {f.minimum}, got {v}")
        if f.choices and v not in f.choices:
            raise fail(f"workload.{k}", f"unknown value '{v}' (available: {', '.join(f.choices)})")
        out[k] = v
    if "dtype" in out:
        from t3.workload.sublayers import DTYPE_BYTES

        if out["dtype"] not in DTYPE_BYTES:
            raise fail(
                "workload.dtype", f"unknown dtype '{out['dtype']}' (available: {', '.join(DTYPE_BYTES)})"
            )
        if out.get("out_dtype") and out["out_dtype"] not in DTYPE_BYTES:
            raise fail(
                "workload.out_dtype",
                f"unknown dtype '{out['out_dtype']}' (available: {', '.join(DTYPE_BYTES)}; omit it for the"
                " library's default)",
            )
    for k in ("schedule", "baseline"):
        if k in out and out[k] != "best":
            from t3.ficco.space import parse_name

            try:
                parse_name(out[k])
            except ConfigError as err:
                raise fail(f"workload.{k}", str(err).removeprefix("schedule: ")) from None
    return out


# a row measured on a lent GPU by the project's own kit names it as its source, and says which GPU,
# driver and libraries in its [row.device] table
MEASURED_SOURCE = "measured by `t3 measure`"
DEVICE_FIELDS = ("gpu", "driver", "runtime", "torch", "command")


def _device(item: dict, fail) -> dict[str, str]:
    """A published row's source is an https:// URL; a measured row's is ``MEASURED_SOURCE, <GPU>`` with
    a ``[row.device]`` table (every field of DEVICE_FIELDS, strings; ``clocks``, ``date`` optional)."""
    src, dev = item["source"], item.get("device")
    if src.startswith("https://"):
        if dev is not None:
            raise fail("device", "only rows measured by `t3 measure` have a device table")
        return {}
    if not src.startswith(MEASURED_SOURCE):
        raise fail(
            "source",
            f"must be an https:// URL (a web page, or a repository file at a commit) or '{MEASURED_SOURCE},"
            " <GPU>'",
        )
    if not isinstance(dev, dict):
        raise fail(
            "device", f"a row {MEASURED_SOURCE} needs a [row.device] table ({', '.join(DEVICE_FIELDS)})"
        )
    for k, v in dev.items():
        if k not in (*DEVICE_FIELDS, "clocks", "date"):
            raise fail(f"device.{k}", f"unknown field (fields: {', '.join(DEVICE_FIELDS)}, clocks, date)")
        if not isinstance(v, str) or not v.strip():
            raise fail(f"device.{k}", f"must be a non-empty string, got {v!r}")
    for k in DEVICE_FIELDS:
        if k not in dev:
            raise fail(f"device.{k}", "missing field")
    return dict(dev)


def _published(p: Any, fail) -> dict[str, float]:
    if not isinstance(p, dict):
        raise fail("published", "must be a table")
    out: dict[str, float] = {}
    for k, v in p.items():
        if not _KEY.match(k):
            raise fail(
                f"published.{k}", "names are letters, digits and '_', starting with a lower-case letter"
            )
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v <= 0:
            raise fail(f"published.{k}", f"must be a positive number, got {v!r}")
        out[k] = float(v)
    return out


def _close(a: float, b: float, tol: float = PUBLISHED_TOLERANCE) -> bool:
    return abs(a / b - 1.0) <= tol


def _consistency(row: Row, fail) -> None:
    """Numbers published together must agree with each other and with ``measured`` (closed forms)."""
    from t3.validation.conventions import busbw_Bps, tflops

    p, w = row.published, row.workload
    time_s = p["time_us"] * 1e-6 if "time_us" in p else p["time_ms"] * 1e-3 if "time_ms" in p else None
    if row.category == "collective_busbw":
        if row.unit == "us" and time_s is not None and not _close(time_s * 1e6, row.measured):
            raise fail("published.time_us", f"{p.get('time_us')} us differs from measured {row.measured} us")
        if time_s is not None and "busbw_GBps" in p:
            derived = busbw_Bps(w["op"], w["nbytes"], w["gpus"], time_s) / 1e9
            if not _close(derived, p["busbw_GBps"]):
                raise fail(
                    "published.busbw_GBps",
                    f"{p['busbw_GBps']} GB/s, but size / time x factor gives {derived:.2f} GB/s",
                )
        if row.unit == "GB/s" and "busbw_GBps" in p and not _close(p["busbw_GBps"], row.measured):
            raise fail("measured", f"{row.measured} GB/s differs from published.busbw_GBps {p['busbw_GBps']}")
    elif row.category == "gemm_tflops":
        if time_s is not None:
            derived = tflops(w["m"], w["n"], w["k"], time_s)
            ref = p.get("tflops", row.measured if row.unit == "TFLOPS" else None)
            if ref is not None and not _close(derived, ref):
                raise fail("published.time_ms", f"2 M N K / time = {derived:.1f} TFLOPS, not {ref}")
        if row.unit == "TFLOPS" and "tflops" in p and not _close(p["tflops"], row.measured):
            raise fail("measured", f"{row.measured} TFLOPS differs from published.tflops {p['tflops']}")
    elif row.category == "overlap_speedup":
        for suffix in ("ms", "us"):
            b, f = p.get(f"baseline_{suffix}"), p.get(f"fused_{suffix}")
            if b is not None and f is not None and not _close(b / f, row.measured, 0.002):
                raise fail("measured", f"{row.measured} x, but baseline / fused = {b / f:.4f}")
    elif row.category == "overlap_time":
        key = "time_ms" if row.unit == "ms" else "time_us"
        if key in p and not _close(p[key], row.measured):
            raise fail(f"published.{key}", f"{p[key]} {row.unit} differs from measured {row.measured}")
    elif row.category == "interference":
        local = w["comm"] in LOCAL_INTERFERERS
        if local and w["gpus"] != 1:
            raise fail(
                "workload.gpus", f"{w['comm']} is one GPU's own traffic: gpus must be 1, got {w['gpus']}"
            )
        if not local and w["gpus"] < 2:
            raise fail("workload.gpus", f"a collective ({w['comm']}) needs >= 2 GPUs, got {w['gpus']}")
        if w["cus"] and w["comm"] not in ("sm_copy", "sm_reduce"):
            raise fail("workload.cus", f"only sm_copy / sm_reduce kernels take cus, not {w['comm']}")
        if not local and w["comm"] not in COLLECTIVE_OPS:
            raise fail("workload.comm", f"unknown collective '{w['comm']}'")
        if w["algo"] != "auto" and local:
            raise fail("workload.algo", f"{w['comm']} has no algorithm")
        if w["executor"] != "cu" and local:
            raise fail("workload.executor", f"{w['comm']} says where it runs by its name")
        if w["channels"] and local:
            raise fail("workload.channels", f"{w['comm']} is not a collective (cus sets its CUs)")
        if w["lead_us"] and w["arrangement"] != "together":
            raise fail(
                "workload.lead_us", "a lead is a delay after a launch together: arrangement = 'together'"
            )
        if w["first"] != "comm" and w["arrangement"] != "together":
            raise fail(
                "workload.first", "an order of launch is for a launch together: arrangement = 'together'"
            )
        if w["victim"] == "pair" and w["arrangement"] != "together":
            raise fail("workload.arrangement", "a pair is launched together once: arrangement = 'together'")
        for suffix in ("ms", "us"):
            a, t = p.get(f"alone_{suffix}"), p.get(f"together_{suffix}")
            if a is not None and t is not None:
                ratio = t / a
                got = ratio if row.unit == "x" else 100.0 * (ratio - 1.0)
                want = row.measured
                ok = abs(got - want) <= 0.5 if row.unit == "%" else _close(got, want, 0.005)
                if not ok:
                    raise fail(
                        "measured", f"{want} {row.unit}, but together / alone gives {got:.3g} {row.unit}"
                    )
