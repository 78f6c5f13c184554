"""Backends of the measurement kit: timer, streams, events, copy engines and fixed-grid kernels.

A measurement (:mod:`~t3.measure.suites`, :mod:`~t3.measure.interference`) takes a :class:`Backend`
and never calls ``torch.cuda`` itself, so one code path runs on

- :class:`GpuBackend`: a CUDA or ROCm GPU through PyTorch. Device events (``torch.cuda.Event``) on the
  streams; a sleep kernel (``torch.cuda._sleep``) *gates* a stream so that the host queues a whole batch
  before the GPU starts it (the batch then runs back to back, not at the host's pace); fixed-grid
  kernels (a copy or an add on exactly k thread blocks, a flag ping-pong) are Triton kernels
  (:mod:`~t3.measure.kernels`), absent where Triton is not importable;
- :class:`CpuBackend`: CPU tensors for the kit's own tests. Events read ``time.perf_counter`` when
  recorded; streams are one sequential stream (nothing runs concurrently); a fixed-grid kernel runs its
  k blocks' chunks one after another; copy engines are plain copies. Its numbers are never GPU data
  (rows from it say so, and ``t3 calibrate`` refuses them unless told otherwise).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import platform
import subprocess
import time
from typing import Any

from .compat import ConfigError

SLEEP_PROBE_CYCLES = 2_000_000  # cycles of the sleep kernel timed once to convert seconds to cycles


class Unavailable(RuntimeError):
    """A measurement this backend cannot make (the message says why; the run notes it and goes on)."""


class _CpuEvent:
    __slots__ = ("t",)

    def __init__(self) -> None:
        self.t = 0.0

    def record(self, stream: Any = None) -> None:
        self.t = time.perf_counter()


class Backend:
    """What a measurement needs from the machine. Times are seconds, sizes bytes."""

    kind = "base"  # "cuda", "rocm" or "cpu"
    concurrent = False  # streams really run side by side
    timer = ""  # how times are taken (a phrase for the rows' conventions)
    batching = "the calls run one after another as the host issues them"  # how a batch runs (a phrase)
    release = "the two streams run one after the other"  # how two streams start together (a phrase)

    def __init__(self, torch: Any) -> None:
        self.torch = torch
        self.device = torch.device("cpu")
        self.name = "unknown"
        self.cus = 1  # CUs / SMs (thread blocks of a kernel that fills the GPU)
        self.l2_bytes = 1 << 20
        self.notes: list[str] = []

    # ---- streams and events ------------------------------------------------------------------------
    def stream(self) -> Any:
        return None

    def use(self, stream: Any) -> contextlib.AbstractContextManager:
        return contextlib.nullcontext()

    def wait(self, stream: Any, event: Any) -> None:
        """``stream`` waits for ``event`` (recorded on another stream) before its next work."""

    def event(self, timing: bool = True) -> Any:
        return _CpuEvent()

    def elapsed(self, start: Any, end: Any) -> float:
        """Seconds from ``start`` to ``end`` (both recorded, synchronised)."""
        return end.t - start.t

    def sync(self) -> None:
        """Wait until every queued operation finished."""

    def gate(self, seconds: float) -> None:
        """Hold the current stream for ``seconds`` (the host queues work meanwhile); no-op on the CPU."""

    # ---- kernels -----------------------------------------------------------------------------------
    def tiny(self, t: Any) -> None:
        """The smallest kernel: one element incremented."""
        t.add_(1)

    def fixed_grid(self) -> str:
        """Empty when fixed-grid kernels exist, else why not."""
        return ""

    def block_copy(self, src: Any, dst: Any, blocks: int, passes: int = 1) -> None:
        """Copy ``src`` into ``dst`` on exactly ``blocks`` thread blocks (a grid-stride loop each),
        ``passes`` times over in one launch."""
        for _ in range(passes):
            for s, d in zip(src.view(-1).chunk(blocks), dst.view(-1).chunk(blocks), strict=True):
                d.copy_(s)

    def block_add(self, a: Any, b: Any, c: Any, blocks: int, passes: int = 1) -> None:
        """``c = a + b`` on exactly ``blocks`` thread blocks, ``passes`` times over in one launch."""
        for _ in range(passes):
            for x, y, z in zip(a.view(-1).chunk(blocks), b.view(-1).chunk(blocks), c.view(-1).chunk(blocks),
                               strict=True):  # fmt: skip
                self.torch.add(x, y, out=z)

    def flag_pingpong(self, rounds: int) -> float:
        """Seconds for ``rounds`` round trips of a flag between two kernels on two streams (each sets
        its flag to the round number, then polls the other's)."""
        t = self.torch
        f1, f2 = t.zeros(1, dtype=t.int32), t.zeros(1, dtype=t.int32)
        t0 = time.perf_counter()
        for i in range(1, rounds + 1):
            f1.fill_(i)
            if int(f1.item()) < i:  # the follower sees the leader's flag ...
                raise Unavailable("flag not seen")
            f2.fill_(i)
            if int(f2.item()) < i:  # ... and the leader the follower's
                raise Unavailable("flag not seen")
        return time.perf_counter() - t0

    def repeat(self, fn: Any, r: int, graph: bool = True) -> tuple[Any, str]:
        """``unit(i)``: ``r`` calls of ``fn`` as one launch where the backend can (a CUDA graph replay, so
        short kernels run back to back whatever the host's pace), and a phrase saying how."""
        if r <= 1:
            return fn, "each call launched by the host"

        def unit(i: int) -> None:
            for j in range(r):
                fn(i * r + j)

        return unit, f"{r} calls per unit, issued one after another"

    # ---- memory ------------------------------------------------------------------------------------
    def host_buffer(self, nbytes: int) -> Any:
        """A host buffer for copy-engine copies (pinned on a GPU)."""
        return self.torch.empty(nbytes, dtype=self.torch.uint8)

    def copy_kind(self, fn: Any) -> str:
        """How ``fn``'s copy ran, as the profiler shows it (a phrase for the rows' conventions)."""
        return "not applicable on the CPU (a plain memory copy)"

    def fp8(self) -> tuple[Any, str]:
        """The e4m3 dtype ``torch._scaled_mm`` accepts here, or (None, why not)."""
        t = self.torch
        why = ""
        for name in ("float8_e4m3fn", "float8_e4m3fnuz"):
            dt = getattr(t, name, None)
            if dt is None:
                continue
            try:
                a = t.ones(16, 16, device=self.device).to(dt)
                one = t.ones((), device=self.device, dtype=t.float32)
                t._scaled_mm(a, a.t(), scale_a=one, scale_b=one, out_dtype=t.bfloat16)
                self.sync()
                return dt, name
            except (RuntimeError, TypeError, NotImplementedError) as err:
                why = why or f"torch._scaled_mm refused {name} here: {' '.join(str(err).split())[:160]}"
        return None, why or f"torch {t.__version__} has no float8_e4m3 dtype"

    # ---- facts -------------------------------------------------------------------------------------
    def environment(self) -> dict[str, str]:
        """The rows' ``[row.device]`` table: gpu, driver, runtime, torch, clocks (optional), date."""
        raise NotImplementedError

    def facts(self) -> dict[str, Any]:
        """What run.json records about the machine beyond :meth:`environment`."""
        return {"kind": self.kind, "cus": self.cus, "l2_bytes": self.l2_bytes, "device": str(self.device)}


class CpuBackend(Backend):
    """CPU tensors, sequential execution, ``time.perf_counter`` (the kit's plumbing, never GPU data)."""

    kind = "cpu"
    timer = "time.perf_counter on the CPU (streams replaced by sequential execution: nothing overlaps)"

    def __init__(self, torch: Any) -> None:
        super().__init__(torch)
        self.name = f"CPU {platform.machine() or 'unknown'} (plumbing run, not GPU data)"
        self.cus = 4  # blocks of a 'whole-device' fixed-grid kernel (nominal)
        self.l2_bytes = 1 << 20  # nominal cache size for sizing rotating buffers

    def environment(self) -> dict[str, str]:
        return {
            "gpu": self.name,
            "driver": "none (CPU)",
            "runtime": "CPU (no GPU runtime)",
            "torch": self.torch.__version__,
            "date": _now(),
        }


class GpuBackend(Backend):
    """A CUDA or ROCm GPU through PyTorch (device events, streams, sleep gates, Triton kernels)."""

    concurrent = True

    def __init__(self, torch: Any, index: int = 0) -> None:
        super().__init__(torch)
        cuda = torch.cuda
        self.kind = "rocm" if getattr(torch.version, "hip", None) else "cuda"
        self.device = torch.device("cuda", index)
        cuda.set_device(self.device)
        props = cuda.get_device_properties(self.device)
        self.name = props.name or cuda.get_device_name(self.device)
        self.cus = int(props.multi_processor_count)
        self.l2_bytes = int(getattr(props, "L2_cache_size", 0) or 50 << 20)
        self.timer = "device events (torch.cuda.Event) on the streams"
        self._kernels: Any = None
        self._kernels_why = ""
        self._cycles_per_s = self._probe_sleep()
        if self._cycles_per_s > 0:
            self.batching = (
                "the batch queued behind a sleep kernel (torch.cuda._sleep), so the calls run back to back"
            )
            self.release = "both streams released at once by one event recorded after a sleep kernel"
        else:
            self.batching = "the calls issued by the host as it goes (no sleep kernel to queue them behind)"
            self.release = "both streams released by one event (no sleep kernel: as the host issues them)"

    # ---- streams and events ------------------------------------------------------------------------
    def stream(self) -> Any:
        return self.torch.cuda.Stream(device=self.device)

    def use(self, stream: Any) -> contextlib.AbstractContextManager:
        return self.torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext()

    def wait(self, stream: Any, event: Any) -> None:
        stream.wait_event(event)

    def event(self, timing: bool = True) -> Any:
        return self.torch.cuda.Event(enable_timing=timing)

    def elapsed(self, start: Any, end: Any) -> float:
        return start.elapsed_time(end) * 1e-3

    def sync(self) -> None:
        self.torch.cuda.synchronize(self.device)

    def _probe_sleep(self) -> float:
        """Cycles per second of ``torch.cuda._sleep`` (0: no gate; batches then run at the host's pace)."""
        sleep = getattr(self.torch.cuda, "_sleep", None)
        if sleep is None:
            self.notes.append("torch.cuda._sleep missing: batches are not gated (host-paced)")
            return 0.0
        sleep(1000)
        best = float("inf")
        for _ in range(3):
            a, b = self.event(), self.event()
            a.record()
            sleep(SLEEP_PROBE_CYCLES)
            b.record()
            self.sync()
            best = min(best, self.elapsed(a, b))
        return SLEEP_PROBE_CYCLES / best if best > 0 else 0.0

    def gate(self, seconds: float) -> None:
        if self._cycles_per_s > 0 and seconds > 0:
            self.torch.cuda._sleep(int(seconds * self._cycles_per_s))

    # ---- kernels -----------------------------------------------------------------------------------
    def _triton(self) -> Any:
        if self._kernels is None and not self._kernels_why:
            from . import kernels

            try:
                self._kernels = kernels.load()
            except ImportError as err:
                self._kernels_why = f"Triton is not importable ({err})"
        if self._kernels is None:
            raise Unavailable(self._kernels_why)
        return self._kernels

    def fixed_grid(self) -> str:
        try:
            self._triton()
        except Unavailable as err:
            return str(err)
        return ""

    def block_copy(self, src: Any, dst: Any, blocks: int, passes: int = 1) -> None:
        self._triton().copy(src, dst, blocks, passes)

    def block_add(self, a: Any, b: Any, c: Any, blocks: int, passes: int = 1) -> None:
        self._triton().add(a, b, c, blocks, passes)

    def flag_pingpong(self, rounds: int) -> float:
        return self._triton().pingpong(self, rounds)

    def repeat(self, fn: Any, r: int, graph: bool = True) -> tuple[Any, str]:
        if r <= 1 or not graph:
            return super().repeat(fn, r)
        t = self.torch
        try:
            fn(0)  # compile / warm before capture
            self.sync()
            g = t.cuda.CUDAGraph()
            with t.cuda.graph(g):
                for j in range(r):
                    fn(j)
            g.replay()
            self.sync()
        except Exception as err:  # noqa: BLE001 - capture refused: issue the calls one by one instead
            t.cuda.synchronize()
            unit, how = super().repeat(fn, r)
            return unit, f"{how} (CUDA graph capture failed: {' '.join(str(err).split())[:100]})"
        return (lambda i: g.replay()), f"{r} calls per unit, replayed from one CUDA graph"

    # ---- memory ------------------------------------------------------------------------------------
    def host_buffer(self, nbytes: int) -> Any:
        return self.torch.empty(nbytes, dtype=self.torch.uint8, pin_memory=True)

    def copy_kind(self, fn: Any) -> str:
        """Runs ``fn`` under ``torch.profiler`` and says whether the GPU ran it as a Memcpy (a copy
        engine) or as kernels."""
        try:
            from torch.autograd import DeviceType
            from torch.profiler import ProfilerActivity, profile

            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                fn()
                self.sync()
            names = sorted(
                {e.name for e in prof.events() if getattr(e, "device_type", None) == DeviceType.CUDA}
            )
        except Exception as err:  # noqa: BLE001 - any profiler failure is a note, never a failed run
            return f"not verified (torch.profiler failed: {' '.join(str(err).split())[:120]})"
        return classify_copy(names)

    # ---- facts -------------------------------------------------------------------------------------
    def environment(self) -> dict[str, str]:
        t = self.torch
        env = {
            "gpu": self.name,
            "driver": "unknown (nvidia-smi / rocm-smi not readable)",
            "runtime": f"ROCm {t.version.hip}" if self.kind == "rocm" else f"CUDA {t.version.cuda}",
            "torch": t.__version__,
            "date": _now(),
        }
        smi = _smi(self.kind, self.name)
        if smi.get("driver"):
            env["driver"] = smi["driver"]
        if smi.get("clocks"):
            env["clocks"] = smi["clocks"]
        return env

    def facts(self) -> dict[str, Any]:
        out = super().facts()
        out["sleep_cycles_per_s"] = self._cycles_per_s
        try:
            import triton

            out["triton"] = triton.__version__
        except ImportError:
            out["triton"] = None
        return out


def classify_copy(names: list[str]) -> str:
    """What the GPU activity a profiler recorded for one copy says about where it ran."""
    words = ("memcpy", "copybuffer", "copydevice", "copyhost")
    copies = [n for n in names if any(w in n.lower() for w in words)]
    kernels = [n for n in names if n not in copies]
    if copies and not kernels:
        return f"torch.profiler shows it as {copies[0]!r}, a Memcpy, no kernel"
    if kernels:
        return f"torch.profiler shows kernel(s) {', '.join(repr(k[:60]) for k in kernels[:2])}: not a copy engine"
    return "not verified (torch.profiler recorded no GPU activity)"


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _run(argv: list[str]) -> str:
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=15)
    except (OSError, subprocess.SubprocessError):
        return ""
    return p.stdout if p.returncode == 0 else ""


def _smi(kind: str, name: str) -> dict[str, str]:
    """Driver and clocks from nvidia-smi (NVIDIA) or rocm-smi (AMD); empty where not readable."""
    if kind == "cuda":
        fields = "name,driver_version,clocks.sm,clocks.max.sm,power.limit"
        out = _run(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader"])
        lines = [[x.strip() for x in ln.split(",")] for ln in out.splitlines() if ln.count(",") >= 4]
        pick = next(
            (ln for ln in lines if ln[0] and ln[0] in name or name in ln[0]), lines[0] if lines else None
        )
        if not pick:
            return {}
        return {
            "driver": pick[1],
            "clocks": f"SM {pick[2]} (max {pick[3]}), power limit {pick[4]} (nvidia-smi)",
        }
    import json

    res: dict[str, str] = {}
    for flag, key in (("--showdriverversion", "driver"), ("--showclocks", "clocks")):
        text = _run(["rocm-smi", flag, "--json"])
        try:
            doc = json.loads(text) if text else {}
        except ValueError:
            doc = {}
        items = [f"{k}: {v}" for card in doc.values() if isinstance(card, dict) for k, v in card.items()]
        if items:
            res[key] = (
                ("; ".join(items[:6]) + " (rocm-smi)") if key == "clocks" else items[0].split(": ", 1)[1]
            )
    return res


def make_backend(device: str) -> Backend:
    """The backend for ``--device`` (``auto``: the GPU if PyTorch sees one; ``cuda``: the GPU, CUDA or
    ROCm; ``cpu``: CPU tensors)."""
    try:
        import torch
    except ImportError:
        raise ConfigError("--device: PyTorch is not installed (pip install torch)") from None
    if device == "cpu":
        return CpuBackend(torch)
    if not torch.cuda.is_available():
        build = f"CUDA {torch.version.cuda}" if torch.version.cuda else "ROCm " + str(torch.version.hip)
        if not torch.version.cuda and not getattr(torch.version, "hip", None):
            build = "CPU-only build"
        raise ConfigError(
            f"--device {device}: PyTorch {torch.__version__} ({build}) sees no GPU; on a machine without one,"
            " --device cpu --allow-cpu runs the kit's plumbing on CPU tensors"
        )
    torch.manual_seed(0)
    return GpuBackend(torch)
