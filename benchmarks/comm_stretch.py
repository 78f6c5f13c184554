"""How long a collective took beside a GEMM, read from the interference rows that publish both the GEMM's
time together and the wall time of the pair (the tritonBLAS MI300X sweep), beside the model's.

    PYTHONPATH=src python benchmarks/comm_stretch.py

For each pair row with its compute row (same GEMM, collective, size and channels): the GEMM alone and
together, the collective alone, the pair's wall time from a common start (the collective launched first),
and what follows from them where the wall outlasts the GEMM: the collective ended ``wall - GEMM together``
after the GEMM, so it took at least ``wall / alone`` of its time alone (the lead before the GEMM is in
both). The model's column is its collective together / alone (``t3 validate``'s prediction of the pair row,
`comm_together_s` / `comm_alone_s`). Nothing is fitted here.
"""

from __future__ import annotations

from t3.validation import load_dataset
from t3.validation.runner import Predictor


def main() -> None:
    rows = [
        r
        for r in load_dataset()
        if r.category == "interference" and r.workload["victim"] in ("pair", "compute")
    ]

    def key(r):
        w = r.workload
        return (r.hardware, w["m"], w["n"], w["k"], w["comm"], w["nbytes"], w.get("channels", 0))

    compute = {key(r): r for r in rows if r.workload["victim"] == "compute"}
    pred = Predictor()
    head = (
        f"{'hardware':9} {'GEMM':>17} {'collective':>19} {'ch':>3} {'GEMM alone':>11} {'together':>9}"
        f" {'coll. alone':>11} {'wall':>9} {'ends after GEMM':>16} {'stretch':>8} {'model':>6}"
    )
    print(head)
    for r in rows:
        if r.workload["victim"] != "pair" or key(r) not in compute:
            continue
        w, p, c = r.workload, r.published, compute[key(r)].published
        if "gemm_alone_ms" not in p or "comm_alone_ms" not in p:
            continue
        wall, gemm_t, alone = p["together_ms"], c["together_ms"], p["comm_alone_ms"]
        after = wall - gemm_t
        d = pred.predict(r).detail
        model = d["comm_together_s"] / d["comm_alone_s"]
        stretch = f"{wall / alone:7.2f}x" if after > 0 else "      -"
        print(
            f"{r.hardware:9} {w['m']:>5}x{w['n']}x{w['k']} {w['comm']:>10} {w['nbytes'] / 2**20:6.0f} MiB"
            f" {w.get('channels', 0):>3} {p['gemm_alone_ms']:8.3f} ms {gemm_t:6.3f} ms {alone:8.3f} ms {wall:6.3f} ms"
            f" {after:13.3f} ms {stretch} {model:5.2f}x"
        )
    print("(ms: milliseconds; stretch: the collective's time beside the GEMM over its time alone, at least;"
          " ch: NCCL_MAX_NCHANNELS, 0 = the library's default)")  # fmt: skip


if __name__ == "__main__":
    main()
