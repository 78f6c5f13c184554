"""Triton kernels with a fixed grid, for the GPU backend (imported only there, and only when needed).

- ``copy`` / ``add``: a copy ``dst = src`` or a reduction ``c = a + b`` on exactly ``blocks`` thread
  blocks, each walking the buffer in a grid-stride loop of ``BLOCK`` fp32 elements, ``passes`` times:
  the memory-bound kernel "holding k SMs" of the interference measurements (one launch of many passes
  holds its blocks as long as a collective's kernel does) and the per-block copy rate of the HBM suite.
- ``pingpong``: two one-warp kernels on two streams pass a flag back and forth ``rounds`` times; each
  stores its flag with an atomic exchange (release, GPU scope) and polls the other's with volatile
  loads. The polling is bounded (``MAX_SPIN`` loads in all), so kernels that cannot run side by side
  end instead of hanging the GPU, and the measurement is then refused.
"""

from __future__ import annotations

from typing import Any

import triton
import triton.language as tl

from .backend import Unavailable

BLOCK = 8192  # fp32 elements one block moves per loop step (32 KiB)
THREADS = 512  # threads per block (NCCL's channels run 512-640 threads per block)
MAX_SPIN = 1 << 22  # volatile loads a polling kernel may spend in all before it gives up


@triton.jit(do_not_specialize=["passes"])
def _copy_kernel(src, dst, n, nprog, passes, BLOCK: tl.constexpr):
    # grid-stride loop: block pid moves chunks pid, pid + nprog, ... (nprog = the grid's size), over the
    # whole buffer ``passes`` times (a launch that holds its blocks for as long as a collective does)
    offs = tl.arange(0, BLOCK)
    for _p in range(passes):
        for base in range(0, n, nprog * BLOCK):
            idx = tl.multiple_of(base + tl.program_id(0) * BLOCK, BLOCK) + offs
            m = idx < n
            tl.store(dst + idx, tl.load(src + idx, mask=m), mask=m)


@triton.jit(do_not_specialize=["passes"])
def _add_kernel(a, b, c, n, nprog, passes, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    for _p in range(passes):
        for base in range(0, n, nprog * BLOCK):
            idx = tl.multiple_of(base + tl.program_id(0) * BLOCK, BLOCK) + offs
            m = idx < n
            tl.store(c + idx, tl.load(a + idx, mask=m) + tl.load(b + idx, mask=m), mask=m)


@triton.jit(do_not_specialize=["rounds", "max_spin"])
def _pingpong_kernel(send, recv, status, rounds, max_spin, LEADER: tl.constexpr):
    spent = tl.program_id(0) * 0
    for i in range(rounds):
        target = i + 1
        if LEADER:
            tl.atomic_xchg(send, target)
        seen = tl.load(recv, volatile=True)
        while (seen < target) & (spent < max_spin):
            seen = tl.load(recv, volatile=True)
            spent += 1
        if LEADER == 0:
            tl.atomic_xchg(send, target)
    tl.store(status, spent)


class Kernels:
    """Launchers of the kernels above on the current stream."""

    def __init__(self, torch: Any) -> None:
        self.torch = torch
        hip = bool(getattr(torch.version, "hip", None))
        self.warps = THREADS // (64 if hip else 32)
        self._pp: tuple[Any, ...] | None = None

    def copy(self, src: Any, dst: Any, blocks: int, passes: int = 1) -> None:
        _copy_kernel[(blocks,)](src, dst, src.numel(), blocks, passes, BLOCK=BLOCK, num_warps=self.warps)

    def add(self, a: Any, b: Any, c: Any, blocks: int, passes: int = 1) -> None:
        _add_kernel[(blocks,)](a, b, c, c.numel(), blocks, passes, BLOCK=BLOCK, num_warps=self.warps)

    def pingpong(self, bk: Any, rounds: int) -> float:
        """Seconds for ``rounds`` round trips, both kernels released at once by one event."""
        t = self.torch
        if self._pp is None:
            z = [t.zeros(1, dtype=t.int32, device=bk.device) for _ in range(4)]
            self._pp = (*z, bk.stream(), bk.stream(), bk.stream())
            f1, f2, st1, st2 = z
            for leader, (a, b, st) in ((1, (f1, f2, st1)), (0, (f2, f1, st2))):  # compile, no polling
                _pingpong_kernel[(1,)](a, b, st, 0, MAX_SPIN, LEADER=leader, num_warps=1)
            bk.sync()
        f1, f2, st1, st2, g, s1, s2 = self._pp
        for x in (f1, f2, st1, st2):
            x.zero_()
        bk.sync()
        go, start, end = bk.event(timing=False), bk.event(), bk.event()
        with bk.use(g):
            bk.gate(2e-3)
            go.record()
        for s in (s1, s2):
            bk.wait(s, go)
        with bk.use(s1):
            start.record()
            _pingpong_kernel[(1,)](f1, f2, st1, rounds, MAX_SPIN, LEADER=1, num_warps=1)
        with bk.use(s2):
            _pingpong_kernel[(1,)](f2, f1, st2, rounds, MAX_SPIN, LEADER=0, num_warps=1)
        with bk.use(s1):
            end.record()
        bk.sync()
        if max(int(st1.item()), int(st2.item())) >= MAX_SPIN:
            raise Unavailable("the two polling kernels did not run side by side (polling gave up)")
        return bk.elapsed(start, end)


def load() -> Kernels:
    import torch

    return Kernels(torch)
