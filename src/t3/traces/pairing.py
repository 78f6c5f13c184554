"""Pair every collective with the GEMM that produces or consumes its tensor.

A Kineto trace records shapes, not tensor identities, so a pair is found the way one reads a
timeline: by element count and program order on the rank's host thread.

- all-reduce, reduce-scatter: the *producer* is the latest GEMM issued before the collective whose
  output has as many elements as the reduced tensor (``gemm-ar``, ``gemm-rs``);
- all-gather: the *consumer* is the first GEMM issued after it whose activation input (A) has as
  many elements as the gathered tensor (``ag-gemm``), or else whose weight (B) does (``ag-gemm-w``,
  FSDP / ZeRO-3 gathering one weight);
- all-to-all: the first GEMM issued after it reading as many elements (dispatch -> expert GEMM,
  ``a2a-gemm``), else the latest GEMM before it writing as many (expert GEMM -> combine, ``gemm-a2a``).

A GEMM joins at most one pair per direction. GEMMs on the collective's own host thread are preferred;
other threads are searched when that one has none. Collectives that match nothing (a data-parallel
gradient bucket, a flat FSDP parameter buffer) stay unpaired and are reported with their exposed time.
With a model, each pair is labelled with the TP sublayer whose widths it matches.
"""

from __future__ import annotations

from t3.traces.schema import (
    ALL_GATHER,
    ALL_REDUCE,
    ALL_TO_ALL,
    REDUCE_SCATTER,
    ImportedTrace,
    Pair,
    TraceCollective,
    TraceGemm,
)


def _candidates(c: TraceCollective, gemms: list[TraceGemm]) -> list[TraceGemm]:
    same = [g for g in gemms if g.thread == c.thread]
    return same if same else gemms


def _before(c, gemms, used, elems, attr) -> TraceGemm | None:
    best = None
    for g in _candidates(c, gemms):
        if g.launch_s <= c.launch_s and g.index not in used and getattr(g, attr) == elems:
            if best is None or g.launch_s >= best.launch_s:
                best = g
    return best


def _after(c, gemms, used, elems, attr) -> TraceGemm | None:
    best = None
    for g in _candidates(c, gemms):
        if g.launch_s >= c.launch_s and g.index not in used and getattr(g, attr) == elems:
            if best is None or g.launch_s < best.launch_s:
                best = g
    return best


def find_pairs(trace: ImportedTrace) -> list[Pair]:
    produced: set[int] = set()
    consumed: set[int] = set()
    pairs: list[Pair] = []
    for c in sorted(trace.collectives, key=lambda c: (c.launch_s, c.index)):
        full = c.full_elems
        if full is None:
            continue
        if c.op in (ALL_REDUCE, REDUCE_SCATTER):
            g = _before(c, trace.gemms, produced, full, "out_elems")
            if g is not None:
                produced.add(g.index)
                pairs.append(Pair(g, c, "gemm-ar" if c.op == ALL_REDUCE else "gemm-rs", "produces"))
        elif c.op == ALL_GATHER:
            for attr, kind in (("a_elems", "ag-gemm"), ("b_elems", "ag-gemm-w")):
                g = _after(c, trace.gemms, consumed, full, attr)
                if g is not None:
                    consumed.add(g.index)
                    pairs.append(Pair(g, c, kind, "consumes"))
                    break
        elif c.op == ALL_TO_ALL:
            g = _after(c, trace.gemms, consumed, full, "a_elems")
            if g is not None:
                consumed.add(g.index)
                pairs.append(Pair(g, c, "a2a-gemm", "consumes"))
                continue
            g = _before(c, trace.gemms, produced, full, "out_elems")
            if g is not None:
                produced.add(g.index)
                pairs.append(Pair(g, c, "gemm-a2a", "produces"))
    return pairs


def sublayer_label(p: Pair, model, tp: int | None) -> str:
    """The TP sublayer of ``model`` whose widths this pair's GEMM has (empty if none)."""
    if model is None or not tp:
        return ""
    g, h = p.gemm, model.hidden

    def w(x: int | None) -> int | None:
        return x // tp if x and x % tp == 0 else None

    if p.kind in ("gemm-ar", "gemm-rs") and g.n == h:
        for name, width in (("op (attention out-projection)", model.attn_width), ("fc2", model.ffn),
                            ("fc1-bwd (FC-1 data gradient)", model.fc1_width),
                            ("ip-bwd (QKV data gradient)", model.qkv_width)):  # fmt: skip
            if g.k == w(width):
                return name
    if p.kind == "ag-gemm" and g.k == h:
        for name, width in (("qkv", model.qkv_width), ("fc1", model.fc1_width)):
            if g.n == w(width):
                return name
    if p.kind in ("a2a-gemm", "gemm-a2a") and model.expert_ffn:
        if p.kind == "a2a-gemm" and g.k == h and g.n == 2 * model.expert_ffn:
            return "expert fc1 (gate + up)"
        if p.kind == "gemm-a2a" and g.n == h and g.k == model.expert_ffn:
            return "expert fc2"
    return ""


def pair_trace(trace: ImportedTrace, model=None) -> ImportedTrace:
    """Forms the pairs (in place) and labels them with ``model``'s sublayers; returns the trace."""
    pairs = find_pairs(trace)
    if model is not None:
        pairs = [
            Pair(p.gemm, p.collective, p.kind, p.relation, sublayer_label(p, model, p.collective.group_size))
            for p in pairs
        ]
        if pairs and not any(p.label for p in pairs):
            trace.notes.append(
                f"model '{getattr(model, 'name', model)}': no pair's GEMM has the widths of one of its TP"
                " sublayers (another model, or another TP degree than the collectives' group): pairs left unlabelled"
            )
    trace.pairs = sorted(pairs, key=lambda p: (min(p.gemm.start_s, p.collective.start_s), p.collective.index))
    if not trace.gemms:
        why = (
            f"{trace.unshaped_gemms} GEMMs have no shapes: profile with torch.profiler.profile(record_shapes=True)"
            if trace.unshaped_gemms else "the trace has no GEMMs (aten::mm / addmm / bmm / linear)"
        )  # fmt: skip
        trace.notes.append(f"nothing to pair: {why}")
    elif not trace.collectives:
        trace.notes.append("nothing to pair: the trace has no collectives (c10d / NCCL / gloo)")
    elif not trace.pairs:
        trace.notes.append(
            "nothing to pair: no collective moves a tensor with as many elements as a GEMM's output or input"
        )
    return trace
