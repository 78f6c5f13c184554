"""Timing primitives of the kit: per-call times of a gated batch, chains, and the statistics rows carry.

A *batch* queues ``iters`` calls, each followed by an event, behind a gate (a sleep kernel long enough
for the host to queue the whole batch), so the calls run back to back at the GPU's pace; a call's time
is from the event before it to the event after it. Where the host took longer to queue the batch than
the gate held the stream, the batch is taken again once with a longer gate.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

GATE_BASE_S = 1e-3  # the gate's fixed part
HOST_S_PER_CALL = 60e-6  # a generous estimate of the host's time to queue one call and its event
MIN_TIME_S = 1e-9  # a time below the timer's resolution counts as this (rows hold positive numbers)


@dataclass(frozen=True)
class Stats:
    """Median and 10th / 90th percentiles (numpy's linear interpolation) of ``n`` samples."""

    median: float
    p10: float
    p90: float
    n: int


def stats(samples: Sequence[float]) -> Stats:
    x = np.maximum(np.asarray(samples, dtype=float), MIN_TIME_S)
    if x.size == 0:
        raise ValueError("no samples")
    p10, p90 = np.percentile(x, [10, 90])
    return Stats(float(np.median(x)), float(p10), float(p90), int(x.size))


def gate_for(calls: int) -> float:
    """Seconds a gate holds a stream while the host queues ``calls`` calls."""
    return GATE_BASE_S + calls * HOST_S_PER_CALL


def batch(bk: Any, fn: Callable[[int], Any], iters: int, warmup: int, stream: Any = None) -> list[float]:
    """Per-call seconds of ``fn(i)`` for ``iters`` calls after ``warmup`` untimed ones (``i`` counts
    every call from 0, for rotating buffers)."""
    for i in range(warmup):
        fn(i)
    bk.sync()
    gate_s = gate_for(iters)
    out: list[float] = []
    for _ in range(2):
        evs = [bk.event() for _ in range(iters + 1)]
        with bk.use(stream):
            h0 = time.perf_counter()
            bk.gate(gate_s)
            evs[0].record()
            for i in range(iters):
                fn(warmup + i)
                evs[i + 1].record()
            host = time.perf_counter() - h0
        bk.sync()
        out = [bk.elapsed(evs[i], evs[i + 1]) for i in range(iters)]
        if not bk.concurrent or host < 0.8 * gate_s:
            break
        gate_s = 2.0 * host + GATE_BASE_S
    return out


def chain(bk: Any, fn: Callable[[int], Any], n: int, gated: bool = True) -> float:
    """Seconds per call of ``n`` calls of ``fn(i)`` timed as one span (queued behind a gate, or issued
    by the host as it goes when ``gated`` is false)."""
    a, b = bk.event(), bk.event()
    bk.sync()
    if gated:
        bk.gate(gate_for(n))
    a.record()
    for i in range(n):
        fn(i)
    b.record()
    bk.sync()
    return bk.elapsed(a, b) / n
