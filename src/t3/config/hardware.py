"""Typed, validated, immutable hardware descriptions.

A hardware description is a TOML file (see ``presets/``). Every section maps to one model below;
unknown keys, missing fields and out-of-range values raise :class:`t3.errors.ConfigError` whose
one-line message names the offending field (``link.bandwidth_Bps: must be > 0``).

Units are SI throughout: seconds, bytes, bytes/second, hertz.
"""

from __future__ import annotations

import copy
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from t3.config.toml_file import parse_toml, read_toml
from t3.errors import ConfigError


class _Strict(BaseModel):
    # strict: no coercion ("80" is not 80, "no" is not False, 80.0 is not 80; an int is a float);
    # finite: inf / nan are refused wherever a number is expected
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


class Compute(_Strict):
    cus: int = Field(gt=0, description="compute units (CUs / SMs) per GPU")
    clock_hz: float = Field(gt=0, description="core clock")
    matrix_flops_per_clk_per_cu: dict[str, float] = Field(
        description="dense matrix FLOP per clock per CU, by dtype (fp16, bf16, fp8, tf32, fp32)"
    )
    gemm_clock_hz: dict[str, float] | None = Field(
        default=None,
        description="sustained core clock under dense GEMM load, by dtype (power-limited GPUs clock lower"
        " for dtypes that toggle more); a dtype not listed runs at clock_hz",
    )
    gemm_efficiency: float = Field(
        default=1.0,
        ge=1e-4,  # (t3 calibrate searches it down to 1e-4; a GPU sustaining less of its peak is a typo)
        le=1,
        description="fraction of the matrix peak (at gemm_clock_hz) a fed GEMM tile's inner loop reaches",
    )
    wg_per_cu: int = Field(
        default=1, gt=0, description="GEMM workgroups resident per CU (wave = cus * wg_per_cu)"
    )
    tile_m: int = Field(default=128, gt=0, description="GEMM output macro-tile rows")
    tile_n: int = Field(default=128, gt=0, description="GEMM output macro-tile columns")
    tiles: list[str] = Field(
        default_factory=list,
        description="macro-tiles 'MxN' the GPU's GEMM library has besides the power-of-two ones (as its"
        " kernel names show, e.g. hipBLASLt's MT256x224x64); offered to the tile choice too where no larger"
        " than tile_m x tile_n, as the power-of-two ones are",
    )
    l2_bytes: int = Field(gt=0, description="last-level (L2) cache size")
    l2_usable_fraction: float = Field(
        default=0.5, gt=0, le=1, description="share of the L2's sets a GEMM's data may use"
    )
    l2_ways: int = Field(default=16, gt=0, description="L2 associativity (ways per set; sets are hashed)")
    l2_line_bytes: int = Field(default=128, gt=0, description="L2 line size")
    l2_Bps: float | None = Field(
        default=None, gt=0, description="L2-to-CU bandwidth of the whole GPU (default: never limits a tile)"
    )
    l2_memory_side: bool = Field(
        default=False,
        description="every DRAM access, of any engine (CU kernels, copy engines, link traffic landing in"
        " memory), passes the L2 that feeds the GEMM's tiles, so communication's DRAM bytes share l2_Bps"
        " with the GEMM's operand loads; false: they reach DRAM by another path",
    )
    k_step: int = Field(default=32, gt=0, description="GEMM K elements per inner-loop stage (BLOCK_K)")
    k_stages: int = Field(
        default=2,
        gt=0,
        description="GEMM pipeline stages loaded ahead (the prologue; and the bytes in flight unless"
        " smem_bytes sets them per tile)",
    )
    smem_bytes: int | None = Field(
        default=None,
        gt=0,
        description="shared memory one thread block of the GEMM library may use; set: each tile's kernel"
        " keeps as many K stages as fit in it beside smem_epilogue_bytes (CUTLASS's StageCountAutoCarveout),"
        " and the stages but the one computed on are in flight (unset: k_stages for every tile)",
    )
    smem_epilogue_bytes: int = Field(
        default=0,
        ge=0,
        description="shared memory a GEMM kernel keeps besides its K stages (epilogue, barriers)",
    )
    multicast: int = Field(
        default=1,
        gt=0,
        description="CTAs of a GEMM cluster that receive one operand block from the L2 in one load (TMA"
        " multicast): a tile's larger operand block is read from the L2 once per cluster (1 = no multicast)",
    )
    mma_ctas: int = Field(
        default=1,
        gt=0,
        description="CTAs one matrix instruction spans (2 for sm100's tcgen05.mma cta_group::2, the '2cta' kernels"
        " of cuBLAS and CUTLASS's 2SM kernels): the pair splits a tile's larger operand block, each CTA loading"
        " and keeping in shared memory its share of it (1 = one CTA per instruction)",
    )
    epilogue: Literal["overlapped", "exposed"] = Field(
        default="overlapped",
        description="how the GEMM library's kernels store a tile's output: 'exposed' after its K loop with"
        " the matrix units idle (cooperative and non-warp-specialised kernels), at the CU's share of the L2"
        " bandwidth; 'overlapped' behind another tile's K loop (ping-pong kernels)",
    )
    stream_k: bool = Field(
        default=False,
        description="the GEMM library runs a plain GEMM's partial last wave stream-K (its tiles' K loops"
        " spread over every CU, with an FP32 fixup per split tile) where that is faster than whole tiles",
    )
    split_k: int = Field(
        default=1,
        gt=0,
        description="the most K slices the GEMM library splits a plain GEMM's tiles into where they do not"
        " fill one wave (each slice a thread block, the FP32 partials summed after): the planner takes the"
        " split (1 to this) of least time; 1 = never split",
    )
    raster: Literal["row", "column"] = Field(
        default="row", description="order of a GEMM's tiles inside a chunk: row-major or column-major"
    )
    cu_copy_Bps: float = Field(
        gt=0,
        description="bytes/s of loads + stores one CU issues in a communication/reduction kernel"
        " (a copy of c bytes issues 2c, a two-input reduction 3c)",
    )
    kernel_launch_s: float = Field(default=0.0, ge=0, description="launch overhead per kernel")
    graph_launch_s: float | None = Field(
        default=None,
        ge=0,
        description="launch to launch of kernels the device runs back to back with no host in between (a"
        " CUDA graph's replay, or calls queued ahead): what a kernel costs besides its own span there"
        " (unset: not known for this GPU)",
    )
    stream_wait_s: float = Field(
        default=0.0,
        ge=0,
        description="an event recorded on one stream and waited on by another: from the record to the start"
        " of the waiting stream's next kernel, beyond its launch (0 = free)",
    )
    flag_latency_s: float = Field(
        default=0.0,
        ge=0,
        description="a flag (signal) stored by a kernel and seen by a kernel polling it on another stream or"
        " GPU's memory of the same GPU (0 = free)",
    )
    dispatch: Literal["launch_order", "shared"] = Field(
        default="shared",
        description="how the thread blocks of kernels on different streams reach the CUs: launch_order, every"
        " block of a kernel goes out before a later kernel's, so a kernel launched while an earlier one's"
        " blocks fill the CUs waits for them (NVIDIA's left-over policy); shared, running kernels share the"
        " CUs as they free (the fluid model)",
    )
    cluster_ctas: int = Field(
        default=1,
        gt=0,
        description="thread blocks of a GEMM kernel launched as one cluster (Hopper thread-block clusters,"
        " co-scheduled on free SMs): beside h CUs another kernel holds, each held CU leaves its cluster slot's"
        " other CUs idle too, so the GEMM runs on cus - cluster_ctas x h CUs in whole clusters (1 = no"
        " clusters)",
    )
    cu_inflight_bytes: float = Field(
        default=0.0,
        ge=0,
        description="bytes one CU of a copy/reduction kernel keeps in flight to memory (0 = no window limit)",
    )
    stream_inflight_bytes: float = Field(
        default=0.0,
        ge=0,
        description="bytes of loads one thread block of a plain streaming kernel on k blocks keeps in flight"
        " (t3 measure's copy and add: one block-sized load, then its store, per loop step), so that it moves"
        " at most this over the memory's loaded latency (0 = as a communication kernel:"
        " compute.cu_inflight_bytes)",
    )

    @property
    def library_tiles(self) -> list[tuple[int, int]]:
        """``tiles`` as (rows, columns) pairs (their form is checked when the preset is read)."""
        return [(int(m), int(n)) for m, _, n in (t.partition("x") for t in self.tiles)]

    @model_validator(mode="after")
    def _tiles(self) -> Compute:
        for t in self.tiles:
            m, sep, n = t.partition("x")
            if not (sep and m.isdigit() and n.isdigit() and int(m) > 0 and int(n) > 0):
                raise ValueError(
                    f"tiles: '{t}' is not a macro-tile 'MxN' of positive integers (e.g. '256x224')"
                )
        return self

    @model_validator(mode="after")
    def _smem(self) -> Compute:
        if self.smem_bytes is None and self.smem_epilogue_bytes:
            raise ValueError("smem_epilogue_bytes: set without smem_bytes (the stages it is kept beside)")
        if self.smem_bytes is not None and self.smem_epilogue_bytes >= self.smem_bytes:
            raise ValueError(
                f"smem_epilogue_bytes: {self.smem_epilogue_bytes} leaves none of smem_bytes"
                f" ({self.smem_bytes}) for K stages"
            )
        return self

    @model_validator(mode="after")
    def _dtypes(self) -> Compute:
        from t3.workload.sublayers import DTYPE_BYTES

        for k, v in self.matrix_flops_per_clk_per_cu.items():
            if k not in DTYPE_BYTES:
                raise ValueError(
                    f"matrix_flops_per_clk_per_cu.{k}: unknown dtype (known: {', '.join(DTYPE_BYTES)})"
                )
            if v <= 0:
                raise ValueError(f"matrix_flops_per_clk_per_cu.{k}: must be > 0")
        for k, v in (self.gemm_clock_hz or {}).items():
            if v <= 0:
                raise ValueError(f"gemm_clock_hz.{k}: must be > 0")
        return self

    def gemm_peak_flops(self, dtype: str) -> float:
        """Matrix peak of the whole GPU for ``dtype`` at the sustained GEMM clock (FLOP/s)."""
        return self.peak_flops(dtype) * self.gemm_clock(dtype) / self.clock_hz

    def gemm_clock(self, dtype: str) -> float:
        """Clock (Hz) a dense GEMM of ``dtype`` sustains."""
        return (self.gemm_clock_hz or {}).get(dtype, self.clock_hz)

    def peak_flops(self, dtype: str) -> float:
        """Matrix peak of the whole GPU for ``dtype`` in FLOP/s (efficiency not applied)."""
        try:
            per = self.matrix_flops_per_clk_per_cu[dtype]
        except KeyError:
            raise ConfigError(
                f"compute.matrix_flops_per_clk_per_cu: no entry for dtype '{dtype}' "
                f"(have {sorted(self.matrix_flops_per_clk_per_cu)})"
            ) from None
        return per * self.clock_hz * self.cus


class Hbm(_Strict):
    bandwidth_Bps: float = Field(gt=0, description="peak DRAM bandwidth per GPU")
    efficiency: float = Field(default=1.0, ge=1e-4, le=1, description="sustainable fraction of peak")
    channels: int = Field(default=32, gt=0, description="memory channels (used by the arbitration model)")
    turnaround: float = Field(
        default=0.0,
        ge=0,
        description="read/write turnaround k: capacity x 1/(1 + k min(w, 1-w)) at write share w"
        " (k = turnaround time / (bursts per direction batch x burst time); 0 = no loss)",
    )
    latency_s: float = Field(
        default=0.0, ge=0, description="unloaded DRAM latency of a request (0 = windows never limit)"
    )
    service_s: float = Field(
        default=0.0,
        ge=0,
        description="service time of the burst a request queues behind: loaded latency"
        " = latency_s + service_s x rho / (2 (1 - rho)) at utilisation rho",
    )
    queue_entries: int = Field(default=64, gt=0, description="memory-controller queue entries per channel")
    bank_groups: int = Field(default=4, gt=0, description="bank groups per channel (NMC updates in flight)")
    burst_bytes: int = Field(default=32, gt=0, description="bytes one channel access (burst) moves")
    entry_bytes: int = Field(default=64, gt=0, description="bytes one queue entry (request) moves")

    @property
    def effective_Bps(self) -> float:
        return self.bandwidth_Bps * self.efficiency


class Link(_Strict):
    bandwidth_Bps: float = Field(gt=0, description="bandwidth per link per direction")
    latency_s: float = Field(ge=0, description="one-way latency of a transfer")


class Topology(_Strict):
    kind: Literal["ring", "mesh", "switch"] = Field(description="ring, fully-connected mesh, or switch")
    gpus: int = Field(
        default=8,
        gt=1,
        description="GPUs in the node: more GPUs than this are refused, except that a sublayer run"
        " (t3 run, sweeps, t3 ficco) on a ring spans whole nodes of this many GPUs (the T3 paper runs TP 16"
        " and 32 on its 8-GPU ring; a TP above it must be a multiple of it: tp_refusal), and that with a"
        " [network] whole nodes up to network.nodes of them run; the GPU count of a collective or overlap"
        " given none",
    )
    bidirectional_ring: bool = Field(
        default=False, description="ring collectives use both directions (halves per-direction bytes)"
    )


class Dma(_Strict):
    engines: int = Field(gt=0, description="DMA (copy) engines per GPU")
    bandwidth_Bps: float = Field(gt=0, description="bytes/s one DMA engine moves")
    command_overhead_s: float = Field(ge=0, description="fixed cost of one DMA command")
    inflight_bytes: float = Field(
        default=0.0,
        ge=0,
        description="bytes one engine keeps in flight on memory reads (0 = no window limit)",
    )
    staging_bytes: float = Field(
        default=0.0, ge=0, description="bytes one engine may read ahead of the link (a burst at trigger)"
    )
    host_link_Bps: float = Field(
        default=0.0,
        ge=0,
        description="bytes/s per direction between the GPU and host memory (PCIe, C2C) that copy-engine"
        " copies to or from the host move at (0 = not modelled)",
    )


class Nmc(_Strict):
    present: bool = Field(description="near-memory compute: DRAM executes op-and-store updates")
    update_busy_s: float = Field(
        default=0.0,
        ge=0,
        description="time an op-and-store holds its bank (in-bank read, ALU, write); 0 = as cheap as a write",
    )


class Tracker(_Strict):
    entries: int = Field(default=256, gt=0, description="tracker table entries (T3: 256, ~19 KB)")
    granularity_tiles: int = Field(default=1, gt=0, description="wavefront tiles counted per entry")
    wavefront_tiles_per_tile: int = Field(
        default=1, gt=0, description="wavefront output tiles in one GEMM macro-tile (entries per tile)"
    )


class Mca(_Strict):
    occupancy_threshold: float = Field(
        default=0.8,
        gt=0,
        le=1,
        description="queue occupancy (fraction of entries) of a GEMM that uses no bandwidth below which"
        " communication is admitted; scaled by (1 - the GEMM's first-stage HBM utilisation)",
    )
    starvation_share: float = Field(
        default=0.05,
        ge=0,
        lt=1,
        description="minimum HBM share guaranteed to communication (starvation bound)",
    )


class Protocol(_Strict):
    """One protocol of the collective library (NCCL/RCCL: LL, LL128, Simple) in its tuning model."""

    enabled: bool = Field(default=True, description="the library may select this protocol")
    base_latency_s: float = Field(
        default=0.0,
        ge=0,
        description="fixed latency of a collective kernel with this protocol (once per call)",
    )
    step_latency_s: float | None = Field(
        default=None,
        ge=0,
        description="latency of one ring step (one hop: link, flag polling, slice sync; NCCL's hwLatencies)"
        " (unset = link.latency_s)",
    )
    bw_fraction: float = Field(
        default=1.0, gt=0, le=1, description="payload share of the bytes on the wire (LL 0.5, LL128 120/128)"
    )
    max_busbw_Bps: float = Field(
        default=0.0, ge=0, description="cap on the bus bandwidth this protocol reaches (0 = no cap)"
    )
    net_step_latency_s: float | None = Field(
        default=None,
        ge=0,
        description="latency of a ring step that crosses the network between nodes (NCCL's hwLatencies[NET]"
        "[Ring]); needed with a [network]",
    )
    tree_step_latency_s: float | None = Field(
        default=None,
        ge=0,
        description="latency of one hop of the library's tree inside a node (its chain of the node's GPUs;"
        " NCCL's hwLatencies[NVLINK][Tree]); with tree_net_step_latency_s, the tree all-reduce across nodes"
        " is modelled (unset: the ring only)",
    )
    tree_net_step_latency_s: float | None = Field(
        default=None,
        ge=0,
        description="latency of one level of the library's tree between nodes (NCCL's hwLatencies[NET]"
        "[Tree] plus the network's latencyInter); unset: no tree across nodes",
    )
    chunk_bytes: int = Field(
        default=524288,
        ge=1,
        description="payload bytes of one chunk a channel moves per hop of the library's tree pipeline (NCCL:"
        " its buffer over NCCL_STEPS 8; Simple 4 MiB / 8 = 512 KiB (src/init.cc DEFAULT_BUFFSIZE))",
    )
    net2_max_busbw_Bps: float = Field(
        default=0.0,
        ge=0,
        description="cap on the bus bandwidth across 2 nodes (NCCL's llMaxBws by host CPU; 0 = max_busbw_Bps)",
    )
    net_max_busbw_Bps: float = Field(
        default=0.0,
        ge=0,
        description="cap on the bus bandwidth across more than 2 nodes (NCCL's llMaxBws; 0 = max_busbw_Bps)",
    )
    threads: int = Field(
        default=512,
        ge=1,
        description="threads of one channel's block with this protocol (NCCL src/include/device.h"
        " NCCL_SIMPLE_MAX_NTHREADS 512, NCCL_LL_MAX_NTHREADS 512, NCCL_LL128_MAX_NTHREADS 640)",
    )
    thread_threshold_bytes: int = Field(
        default=64,
        ge=1,
        description="bytes per thread below which the library runs a call on fewer channels (NCCL"
        " src/include/comm.h NCCL_SIMPLE_THREAD_THRESHOLD 64, NCCL_LL_THREAD_THRESHOLD 8 (x ranks on a ring:"
        " src/graph/tuning.cc), NCCL_LL128_THREAD_THRESHOLD 8)",
    )


class Ll128(Protocol):
    """LL128: 120 payload bytes per 128-byte line (NCCL ``NCCL_LL128_DATAELEMS``); off unless enabled."""

    enabled: bool = Field(default=False, description="the library may select this protocol")
    bw_fraction: float = Field(default=120.0 / 128.0, gt=0, le=1, description="payload share on the wire")
    threads: int = Field(
        default=640, ge=1, description="threads of a channel's block (NCCL_LL128_MAX_NTHREADS)"
    )
    thread_threshold_bytes: int = Field(
        default=8,
        ge=1,
        description="bytes per thread below which fewer channels run (NCCL_LL128_THREAD_THRESHOLD)",
    )
    chunk_bytes: int = Field(
        default=576000,
        ge=1,
        description="payload bytes of a tree chunk (NCCL: NCCL_LL128_ELEMS_PER_THREAD 120 x 640 threads x 8 B"
        " per step = 614,400 B of lines, 15 of 16 words payload: src/enqueue.cc)",
    )


class Ll(Protocol):
    """LL: 8 payload bytes per 16-byte line (data + flag); off unless enabled."""

    enabled: bool = Field(default=False, description="the library may select this protocol")
    bw_fraction: float = Field(default=0.5, gt=0, le=1, description="payload share on the wire")
    thread_threshold_bytes: int = Field(
        default=8,
        ge=1,
        description="bytes per thread (times the ranks, on a ring) below which fewer channels run"
        " (NCCL_LL_THREAD_THRESHOLD)",
    )
    chunk_bytes: int = Field(
        default=32768,
        ge=1,
        description="payload bytes of a tree chunk (NCCL: 8 lines x 512 threads x 16 B per step = 64 KiB of"
        " lines, half payload: src/init.cc DEFAULT_LL_BUFFSIZE / NCCL_STEPS, src/enqueue.cc)",
    )


class NcclGraph(_Strict):
    """One graph NCCL's topology search found for an algorithm (``ncclTopoPrintGraph``'s line ``Pattern
    ..., nChannels C, bw INTRA/INTER, ...`` in an ``NCCL_DEBUG=INFO`` log): its channels and the bandwidth
    each channel was given inside a node and across nodes."""

    channels: int = Field(gt=0, description="channels of the graph (nChannels)")
    bw_intra_Bps: float = Field(gt=0, description="bytes/s per channel inside a node (the graph's bwIntra)")
    bw_inter_Bps: float = Field(gt=0, description="bytes/s per channel across nodes (the graph's bwInter)")


class NcclTuning(_Strict):
    """The inputs of NCCL's own tuning model across nodes (:mod:`t3.ops.nccl_tuning`): the graphs of its
    topology search and the host facts it reads. With them, the algorithm and protocol a collective across
    nodes runs are NCCL's choice (its estimate's least), not the model's fastest."""

    arch: Literal["hopper", "blackwell"] = Field(description="GPU generation of NCCL's per-channel caps")
    cpu: Literal["intel", "amd", "arm"] = Field(
        default="intel",
        description="host CPU (NCCL's LL bandwidth caps depend on it; its post overhead is network.overhead_s)",
    )
    net_latency_s: float = Field(
        default=0.0,
        ge=0,
        description="the network plugin's latency (the graphs' latencyInter; 0 for NCCL's IB)",
    )
    ring: NcclGraph = Field(description="the ring's graph")
    tree: NcclGraph | None = Field(default=None, description="the tree's graph (unset: NCCL runs no tree)")
    nvls_tree: NcclGraph | None = Field(
        default=None, description="the NVLS graph NCCL's NVLS-Tree uses (unset: no NVLS-Tree)"
    )


class Collective(_Strict):
    """The collective library's model (:mod:`t3.ops.collectives`): channels, protocols, NVLS."""

    channels: int = Field(
        default=0,
        ge=0,
        description="CUs (channels, one thread block each) a ring/direct collective kernel runs on (0 = all CUs)",
    )
    link_efficiency: float = Field(
        default=1.0,
        ge=1e-4,
        le=1,
        description="achievable fraction of link.bandwidth_Bps for a collective's data",
    )
    simple: Protocol = Protocol()
    ll128: Ll128 = Ll128()
    ll: Ll = Ll()
    direct_channels: int = Field(
        default=0,
        ge=0,
        description="CUs a direct (one-shot, all-pairs) collective kernel runs on (0 = as channels)",
    )
    p2p_channels: int = Field(
        default=0,
        ge=0,
        description="channels (CUs) of the library's send/recv kernel (all-to-all), each one connection to"
        " one peer at a time; 0: the direct exchange has no per-connection limit",
    )
    p2p_chunk_bytes: float = Field(
        default=524288.0, gt=0, description="bytes of one step of a send/recv connection (its chunk)"
    )
    p2p_connection_Bps: float = Field(
        default=0.0,
        ge=0,
        description="bytes/s one send/recv connection (one channel to one peer) sustains; 0: no limit",
    )
    host_call_s: float = Field(
        default=0.0,
        ge=0,
        description="host seconds the library spends per GPU on one call (enqueue and kernel launch): a thread"
        " that drives several GPUs (nccl-tests -g N) issues their calls one after another, so its back-to-back"
        " calls take at least N x this each (0 = not modelled)",
    )
    call_alone_s: float = Field(
        default=0.0,
        ge=0,
        description="seconds from an event recorded on an idle GPU to the kernel's start on the last rank, for one"
        " torch.distributed collective call issued right after a barrier: the host's path of the call (PyTorch's"
        " dispatch and process group, the library's enqueue, the launch) and the ranks' spread after the barrier;"
        " such a call timed alone takes this plus the kernel's device time (0 = not modelled: the launch instead)",
    )
    direct_max_bytes: float = Field(
        default=0.0,
        ge=0,
        description="all-reduce sizes (bytes) up to which the library runs the direct algorithm on a mesh or"
        " switch instead of choosing by its tuning model (RCCL's MSCCL all-pairs; 0 = never)",
    )
    nvls_reduce_Bps: float = Field(
        default=0.0,
        ge=0,
        description="switch (NVLink SHARP) reduction throughput, input bytes/s of the whole switch (0 = no NVLS)",
    )
    nvls_latency_s: float = Field(
        default=0.0, ge=0, description="latency of an NVLS collective (once per call)"
    )
    nvls_efficiency: float = Field(
        default=1.0,
        ge=1e-4,
        le=1,
        description="fraction of the ring's achievable port rate (link.bandwidth_Bps x link_efficiency) NVLS"
        " traffic reaches (NCCL nvlsEfficiency)",
    )
    nvls_channels: int = Field(default=0, ge=0, description="CUs an NVLS kernel runs on (0 = as channels)")
    nvls_tree_net_latency_s: float | None = Field(
        default=None,
        ge=0,
        description="latency of one level of NCCL's NVLS-Tree between nodes (its hwLatencies[NET][NVLSTree]"
        "[Simple] plus twice the network's latencyInter); unset: no NVLS-Tree across nodes",
    )
    nccl: NcclTuning | None = Field(
        default=None,
        description="NCCL's tuning-model inputs across nodes (its graphs); set: a collective across nodes runs"
        " the algorithm and protocol NCCL's estimate picks (t3.ops.nccl_tuning); unset: the model's fastest",
    )
    nvls_loop_s: float = Field(
        default=0.0,
        ge=0,
        description="fixed cost of one loop of the NVLS kernel (each warp group's flag wait through the switch,"
        " barrier and system fence per chunk): paid for the loops NCCL's smaller chunks add below 1 GiB",
    )
    exclusive_cus: bool = Field(
        default=True,
        description="a communication kernel's thread blocks (one per channel) occupy their CUs alone for the"
        " kernel's whole duration, busy or waiting, so concurrent kernels (a GEMM's waves) lose those CUs"
        " meanwhile; false: its CU work is shared with them in proportion to what each asks",
    )


class Fused(_Strict):
    """Costs of fused GEMM + collective kernels (Flux, PyTorch async-TP), the named implementations of
    :mod:`t3.schedules.ficco` (executor ``ep``, ``-rsum``). The defaults charge nothing extra."""

    store_Bps_per_cu: float | None = Field(
        default=None,
        gt=0,
        description="bytes/s of remote stores one CU drains from a GEMM's epilogue (executor ep): a wave's"
        " CUs stay busy until its tiles' stores to their owners drained (unset = compute.cu_copy_Bps)",
    )
    reduce_hbm_fraction: float = Field(
        default=1.0,
        gt=0,
        le=1,
        description="fraction of hbm.bandwidth_Bps a library sum kernel over N stacked partials reaches"
        " (-rsum; 1 = no limit beyond the memory model)",
    )


class Network(_Strict):
    """Nodes of ``topology.gpus`` GPUs joined by a scale-out network (InfiniBand / RoCE NICs): the
    library's ring collectives across nodes (:mod:`t3.ops.collectives`, NCCL's ring over the nodes
    with rail-aligned channels)."""

    nodes: int = Field(ge=2, description="nodes of topology.gpus GPUs each")
    nics_per_node: int = Field(gt=0, description="scale-out NICs per node (GPUDirect RDMA, one rail each)")
    nic_Bps: float = Field(gt=0, description="bytes/s one NIC moves per direction (its line rate)")
    efficiency: float = Field(
        ge=1e-4, le=1, description="achievable fraction of nic_Bps for the library's transfers"
    )
    rail_optimized: bool = Field(
        default=True,
        description="NIC k of every node on the same leaf switch (rail): a ring's inter-node hop stays on its rail",
    )
    overhead_s: float = Field(
        default=0.0,
        ge=0,
        description="the host's post overhead per network operation (NCCL getNetOverhead: 1 us Intel, 2 us AMD"
        " hosts; three per Simple step): a floor under every ring step across nodes, and the network proxy's"
        " cost of each send and receive it posts (t3.ops.collectives.proxy_steps_s)",
    )

    @model_validator(mode="after")
    def _rails(self) -> Network:
        if not self.rail_optimized:
            raise ValueError(
                "rail_optimized: false is not modelled (a ring hop that leaves its rail crosses the spine)"
            )
        return self


class Power(_Strict):
    """The board's power limit and the energy of a GEMM's work, for GEMMs run back to back long enough
    that the clock is the one the limit allows (``t3.ops.gemm.power_limited_s``). Without this section a
    preset's GEMM clock serves short and sustained runs alike."""

    limit_w: float = Field(gt=0, description="board power limit (W; nvidia-smi power.limit)")
    idle_w: float = Field(ge=0, description="power the GPU draws idle (W): what the work cannot use")
    flop_j: dict[str, float] = Field(
        description="energy of one matrix FLOP (J) per dtype, on random-normal operands (the data sets the"
        " switching: zeros draw 40 % less); a dtype absent here has no sustained rate"
    )
    byte_j: float = Field(ge=0, description="energy of one byte read or written in device memory (J)")


# Physical bounds: a value outside these is not any GPU's (nor any host's the tool models), so it is a
# mistake (a unit slip, a missing exponent) and is refused with the field and the bound before any work;
# generous on purpose, never tight. Path -> (lowest, highest, why). ``.*``: every entry of a table.
_S = "latencies: one operation's fixed cost is under 1 s on any GPU"
# Rates: real memories, links and engines move 1 GB/s to 5 TB/s (the fastest HBM: an H200's 4.8 TB/s);
# the ceiling is 1e30 B/s because a rate far above any hardware's is how an ideal-limit study makes a
# path free (an unlimited HBM or link), and a large rate cannot overflow (times only shrink).
_BPS = "rates run 1 GB/s to 5 TB/s on real hardware; above that only as an unlimited path in an ideal-limit study"
_FREE = 1e30
BOUNDS: dict[str, tuple[float, float, str]] = {
    "compute.cus": (1, 1e4, "the largest GPUs have ~300 SMs/CUs, MI300X 304"),
    "compute.clock_hz": (1e8, 1e10, "GPU and CPU cores clock between 0.1 and 10 GHz"),
    # a GEMM's sustained clock may sit far below clock_hz while `t3 calibrate` searches it (down to 1/1000)
    "compute.gemm_clock_hz.*": (1e6, 1e10, "cores clock under 10 GHz; a sustained clock stays above 1 MHz"),
    "compute.matrix_flops_per_clk_per_cu.*": (1e-3, 1e6, "an H100 SM does 8192 fp8 FLOP/clk"),
    "compute.wg_per_cu": (1, 1024, "an SM/CU holds at most 32-64 resident workgroups"),
    "compute.tile_m": (1, 65536, "GEMM tiles are at most a few hundred rows, a CPU runtime's 2048"),
    "compute.tile_n": (1, 65536, "GEMM tiles are at most a few hundred columns, a CPU runtime's 2048"),
    "compute.l2_bytes": (1024, 1e10, "the largest last-level caches hold 256 MB, MI300X's Infinity Cache"),
    "compute.l2_ways": (1, 1024, "caches are at most a few dozen ways"),
    "compute.l2_line_bytes": (4, 4096, "cache lines are 32-128 B"),
    "compute.l2_Bps": (1e6, _FREE, _BPS),
    "compute.k_step": (1, 65536, "GEMM K stages are 16-128 elements, a CPU runtime's 2048"),
    "compute.k_stages": (1, 64, "GEMM mainloops keep 2-8 stages in flight"),
    "compute.smem_bytes": (1024, 1 << 24, "an SM/CU has at most a few hundred KiB of shared memory / LDS"),
    "compute.smem_epilogue_bytes": (0, 1 << 23, "a kernel keeps at most its shared memory"),
    "compute.multicast": (1, 16, "Hopper clusters hold at most 16 CTAs (8 portable)"),
    "compute.mma_ctas": (1, 2, "tcgen05.mma spans one or two CTAs (cta_group::1 / ::2)"),
    "compute.cluster_ctas": (1, 16, "Hopper clusters hold at most 16 CTAs (8 portable)"),
    "compute.split_k": (1, 64, "GEMM libraries split K into at most a few dozen slices"),
    "compute.cu_copy_Bps": (1e3, _FREE, _BPS),
    "compute.kernel_launch_s": (0, 1, _S),
    "compute.graph_launch_s": (0, 1, _S),
    "compute.stream_wait_s": (0, 1, _S),
    "compute.flag_latency_s": (0, 1, _S),
    "compute.cu_inflight_bytes": (0, 1e9, "one SM/CU keeps at most a few hundred KB in flight"),
    "compute.stream_inflight_bytes": (0, 1e9, "one thread block keeps at most a few hundred KB in flight"),
    "hbm.bandwidth_Bps": (1e3, _FREE, _BPS),
    "hbm.channels": (1, 1e4, "GPUs have at most a few hundred memory channels"),
    "hbm.turnaround": (0, 1e3, "a read/write switch costs at most a few dozen bursts"),
    "hbm.latency_s": (0, 1, _S),
    "hbm.service_s": (0, 1, _S),
    "hbm.queue_entries": (1, 1e6, "memory controllers queue at most a few hundred requests per channel"),
    "hbm.bank_groups": (1, 1024, "DRAM has 4-16 bank groups per channel"),
    "hbm.burst_bytes": (1, 65536, "a DRAM burst moves 32-64 B"),
    "hbm.entry_bytes": (1, 65536, "a memory request moves 32-128 B"),
    "link.bandwidth_Bps": (1e3, _FREE, _BPS),
    "link.latency_s": (0, 1, _S),
    "topology.gpus": (2, 1e5, "tensor-parallel groups span at most thousands of GPUs"),
    "network.nodes": (2, 1e5, "clusters span at most tens of thousands of nodes"),
    "network.nics_per_node": (1, 64, "nodes carry at most a few dozen NICs"),
    "network.nic_Bps": (1e3, _FREE, _BPS),
    "network.overhead_s": (0, 1, _S),
    "dma.engines": (1, 1024, "GPUs have at most a few dozen copy engines"),
    "dma.bandwidth_Bps": (1e3, _FREE, _BPS),
    "dma.command_overhead_s": (0, 1, _S),
    "dma.inflight_bytes": (0, 1e12, "more than any GPU's memory"),
    "dma.staging_bytes": (0, 1e12, "more than any GPU's memory"),
    "dma.host_link_Bps": (0, _FREE, _BPS),
    "nmc.update_busy_s": (0, 1, _S),
    "tracker.entries": (1, 1e9, "T3's tracker has 256 entries"),
    "tracker.granularity_tiles": (1, 1e9, "a tracker entry counts at most a GEMM's tiles"),
    "tracker.wavefront_tiles_per_tile": (1, 1e6, "a macro-tile holds at most a few dozen wavefront tiles"),
    "collective.channels": (0, 1e4, "channels are CUs (at most ~300 per GPU)"),
    "collective.direct_channels": (0, 1e4, "channels are CUs (at most ~300 per GPU)"),
    "collective.nvls_channels": (0, 1e4, "channels are CUs (at most ~300 per GPU)"),
    "collective.direct_max_bytes": (0, 1e15, "more than any GPU's memory"),
    "collective.host_call_s": (0, 1, _S),
    "collective.call_alone_s": (0, 1, _S),
    "collective.p2p_channels": (0, 1e4, "channels are CUs (at most ~300 per GPU)"),
    "collective.p2p_chunk_bytes": (1, 1e9, "a connection's step is KiB to MiB"),
    "collective.p2p_connection_Bps": (0, _FREE, _BPS),
    "collective.nvls_reduce_Bps": (0, _FREE, _BPS),
    "collective.nvls_latency_s": (0, 1, _S),
    "collective.nvls_loop_s": (0, 1, _S),
    "collective.nvls_tree_net_latency_s": (0, 1, _S),
    "collective.nccl.net_latency_s": (0, 1, _S),
    **{
        f"collective.nccl.{a}.channels": (1, 64, "NCCL runs at most 64 channels")
        for a in ("ring", "tree", "nvls_tree")
    },
    **{
        f"collective.nccl.{a}.bw_{w}_Bps": (1e6, 1e12, "a channel carries MB/s to hundreds of GB/s")
        for a in ("ring", "tree", "nvls_tree")
        for w in ("intra", "inter")
    },
    **{f"collective.{p}.tree_step_latency_s": (0, 1, _S) for p in ("simple", "ll128", "ll")},
    **{f"collective.{p}.tree_net_step_latency_s": (0, 1, _S) for p in ("simple", "ll128", "ll")},
    **{f"collective.{p}.chunk_bytes": (1, 1e9, "a chunk is KiB to MiB") for p in ("simple", "ll128", "ll")},
    "collective.simple.base_latency_s": (0, 1, _S),
    "collective.simple.step_latency_s": (0, 1, _S),
    "collective.simple.max_busbw_Bps": (0, _FREE, _BPS),
    "collective.ll128.base_latency_s": (0, 1, _S),
    "collective.ll128.step_latency_s": (0, 1, _S),
    "collective.ll128.max_busbw_Bps": (0, _FREE, _BPS),
    "collective.ll.base_latency_s": (0, 1, _S),
    "collective.ll.step_latency_s": (0, 1, _S),
    "collective.ll.max_busbw_Bps": (0, _FREE, _BPS),
    **{
        f"collective.{p}.threads": (32, 1024, "a thread block has at most 1024 threads")
        for p in ("simple", "ll128", "ll")
    },
    **{
        f"collective.{p}.thread_threshold_bytes": (1, 1 << 20, "the libraries use 8 to 512 bytes per thread")
        for p in ("simple", "ll128", "ll")
    },
    "fused.store_Bps_per_cu": (1e3, _FREE, _BPS),
    "power.limit_w": (1, 1e5, "GPU boards draw 75 W to a few kW"),
    "power.idle_w": (0, 1e4, "GPU boards idle at tens to a few hundred W"),
    "power.flop_j.*": (1e-16, 1e-9, "a matrix FLOP costs about 1e-12 J on today's GPUs"),
    "power.byte_j": (0, 1e-6, "a byte of device memory costs about 1e-10 J"),
}


def _bound_values(hw: BaseModel, path: str) -> list[tuple[str, Any]]:
    """(field path, value) of ``path`` in ``hw`` (``.*``: every entry of the table it names)."""
    node: Any = hw
    parts = path.split(".")
    for p in parts[:-1] if parts[-1] == "*" else parts:
        node = getattr(node, p)
        if node is None:  # an optional section (power) the preset does not have
            return []
    if parts[-1] == "*":
        return [(f"{path[:-2]}.{k}", v) for k, v in (node or {}).items()]
    return [(path, node)]


def _unit(field: str) -> str:
    for suffix, unit in (
        ("_s", " s"),
        ("_Bps", " B/s"),
        ("_hz", " Hz"),
        ("_bytes", " B"),
        ("_w", " W"),
        ("_j", " J"),
    ):
        if field.removesuffix("." + field.split(".")[-1]).endswith(suffix) or field.endswith(suffix):
            return unit
    return ""


def check_bounds(hw: BaseModel) -> None:
    """ValueError naming the first field outside :data:`BOUNDS` (its value, the bound and why)."""
    for path, (lo, hi, why) in BOUNDS.items():
        for field, v in _bound_values(hw, path):
            if v is not None and not lo <= v <= hi:
                u = _unit(field)
                raise ValueError(
                    f"{field}: {v:g}{u} is outside what any GPU could be: must be in [{lo:g}{u}, {hi:g}{u}]"
                    f" ({why})"
                )


def tp_refusal(hw: Hardware, n: int, field: str = "tp") -> str | None:
    """Why ``n`` GPUs cannot form one tensor-parallel group on ``hw`` (one line naming ``field`` and
    ``topology.gpus``), else None. A mesh or switch connects no more than ``topology.gpus`` GPUs. A ring
    above one node spans whole nodes of ``topology.gpus`` GPUs joined by the same links (the T3 paper's
    TP 16 and 32 on its 8-GPU ring), so its TP is at most one node or a multiple of one: 8 GPUs on a
    ring of 3-GPU nodes are no such group."""
    topo = hw.topology
    g = topo.gpus
    if n <= g:
        return None
    net = hw.network
    if net is not None:
        if n % g or n > g * net.nodes:
            return (
                f"{field}: {n} GPUs are not whole nodes of hardware '{hw.name}' ({net.nodes} nodes of"
                f" topology.gpus = {g}: {field} <= {g} or a multiple of {g} up to {g * net.nodes})"
            )
        return None
    if topo.kind in ("mesh", "switch"):
        return (
            f"{field}: {n} GPUs exceed the {topo.kind} of {g} GPUs in hardware '{hw.name}'"
            f" (topology.gpus = {g}: a {topo.kind} connects no more)"
        )
    if n % g:
        return (
            f"{field}: {n} GPUs are not whole nodes of the ring of hardware '{hw.name}' (topology.gpus = {g}):"
            f" a ring above one node spans whole nodes ({field} <= {g} or a multiple of {g}:"
            f" {n // g * g} or {(n // g + 1) * g})"
        )
    return None


class Hardware(_Strict):
    name: str
    description: str = ""
    compute: Compute
    hbm: Hbm
    link: Link
    topology: Topology
    dma: Dma
    nmc: Nmc
    tracker: Tracker = Tracker()
    mca: Mca = Mca()
    collective: Collective = Collective()
    fused: Fused = Fused()
    power: Power | None = None
    network: Network | None = None

    @model_validator(mode="after")
    def _physical(self) -> Hardware:
        if not self.name.strip() or not self.name.isprintable():
            raise ValueError(
                f"name: expected a non-empty name of printable characters (it names the hardware in every"
                f" table and file), got {self.name!r}"
            )
        check_bounds(self)
        net = self.network
        if net is not None:
            if self.topology.kind != "switch":
                raise ValueError(
                    f"network: nodes joined by a network are modelled for switch nodes, not a {self.topology.kind}"
                )
            g = self.topology.gpus
            if g % net.nics_per_node and net.nics_per_node % g:
                raise ValueError(
                    f"network.nics_per_node: {net.nics_per_node} NICs do not divide among topology.gpus = {g} GPUs"
                )
            for name in ("simple", "ll128", "ll"):
                proto = getattr(self.collective, name)
                if proto.enabled and proto.net_step_latency_s is None:
                    raise ValueError(
                        f"collective.{name}.net_step_latency_s: needed with a [network] (NCCL's"
                        " hwLatencies[NET][Ring])"
                    )
        p = self.power
        if p is not None and p.idle_w >= p.limit_w:
            raise ValueError(
                f"power.idle_w: {p.idle_w:g} W is not below power.limit_w ({p.limit_w:g} W): no power is left"
                " for work"
            )
        return self

    def with_overrides(self, overrides: dict[str, Any]) -> Hardware:
        """A new validated Hardware with dotted-path overrides applied (``{"link.bandwidth_Bps": 1e11}``)."""
        return hardware_from_dict(apply_overrides(self.model_dump(), overrides, what="hardware"), self.name)


def apply_overrides(data: dict[str, Any], overrides: dict[str, Any], what: str) -> dict[str, Any]:
    """Apply dotted-path overrides to a nested dict; unknown paths are errors naming the path."""
    out = copy.deepcopy(data)
    for path in overrides:
        if not isinstance(path, str):
            raise ConfigError(f"{what}: override path must be a string, got {describe_value(path)}")
    # a path inside another (``link`` and ``link.bandwidth_Bps``) would be applied in the order given, the
    # later one replacing the earlier silently: refused, naming both
    for path in overrides:
        outer = next((o for o in overrides if path.startswith(o + ".")), None)
        if outer is not None:
            raise ConfigError(f"{what}.{path}: also set by '{outer}', which holds it (give one of them)")
    for path, value in overrides.items():
        node = out
        parts = path.split(".")
        for p in parts[:-1]:
            node = node.get(p) if isinstance(node, dict) else None
            if not isinstance(node, dict):
                raise ConfigError(f"{what}.{path}: unknown field")
        if parts[-1] not in node:
            raise ConfigError(f"{what}.{path}: unknown field")
        node[parts[-1]] = value
    return out


_TYPE_NAMES = {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "a list",
               dict: "a table", type(None): "nothing"}  # fmt: skip


def describe_value(v: Any) -> str:
    """``'80' (a string)``: a value and its type, for messages about wrongly typed input."""
    kind = _TYPE_NAMES.get(type(v), type(v).__name__)
    text = repr(v)
    return f"{text[:40]}{'...' if len(text) > 40 else ''} ({kind})"


def format_validation_error(err: ValidationError, origin: str) -> str:
    """One line naming the first offending field (``origin: link.bandwidth_Bps: must be a finite
    number, got inf (a number)``); shared by every pydantic-validated input (hardware, models)."""
    errs = err.errors()
    # an unknown key first: a misspelled key also leaves the field it meant missing, and the misspelling
    # is the cause
    e = next((x for x in errs if x["type"] == "extra_forbidden"), errs[0])
    loc = ".".join(str(p) for p in e["loc"])
    msg = e["msg"]
    kind = e["type"]
    if kind == "extra_forbidden":
        msg = "unknown field"
    elif kind == "missing":
        msg = "missing field"
    elif kind == "finite_number":
        msg = f"must be a finite number, got {describe_value(e['input'])}"
    elif kind == "value_error":
        msg = str(e["ctx"]["error"]) if "ctx" in e else msg.removeprefix("Value error, ")
        head, sep, rest = msg.partition(": ")
        if sep and " " not in head:  # the validator named a sub-field: fold it into the location
            loc, msg = (f"{loc}.{head}" if loc else head), rest
    elif kind.endswith("_type") or kind.endswith("_parsing") or kind in ("literal_error", "enum"):
        msg = f"{msg}, got {describe_value(e['input'])}"
    extra = f" (+{len(err.errors()) - 1} more)" if len(err.errors()) > 1 else ""
    return f"{origin}: {loc}: {msg}{extra}" if loc else f"{origin}: {msg}{extra}"


def hardware_from_dict(data: dict[str, Any], origin: str) -> Hardware:
    try:
        return Hardware.model_validate(data)
    except ValidationError as err:
        raise ConfigError(format_validation_error(err, f"hardware '{origin}'")) from None


def preset_names() -> list[str]:
    files = resources.files("t3.config").joinpath("presets")
    return sorted(p.name[:-5] for p in files.iterdir() if p.name.endswith(".toml"))


def per_hardware(cache: dict, hw: Hardware, make):
    """``make(hw)``, computed once per hardware object (it is immutable): ``cache`` is keyed by
    identity and keeps the object beside its value, so a reused id never returns another's value."""
    hit = cache.get(id(hw))
    if hit is not None and hit[0] is hw:
        return hit[1]
    if len(cache) > 1000:
        cache.clear()
    value = make(hw)
    cache[id(hw)] = (hw, value)
    return value


def _own_name(hw: Hardware, path: Path) -> Hardware:
    """A hardware file that keeps a built-in preset's ``name`` but changes any value is named after
    the file (``my-gpu (from paper-80cu)``), so no result calls it the preset; an unchanged copy is
    the preset and keeps its name."""
    if hw == load_hardware(hw.name):
        return hw
    label = path.stem if path.stem != hw.name else str(path)
    return hw.model_copy(update={"name": f"{label} (from {hw.name})"})


# presets parsed once per process (a Hardware is frozen: the same object serves every call)
_PRESETS: dict[str, Hardware] = {}


def _preset_text(name: str) -> str:
    if name not in preset_names():
        raise ConfigError(f"hardware: unknown preset '{name}' (available: {', '.join(preset_names())})")
    return resources.files("t3.config").joinpath("presets", f"{name}.toml").read_text()


def _merged(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        out[k] = _merged(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def with_base(data: dict[str, Any], origin: str, seen: tuple[str, ...] = ()) -> dict[str, Any]:
    """A hardware table that names ``base = "PRESET"`` is that preset's tables with its own laid over
    them, table by table (a machine of several nodes of a preset's GPU states only what it adds)."""
    base = data.get("base")
    if base is None:
        return data
    if not isinstance(base, str):
        raise ConfigError(f"{origin}: base: expected a preset name, got {describe_value(base)}")
    if base in seen:
        raise ConfigError(f"{origin}: base: '{base}' names itself through {' -> '.join(seen)}")
    parent = with_base(
        parse_toml(_preset_text(base), f"hardware '{base}'"), f"hardware '{base}'", (*seen, base)
    )
    parent.pop("name", None)
    parent.pop("description", None)
    return _merged(parent, {k: v for k, v in data.items() if k != "base"})


def load_hardware(name_or_path: str | Path, overrides: dict[str, Any] | None = None) -> Hardware:
    """Load a preset by name (``paper-80cu``; parsed once per process) or a user TOML file by path
    (read at every call), then apply overrides."""
    if not isinstance(name_or_path, str | Path):
        raise ConfigError(
            f"hardware: expected a preset name or a TOML file, got {describe_value(name_or_path)}"
        )
    if overrides is not None and not isinstance(overrides, dict):
        raise ConfigError(
            f"hardware overrides: expected a table of dotted paths, got {describe_value(overrides)}"
        )
    s = str(name_or_path)
    path: Path | None = Path(s)
    # a preset's name is the preset, whatever file or folder of that name the working directory holds (a
    # file is named by a path: ./h100-8 or h100-8.toml); the cache makes the common case one lookup
    named = isinstance(name_or_path, str) and (s in _PRESETS or s in preset_names())
    if not named and (s.endswith(".toml") or path.exists()):
        data = with_base(read_toml(path, "hardware"), f"hardware '{s}'")
        data.setdefault("name", path.stem)
    else:
        path = None
        hw = _PRESETS.get(s)
        if hw is None:
            data = with_base(parse_toml(_preset_text(s), f"hardware '{s}'"), f"hardware '{s}'", (s,))
            hw = _PRESETS[s] = hardware_from_dict(data, s)
        return hw.with_overrides(overrides) if overrides else hw
    hw = hardware_from_dict(data, s)
    if path is not None and hw.name in preset_names():
        hw = _own_name(hw, path)
    if overrides:
        hw = hw.with_overrides(overrides)
    return hw
