"""Builds ``data/megatron_sp_tp8_h100.constructed.pt.trace.json.gz``: a *constructed* GPU trace.

It is not a measurement. It follows, event for event, the documented format of the Chrome traces
``torch.profiler`` writes for a CUDA + NCCL run (``record_shapes=True``): ``cpu_op`` events with
``Input Dims`` / ``Input type``; ``cudaLaunchKernel`` runtime events and ``kernel`` events linked by
``correlation`` and by ``ac2g`` flow events; ``record_param_comms`` with ``Collective name``,
``In msg nelems``, ``Out msg nelems``, ``Group size``, ``dtype`` and the process group, repeated on
the NCCL kernel as recent PyTorch does; ``nccl:*`` annotations; ``ProfilerStep#N``;
``distributedInfo`` and ``deviceProperties``. The event and field names were checked against public
Kineto traces of NCCL runs (Holistic Trace Analysis' test traces,
https://github.com/facebookresearch/HolisticTraceAnalysis/tree/main/tests/data) and against traces
torch 2.13 writes here; no event was copied from them.

The run it describes: rank 0 of 8 (one H100), one Megatron tensor + sequence parallel Transformer
layer forward (Llama-3.1-8B widths, TP 8, 4096 tokens, bf16), two profiler steps, plus one
data-parallel gradient all-reduce per step that matches no GEMM. The kernel durations are
*illustrative* (round numbers of a plausible size), so any "model error" computed on this file
measures nothing; tests use it for the format and the pairing only.

Regenerate: ``PYTHONPATH=src python tests/traces/make_gpu_fixture.py``.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

OUT = Path(__file__).parent / "data" / "megatron_sp_tp8_h100.constructed.pt.trace.json.gz"
PID, TID, GPU_TID, NCCL_TID = 4242, 4242, 7, 20
T, H, TP = 4096, 4096, 8
QKV, FC1 = 6144 // TP, 2 * 14336 // TP  # per-rank output widths (GQA q + k + v; gate + up)
OUTP, FC2 = 4096 // TP, 14336 // TP  # per-rank input widths
GRAD_BUCKET = 25_000_000  # fp32 elements of a DDP gradient bucket: no GEMM has this size

# the layer, in program order: (what, details, kernel duration in us [illustrative])
LAYER = [
    ("ag", {"rows": T // TP, "cols": H}, 95.0),
    ("gemm", {"m": T, "n": QKV, "k": H, "name": "qkv"}, 45.0),
    ("kernel", {"name": "flash_fwd_kernel"}, 160.0),
    ("gemm", {"m": T, "n": H, "k": OUTP, "name": "out-proj"}, 30.0),
    ("rs", {"rows": T, "cols": H}, 100.0),
    ("kernel", {"name": "rms_norm_kernel", "overlap": True}, 40.0),  # runs beside the RS (stream 7)
    ("ag", {"rows": T // TP, "cols": H}, 95.0),
    ("gemm", {"m": T, "n": FC1, "k": H, "name": "fc1"}, 330.0),
    ("kernel", {"name": "silu_and_mul_kernel"}, 35.0),
    ("gemm", {"m": T, "n": H, "k": FC2, "name": "fc2"}, 170.0),
    ("rs", {"rows": T, "cols": H}, 100.0),
    ("ar", {"elems": GRAD_BUCKET}, 650.0),
]
PAIRS = [("ag-gemm", "qkv"), ("gemm-rs", "out-proj"), ("ag-gemm", "fc1"), ("gemm-rs", "fc2")]


class _Builder:
    def __init__(self) -> None:
        self.ev: list[dict] = []
        self.cpu = 1_000_000.0  # host clock (us)
        self.gpu = {GPU_TID: 1_000_050.0, NCCL_TID: 1_000_050.0}  # stream clocks
        self.ext, self.corr = 100, 5000

    def op(self, name: str, ts: float, dur: float, cat: str = "cpu_op", **args) -> dict:
        self.ext += 1
        e = {"ph": "X", "cat": cat, "name": name, "pid": PID, "tid": TID, "ts": round(ts, 3), "dur": round(dur, 3),
             "args": {"External id": self.ext, "Record function id": 0, **args}}  # fmt: skip
        self.ev.append(e)
        return e

    def launch(
        self, ts: float, kname: str, dur: float, stream: int, extra: dict, after: float = 0.0
    ) -> tuple:
        self.corr += 1
        c = self.corr
        self.ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": PID, "tid": TID,
                        "ts": round(ts, 3), "dur": 6.0, "args": {"External id": self.ext, "cbid": 211,
                                                                  "correlation": c}})  # fmt: skip
        start = max(self.gpu[stream], ts + 8.0, after)
        self.ev.append({"ph": "X", "cat": "kernel", "name": kname, "pid": 0, "tid": stream, "ts": round(start, 3),
                        "dur": dur, "args": {"External id": self.ext, "queued": 0, "device": 0, "context": 1,
                                             "stream": stream, "correlation": c, "registers per thread": 168,
                                             "shared memory": 213008, "blocks per SM": 1.0, "warps per SM": 4.0,
                                             "grid": [132, 1, 1], "block": [384, 1, 1],
                                             "est. achieved occupancy %": 6, **extra}})  # fmt: skip
        self.ev.append(
            {"ph": "s", "id": c, "pid": PID, "tid": TID, "ts": round(ts, 3), "cat": "ac2g", "name": "ac2g"}
        )
        self.ev.append({"ph": "f", "id": c, "pid": 0, "tid": stream, "ts": round(start, 3), "cat": "ac2g",
                        "name": "ac2g", "bp": "e"})  # fmt: skip
        self.gpu[stream] = start + dur
        return start, start + dur

    def gemm(self, m: int, n: int, k: int, dur: float) -> None:
        t = self.cpu
        bf = "c10::BFloat16"
        self.op("aten::linear", t, 60.0, **{"Input Dims": [[m, k], [n, k], []], "Input type": [bf, bf, ""],
                                            "Input Strides": [[k, 1], [k, 1], []], "Concrete Inputs": ["", "", ""]})  # fmt: skip
        self.op("aten::t", t + 2, 8.0, **{"Input Dims": [[n, k]], "Input type": [bf]})
        self.op("aten::matmul", t + 12, 46.0, **{"Input Dims": [[m, k], [k, n]], "Input type": [bf, bf]})
        self.op("aten::mm", t + 14, 42.0, **{"Input Dims": [[m, k], [k, n]], "Input type": [bf, bf],
                                             "Input Strides": [[k, 1], [1, k]], "Concrete Inputs": ["", ""]})  # fmt: skip
        self.launch(t + 30, "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_"
                    "execute_segment_k_off_kernel__5x_cublas", dur, GPU_TID, {}, after=self.gpu[NCCL_TID])  # fmt: skip
        self.cpu = t + 70

    def kernel(self, name: str, dur: float, overlap: bool) -> None:
        t = self.cpu
        self.op("aten::" + name.split("_kernel")[0], t, 20.0)
        after = 0.0 if overlap else self.gpu[NCCL_TID]
        self.launch(t + 5, name, dur, GPU_TID, {}, after=after)
        self.cpu = t + 30

    def collective(self, kind: str, d: dict, dur: float) -> None:
        t = self.cpu
        if kind == "ar":
            i = o = d["elems"]
            c10d, coll, kname, dt, ann = ("c10d::allreduce_", "allreduce", "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
                                          "Float", "nccl:all_reduce")  # fmt: skip
            dims, types, pg, desc, size = (
                [[[i]], [], [], [], [], []],
                ["TensorList", "", "", "", "Scalar", "Scalar"],
                "0",
                "default_pg",
                8,
            )
        else:
            full, shard = d["rows"] * d["cols"], d["rows"] * d["cols"] // TP
            bf = "c10::BFloat16"
            pg, desc, size, dt = "1", "tp", TP, "BFloat16"
            if kind == "ag":
                i, o = d["rows"] * d["cols"], d["rows"] * d["cols"] * TP
                c10d, coll, ann = "c10d::_allgather_base_", "_allgather_base", "nccl:_all_gather_base"
                kname = "ncclDevKernel_AllGather_RING_LL"
                dims = [[d["rows"] * TP, d["cols"]], [d["rows"], d["cols"]], [], [], []]
            else:
                i, o = full, shard
                c10d, coll, ann = (
                    "c10d::_reduce_scatter_base_",
                    "_reduce_scatter_base",
                    "nccl:_reduce_scatter_base",
                )
                kname = "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL"
                dims = [[d["rows"] // TP, d["cols"]], [d["rows"], d["cols"]], [], [], []]
            types = [bf, bf, "", "Scalar", "Scalar"]
        comm = {"Collective name": coll, "In msg nelems": i, "Out msg nelems": o, "Group size": size, "dtype": dt,
                "In split size": "[]", "Out split size": "[]", "Process Group Name": pg,
                "Process Group Description": desc, "Process Group Ranks": str(list(range(size)))}  # fmt: skip
        self.op(c10d, t, 90.0, **{"Input Dims": dims, "Input type": types})
        self.op(
            "record_param_comms",
            t + 5,
            70.0,
            **comm,
            Rank=0,
            **{"Global rank start": 0, "Global rank stride": 1},
        )
        self.op(ann, t + 10, 55.0, "user_annotation")
        self.launch(t + 20, kname + "(ncclDevComm*, unsigned long, ncclWork*)", dur, NCCL_TID, comm,
                    after=self.gpu[GPU_TID])  # fmt: skip
        self.cpu = t + 100


def build() -> dict:
    b = _Builder()
    for step in range(2):
        t0 = b.cpu
        for kind, d, dur in LAYER:
            if kind == "gemm":
                b.gemm(d["m"], d["n"], d["k"], dur)
            elif kind == "kernel":
                b.kernel(d["name"], dur, d.get("overlap", False))
            else:
                b.collective(kind, d, dur)
        b.cpu = max(b.cpu, max(b.gpu.values())) + 20
        b.ev.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "pid": PID, "tid": TID,
                     "ts": round(t0 - 5, 3), "dur": round(b.cpu - t0, 3), "args": {"External id": 1 + step}})  # fmt: skip
    meta = [{"name": "process_name", "ph": "M", "pid": PID, "tid": 0, "args": {"name": "python"}},
            {"name": "process_name", "ph": "M", "pid": 0, "tid": 0, "args": {"name": "python"}},
            {"name": "process_labels", "ph": "M", "pid": 0, "tid": 0, "args": {"labels": "GPU 0"}},
            {"name": "thread_name", "ph": "M", "pid": 0, "tid": GPU_TID, "args": {"name": "stream 7"}},
            {"name": "thread_name", "ph": "M", "pid": 0, "tid": NCCL_TID, "args": {"name": "stream 20"}}]  # fmt: skip
    ranks = list(range(8))
    return {
        "schemaVersion": 1,
        "deviceProperties": [
            {
                "id": 0,
                "name": "NVIDIA H100 80GB HBM3",
                "totalGlobalMem": 85045379072,
                "computeMajor": 9,
                "computeMinor": 0,
                "maxThreadsPerBlock": 1024,
                "numSms": 132,
                "warpSize": 32,
            }
        ],  # fmt: skip
        "record_shapes": 1,
        "distributedInfo": {
            "backend": "nccl",
            "rank": 0,
            "world_size": 8,
            "pg_count": 2,
            "nccl_version": "2.21.5",
            "pg_config": [
                {
                    "pg_name": "0",
                    "pg_desc": "default_pg",
                    "backend_config": "cuda:nccl",
                    "pg_size": 8,
                    "ranks": ranks,
                },
                {
                    "pg_name": "1",
                    "pg_desc": "tp",
                    "backend_config": "cuda:nccl",
                    "pg_size": 8,
                    "ranks": ranks,
                },
            ],
        },  # fmt: skip
        "traceName": "constructed (tests/traces/make_gpu_fixture.py): not a measurement",
        "displayTimeUnit": "ms",
        "baseTimeNanoseconds": 1700000000000000000,
        "traceEvents": meta + b.ev,
    }


def main() -> None:
    data = json.dumps(build(), separators=(",", ":")).encode()
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_bytes(gzip.compress(data, mtime=0))
    print(f"wrote {OUT} ({OUT.stat().st_size} B)")


if __name__ == "__main__":
    main()
