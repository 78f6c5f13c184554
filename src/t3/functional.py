"""Functional mode: carry real values through a schedule's tiles, remote stores, DMAs and NMC updates.

Every GPU g holds integer-valued inputs ``A[g]`` (M x K) and ``B[g]`` (K x N) and a zero-initialised
output buffer. Ops call the hooks below from the engine (``Op.on_start`` / ``Op.on_finish``):

- a GEMM wave's compute op, when it finishes, *adds* its tiles ``A[g][rows] @ B[g][:, cols]`` into the
  local buffer (every store to tracked or owned memory is an update: the buffer starts at zero);
- a remote store adds the producer's tiles into the peer's buffer (NMC update);
- a DMA reads its tiles from the local buffer when it starts and adds them into the peer's buffer when
  it finishes, so a DMA that fired before its tiles were complete leaves a wrong sum behind.

:meth:`FunctionalRun.check` compares each GPU's owned chunk with a numpy reduce-scatter of the
per-GPU partial products; with integer data the match must be exact. Values are integers stored
in float64 (BLAS matmuls; every partial sum is far below 2^53, so arithmetic is exact). ``fault`` ("drop" or
"duplicate") loses or repeats the first update that arrives anywhere: a test-only knob showing the
check detects it.
"""

from __future__ import annotations

import numpy as np

from t3.errors import ConfigError
from t3.ops.gemm import GemmPlan

FAULTS = (None, "drop", "duplicate")


class FunctionalRun:
    def __init__(
        self, plan: GemmPlan, n_gpus: int, *, seed: int = 0, fault: str | None = None, value_range: int = 3
    ):
        if fault not in FAULTS:
            raise ConfigError(f"functional_fault: unknown fault '{fault}' (drop, duplicate)")
        s = plan.shape
        if s.m * s.n * n_gpus > 2**24:
            raise ConfigError(
                f"functional: output {s.m}x{s.n} on {n_gpus} GPUs is too large for functional mode "
                "(use --tokens / a small model; at most 2^24 output elements in total)"
            )
        rng = np.random.default_rng(seed)
        self.plan, self.n = plan, n_gpus
        self.A = [
            rng.integers(-value_range, value_range + 1, (s.m, s.k)).astype(np.int64) for _ in range(n_gpus)
        ]
        self.B = [
            rng.integers(-value_range, value_range + 1, (s.k, s.n)).astype(np.int64) for _ in range(n_gpus)
        ]
        self.buf = [np.zeros((s.m, s.n), dtype=np.float64) for _ in range(n_gpus)]
        self.fault = fault
        self._fault_armed = fault is not None
        self._snap: dict[tuple[int, str], list[np.ndarray]] = {}
        self.updates = 0
        self.applied: dict[tuple[int, int, int], int] = {}  # (receiver, chunk, tile) -> updates applied

    def _boxes(self, chunk: int, lo: int, hi: int):
        return [self.plan.tile_box(chunk, t) for t in range(lo, hi)]

    def _count(self, dst: int, chunk: int, lo: int, hi: int, k: int) -> None:
        for t in range(lo, hi):
            key = (dst, chunk, t)
            self.applied[key] = self.applied.get(key, 0) + k

    def _times(self) -> int:
        """How often to apply the next update (the fault knob acts on the first one)."""
        self.updates += 1
        if self._fault_armed:
            self._fault_armed = False
            return 0 if self.fault == "drop" else 2
        return 1

    def local_writes(self, g: int, segs: list[tuple[int, int, int]]) -> None:
        for chunk, lo, hi in segs:
            for r0, r1, c0, c1 in self._boxes(chunk, lo, hi):
                self.buf[g][r0:r1, c0:c1] += self.A[g][r0:r1] @ self.B[g][:, c0:c1]

    def remote_store(self, g: int, dst: int, chunk: int, lo: int, hi: int) -> None:
        k = self._times()
        self._count(dst, chunk, lo, hi, k)
        for r0, r1, c0, c1 in self._boxes(chunk, lo, hi):
            self.buf[dst][r0:r1, c0:c1] += k * (self.A[g][r0:r1] @ self.B[g][:, c0:c1])

    def dma_read(self, g: int, key: str, chunk: int, lo: int, hi: int) -> None:
        self._snap[(g, key)] = [
            self.buf[g][r0:r1, c0:c1].copy() for r0, r1, c0, c1 in self._boxes(chunk, lo, hi)
        ]

    def dma_apply(self, g: int, dst: int, key: str, chunk: int, lo: int, hi: int) -> None:
        k = self._times()
        self._count(dst, chunk, lo, hi, k)
        for (r0, r1, c0, c1), v in zip(self._boxes(chunk, lo, hi), self._snap.pop((g, key)), strict=True):
            self.buf[dst][r0:r1, c0:c1] += k * v

    def reference(self) -> np.ndarray:
        """Numpy all-reduce of the per-GPU partial products (a reduce-scatter keeps one chunk of it)."""
        return sum(a @ b for a, b in zip(self.A, self.B, strict=True))

    def check(
        self, owned: dict[int, int], expected_updates: dict[tuple[int, int], int] | None = None
    ) -> dict:
        """Compare every GPU's owned chunk (``owned[g]``) with the reference reduce-scatter, and (if
        given) count the tiles that did not receive exactly ``expected_updates[(gpu, chunk)]`` incoming
        updates (a tile lost or reduced twice)."""
        ref = self.reference()
        rows = self.plan.chunk_rows
        mism, err = 0, 0.0
        for g, c in sorted(owned.items()):
            got = self.buf[g][c * rows : (c + 1) * rows]
            want = ref[c * rows : (c + 1) * rows]
            d = np.abs(got - want)
            mism += int(np.count_nonzero(d))
            err = max(err, float(d.max()) if d.size else 0.0)
        bad_tiles = 0
        if expected_updates is not None:
            tiles = self.plan.tiles_m_chunk * self.plan.tiles_n
            for (g, c), want in expected_updates.items():
                bad_tiles += sum(self.applied.get((g, c, t), 0) != want for t in range(tiles))
        return {
            "checked": True,
            "gpus": len(owned),
            "elements": int(rows * ref.shape[1] * len(owned)),
            "updates": self.updates,
            "mismatches": mism,
            "tiles_with_wrong_update_count": bad_tiles,
            "max_abs_error": float(err),
        }
