"""What a run measures: the grids of shapes, sizes and thread-block counts, and the iteration counts.

Three plans: the default GPU run (sized for one to two minutes of measuring on an H100, an estimate
made from the grid; it must stay inside 6 minutes), ``--quick`` (a subset) and the CPU plumbing run
(tiny sizes, for tests). A thread-block count of ``ALL`` means one block per CU/SM of the GPU.
"""

from __future__ import annotations

from dataclasses import dataclass

MiB = 1 << 20
ALL = -1  # one thread block per CU / SM


def _pieces(
    m: int, n: int, k: int, what: str, splits: tuple[int, ...]
) -> list[tuple[int, int, int, str, str]]:
    """The thin GEMMs a FiCCO / async-TP decomposition of (m, n, k) makes: 1/s of M, N or K."""
    out = []
    for s in splits:
        dims = {"M": (m // s, n, k), "N": (m, n // s, k), "K": (m, n, k // s)}[what]
        out.append((*dims, "bf16", f"{what}/{s} piece of {m}x{n}x{k}"))
    return out


@dataclass(frozen=True)
class Plan:
    name: str
    # GEMM grid: (m, n, k, dtype, why it is in the grid)
    gemms: tuple[tuple[int, int, int, str, str], ...]
    gemm_iters: int
    gemm_warmup: int
    rotate_l2_multiple: float  # rotating buffer sets cover at least this many L2s
    rotate_min_bytes: int
    # HBM streams
    hbm_bytes: int  # one array of the read / write / copy / triad streams
    hbm_iters: int
    block_copy_bytes: int  # the source of the copy on k blocks
    block_counts: tuple[int, ...]
    # latencies
    launch_kernels: int  # kernels per chain
    wait_hops: int  # stream-to-stream hops per ping-pong chain
    flag_rounds: tuple[int, int]  # two chain lengths: their difference cancels the fixed part
    latency_reps: int
    # interference: victim GEMMs, interferer sizes and block counts
    victims: tuple[tuple[int, int, int, str], ...]
    intf_bytes: tuple[int, ...]
    copy_blocks: tuple[int, ...]
    reduce_blocks: tuple[int, ...]  # 0 = torch.add on every SM (its own grid)
    ce_kinds: tuple[str, ...]  # d2d, d2h, h2d
    together: tuple[
        tuple[str, int], ...
    ]  # (comm, blocks) also measured launched together, at the largest size
    together_leads_s: tuple[float, ...]  # and again each launched first, the other this long behind it
    victim_span_s: float  # the victim's timed span in a background measurement (at least)
    intf_reps: int
    intf_iters: int  # interferer calls timed alone


_SQUARES = [(s, s, s, "bf16", "square") for s in (2048, 4096, 6144, 8192, 12288)]
_FICCO = (
    _pieces(8192, 8192, 8192, "M", (8, 16, 32, 64))
    + _pieces(8192, 8192, 8192, "N", (8, 32))
    + _pieces(8192, 8192, 8192, "K", (8, 32))
    + _pieces(4096, 7168, 8192, "M", (8, 16, 32, 64))
    + _pieces(4096, 7168, 8192, "N", (8,))
    + _pieces(4096, 7168, 8192, "K", (8,))
)
_SMALL_K = [(4096, 4096, 256, "bf16", "small K"), (8192, 8192, 512, "bf16", "small K")]
_FP16 = [(4096, 4096, 4096, "fp16", "square"), (8192, 8192, 8192, "fp16", "square"),
         (1024, 8192, 8192, "fp16", "M/8 piece of 8192x8192x8192")]  # fmt: skip
_FP8 = [(4096, 4096, 4096, "fp8", "square"), (8192, 8192, 8192, "fp8", "square"),
        (1024, 8192, 8192, "fp8", "M/8 piece of 8192x8192x8192"),
        (8192, 8192, 1024, "fp8", "K/8 piece of 8192x8192x8192")]  # fmt: skip

_TF32 = [(4096, 4096, 4096, "tf32", "square"), (8192, 8192, 8192, "tf32", "square")]
# few output tiles of long K, on both sides of where the library may split K (t3.ops.gemm._splits: the
# tiles leave more than half the SMs idle); the kernel names and grids come from
# benchmarks/device_kernel_facts.py
_FEW_TILES = [(16, 4096, 4096, "bf16", "decode"), (32, 1024, 7168, "bf16", "few tiles, long K"),
              (64, 1024, 16384, "bf16", "few tiles, long K"), (128, 1024, 8192, "bf16", "few tiles, long K"),
              (256, 2048, 8192, "bf16", "few tiles, long K")]  # fmt: skip

# the pieces PyTorch's async-TP multiplies in the published runs whose overlap the model misses most
# (docs/validation.md, "Overlap"): the all-gather's per-shard pieces (meta-pytorch/kraken#2: M / 8 = 128
# and 256 rows of N = 6656, K = 4096-16384) and the reduce-scatter's per-destination partials
# (meta-pytorch/kraken#19: M / 8 = 64-256 rows of N = 4096, K = 14336). Alone on one GPU they say whether
# a piece takes the time the model gives it or the time those runs spend per step (the pipeline's part)
_ASYNC_TP = [
    (m, 6656, k, "bf16", f"async-TP all-gather piece (kraken#2, M = {8 * m})")
    for m in (128, 256)
    for k in (4096, 8192, 16384)
] + [
    (m, 4096, 14336, "bf16", f"async-TP reduce-scatter partial (kraken#19, M = {8 * m})")
    for m in (64, 128, 256)
]

# the shapes behind the largest H100 GEMM errors of the validation rows (docs/validation.md, "GEMMs"): the
# small cubes that waynehacking8's host-timed loops ran (is the device's time per call the model's, the host
# adding the rest?), and the best FP8 shape of mamf-finder's search, 2.2 waves of 256x128 tiles (does the
# library run it in whole waves or reach the full-wave rate; its kernel in device_kernel_facts.py)
_H100_MISSES = [(512, 512, 512, "fp16", "small cube"), (1024, 1024, 1024, "fp16", "small cube"),
                (1024, 9216, 14336, "bf16", "mamf-finder's best FP8 shape"),
                (1024, 9216, 14336, "fp8", "mamf-finder's best FP8 shape")]  # fmt: skip

GPU = Plan(
    name="default",
    gemms=tuple(_SQUARES + _FICCO + _SMALL_K + _FP16 + _FP8 + _TF32 + _FEW_TILES + _ASYNC_TP + _H100_MISSES),
    gemm_iters=30,
    gemm_warmup=5,
    rotate_l2_multiple=4.0,
    rotate_min_bytes=256 * MiB,
    hbm_bytes=1024 * MiB,
    hbm_iters=20,
    block_copy_bytes=256 * MiB,
    block_counts=(1, 2, 4, 8, 16, 32, 66, ALL),
    launch_kernels=200,
    wait_hops=64,
    flag_rounds=(128, 1152),
    latency_reps=15,
    victims=(
        (8192, 8192, 8192, "bf16"),
        (1024, 7168, 8192, "bf16"),
        (4096, 7168, 8192, "bf16"),
        (512, 8192, 8192, "bf16"),
    ),
    intf_bytes=(16 * MiB, 256 * MiB),
    copy_blocks=(4, 8, 16, 32, 66, ALL),
    reduce_blocks=(0, 16, 66),
    ce_kinds=("d2d", "d2h", "h2d"),
    together=(("sm_copy", 32), ("sm_copy", ALL), ("sm_reduce", 0), ("memcpy", 0)),
    together_leads_s=(20e-6,),
    victim_span_s=8e-3,
    intf_reps=3,
    intf_iters=10,
)

QUICK = Plan(
    name="quick",
    gemms=(
        (4096, 4096, 4096, "bf16", "square"),
        (8192, 8192, 8192, "bf16", "square"),
        (1024, 8192, 8192, "bf16", "M/8 piece of 8192x8192x8192"),
        (128, 8192, 8192, "bf16", "M/64 piece of 8192x8192x8192"),
        (512, 7168, 8192, "bf16", "M/8 piece of 4096x7168x8192"),
        (8192, 8192, 1024, "bf16", "K/8 piece of 8192x8192x8192"),
        (8192, 8192, 8192, "fp16", "square"),
        (8192, 8192, 8192, "fp8", "square"),
    ),  # fmt: skip
    gemm_iters=15,
    gemm_warmup=3,
    rotate_l2_multiple=4.0,
    rotate_min_bytes=256 * MiB,
    hbm_bytes=512 * MiB,
    hbm_iters=10,
    block_copy_bytes=128 * MiB,
    block_counts=(1, 4, 16, ALL),
    launch_kernels=200,
    wait_hops=64,
    flag_rounds=(128, 1152),
    latency_reps=7,
    victims=((8192, 8192, 8192, "bf16"),),
    intf_bytes=(256 * MiB,),
    copy_blocks=(8, 32, ALL),
    reduce_blocks=(0, 32),
    ce_kinds=("d2d", "h2d"),
    together=(("sm_copy", ALL), ("memcpy", 0)),
    together_leads_s=(20e-6,),
    victim_span_s=5e-3,
    intf_reps=2,
    intf_iters=6,
)

CPU = Plan(
    name="cpu",
    gemms=(
        (128, 128, 128, "bf16", "square"),
        (256, 256, 256, "bf16", "square"),
        (32, 256, 256, "bf16", "M/8 piece of 256x256x256"),
        (256, 32, 256, "bf16", "N/8 piece of 256x256x256"),
        (256, 256, 32, "bf16", "K/8 piece of 256x256x256"),
        (128, 128, 128, "fp16", "square"),
        (128, 128, 128, "tf32", "square"),
        (128, 128, 128, "fp8", "square"),
    ),  # fmt: skip
    gemm_iters=5,
    gemm_warmup=1,
    rotate_l2_multiple=2.0,
    rotate_min_bytes=1 * MiB,
    hbm_bytes=2 * MiB,
    hbm_iters=5,
    block_copy_bytes=1 * MiB,
    block_counts=(1, 2, ALL),
    launch_kernels=20,
    wait_hops=8,
    flag_rounds=(8, 24),
    latency_reps=3,
    victims=((128, 128, 128, "bf16"),),
    intf_bytes=(1 * MiB,),
    copy_blocks=(2, ALL),
    reduce_blocks=(0, 2),
    ce_kinds=("d2d", "h2d"),
    together=(("sm_copy", ALL),),
    together_leads_s=(20e-6,),
    victim_span_s=2e-3,
    intf_reps=2,
    intf_iters=3,
)


def plan_for(kind: str, quick: bool) -> Plan:
    """The plan for a backend kind (``cpu`` or a GPU) and ``--quick``."""
    if kind == "cpu":
        return CPU
    return QUICK if quick else GPU
