"""NCCL's own tuning model: how the library picks an algorithm and protocol for a collective across nodes.

NCCL does not run the algorithm that is fastest on the machine: it runs the one its tuning model predicts
fastest (``src/graph/tuning.cc``: ``ncclTopoTuneModel`` fills a bandwidth and a latency per collective,
algorithm and protocol from the graphs its topology search found; ``ncclTopoGetAlgoTime`` gives
``latency + bytes / bandwidth`` with its correction factors; ``src/enqueue.cc`` takes the least). Across
nodes the two differ most: NCCL's tree with LL128 is the model's fastest at mid sizes, NCCL's estimate of
NVLS-Tree wins from a few MiB, and the measurements sit on the times of what NCCL chose
(``benchmarks/multinode_candidates.py``). :func:`t3.ops.collectives.choose` therefore takes NCCL's
estimate to choose across nodes, where a preset gives the graphs (``collective.nccl``), and the model's
own time of the chosen algorithm as the prediction.

The constants below are NCCL 2.30.7's (``ncclTunerConstantsDefaults``, ``nvlsEfficiency`` and
``treeCorrectionFactor`` in ``src/graph/tuning.cc`` of NVIDIA/nccl at the 2.30.7 release); older
releases differ in a few of them. Microseconds and GB/s, as NCCL keeps them. The inputs that are the
machine's (the graphs: channels and per-channel bandwidths inside a node and across nodes) come from the
preset (:class:`t3.config.hardware.NcclTuning`), each with its source.
"""

from __future__ import annotations

from t3.config.hardware import Hardware, NcclGraph

OPS = ("all_reduce", "all_gather", "reduce_scatter")  # the collectives NCCL's tuning model chooses for
LL, LL128, SIMPLE = 0, 1, 2
PROTOCOLS = {"ll": LL, "ll128": LL128, "simple": SIMPLE}
ARCHS = {"hopper": 0, "blackwell": 1}

# ncclTunerConstantsDefaults (us), [protocol] = (LL, LL128, Simple)
BASE_LATENCY = {"tree": (6.8, 14.0, 8.4), "ring": (6.6, 14.0, 8.4), "nvls-tree": (0.0, 0.0, 0.0)}
HW_LATENCY_NVLINK = {"tree": (0.6, 1.25, 4.0), "ring": (0.6, 1.9, 3.4), "nvls-tree": (0.0, 0.0, 25.0)}
HW_LATENCY_NET = {"tree": (5.0, 8.5, 14.0), "ring": (2.7, 4.0, 14.0), "nvls-tree": (0.0, 0.0, 20.9)}
# llMaxBws across nodes: [host CPU: Intel, AMD][2 nodes, more nodes] (GB/s)
LL_MAX_BW = {"intel": (39.0, 20.4), "amd": (22.5, 19.0), "arm": (39.0, 20.4)}
# per channel caps [arch][2 nodes, more nodes] (GB/s)
PER_CH_MAX_TREE_BW = ((41.4, 36.0), (42.8, 24.0))
PER_CH_MAX_RING_LL128_BW = (36.7, 40.0)
PER_CH_MAX_TREE_LL128_BW = ((36.7, 29.0), (31.67, 20.0))
PER_CH_MAX_NVLS_TREE_BW = ((57.7, 45.5), (96.0, 80.0))
NVLS_EFFICIENCY = (0.85, 0.74)
# treeCorrectionFactor[protocol][log2(bytes / 64)], 64 B to 256 MiB: "Trees are not perfectly sticking to the
# model for medium sizes"
TREE_CORRECTION = (
    (1.0, 1.0, 1.0, 1.0, 0.9, 0.8, 0.7, 0.7, 0.7, 0.7, 0.6, 0.5, 0.4, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.0, 1.0, 1.0, 1.0),
    (1.0, 1.0, 1.0, 1.0, 1.0, 0.9, 0.8, 0.8, 0.8, 0.7, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6, 0.8, 0.9, 0.9, 0.9, 0.9, 1.0, 1.0, 1.0),
    (0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.8, 0.7, 0.6, 0.6, 0.5, 0.5, 0.5, 0.5, 0.6, 0.7, 0.8, 0.7, 0.7, 0.8, 0.9, 0.9, 0.9),
)  # fmt: skip


def log2i(x: int) -> int:
    """NCCL's log2i: floor(log2(x)) for x > 0, -1 for 0."""
    return x.bit_length() - 1


def bandwidth_latency(
    op: str, algo: str, proto: str, nodes: int, ppn: int, hw: Hardware
) -> tuple[float, float]:
    """NCCL's bandwidth (GB/s of the buffer, ``comm->bandwidths``) and latency (us) of ``op`` with ``algo``
    (``ring``, ``tree``, ``nvls-tree``) and ``proto`` on ``nodes`` nodes of ``ppn`` GPUs each: ncclTopoTuneModel
    (``src/graph/tuning.cc``) on the preset's graphs. 0 bandwidth: NCCL would not run it."""
    t = hw.collective.nccl
    assert t is not None and nodes >= 2
    p = PROTOCOLS[proto]
    arch = ARCHS[t.arch]
    ranks = nodes * ppn
    nsteps = 2 * (ranks - 1) if op == "all_reduce" else ranks - 1
    two = 0 if nodes <= 2 else 1
    g: NcclGraph | None = {"ring": t.ring, "tree": t.tree, "nvls-tree": t.nvls_tree}.get(algo)
    if (
        g is None
        or op not in OPS
        or (algo != "ring" and op != "all_reduce")
        or (algo == "nvls-tree" and p != SIMPLE)
    ):
        return 0.0, 0.0
    ll_max = LL_MAX_BW[t.cpu][two]
    bw = (g.bw_intra_Bps if nodes <= 2 else g.bw_inter_Bps) / 1e9
    if algo == "nvls-tree":
        if g.channels < 2:
            return 0.0, 0.0
        intra = g.bw_intra_Bps / 1e9 * NVLS_EFFICIENCY[arch] * (g.channels - 1) / g.channels * 2.0
        inter = g.bw_inter_Bps / 1e9 * (2.0 if nodes <= 2 else 1.0)
        bw = min(intra, inter, PER_CH_MAX_NVLS_TREE_BW[arch][two])
    bus = g.channels * bw
    if algo == "ring" and p == LL:
        bus = min(ll_max, bus * 0.5)
    if algo == "ring" and p == LL128:
        bus = min(bus * 0.92, g.channels * PER_CH_MAX_RING_LL128_BW[arch])
    if algo == "tree":
        bus = min(bus * 0.92, g.channels * PER_CH_MAX_TREE_BW[arch][two])
        if p == LL:
            bus = min(bus / 3.8, ll_max)
        if p == LL128:
            bus = min(bus * 120.0 / 128.0, g.channels * PER_CH_MAX_TREE_LL128_BW[arch][two])
    bus *= ranks / nsteps if algo in ("ring", "nvls-tree") else 0.5
    intra_lat = HW_LATENCY_NVLINK[algo][p]
    # with one GPU per node every latency is exposed: NCCL takes the tree's network latency
    inter_lat = HW_LATENCY_NET["tree" if ppn == 1 else algo][p] + t.net_latency_s * 1e6 * (
        2 if p == SIMPLE else 1
    )
    lat = BASE_LATENCY[algo][p]
    if algo == "ring":
        # getNetOverhead: the preset's network.overhead_s (as NCCL_NET_OVERHEAD sets it), three per Simple step
        overhead = hw.network.overhead_s * 1e6 * (3 if p == SIMPLE else 1)
        intra_lat = max(intra_lat, overhead)
        inter_steps = 2 * (nodes - 1) if op == "all_reduce" else nodes - 1
        lat += (nsteps - inter_steps) * intra_lat + inter_steps * inter_lat
    elif algo == "tree":
        lat += 2 * ((ppn - 1) * intra_lat + log2i(nodes) * inter_lat)
    else:
        lat = intra_lat + 2 * log2i(nodes) * inter_lat
    return bus, lat


def time_us(op: str, algo: str, proto: str, nbytes: float, nodes: int, ppn: int, hw: Hardware) -> float:
    """NCCL's estimate (us) of one call (``ncclTopoGetAlgoTime``, one operation): latency + bytes /
    bandwidth, the tree's bandwidth times its correction factor for the size, the ring's Simple latency
    x 1.4 across nodes once each rank's share of a channel holds 64 bytes (its "plateau"). inf: NCCL
    would not run it."""
    bw, lat = bandwidth_latency(op, algo, proto, nodes, ppn, hw)
    if bw <= 0:
        return float("inf")
    p = PROTOCOLS[proto]
    size = int(nbytes)
    ls = log2i(size >> 6)
    if algo == "tree" and op == "all_reduce" and 0 <= ls < 23:
        bw *= TREE_CORRECTION[p][ls]
    channels = hw.collective.nccl.ring.channels  # comm->nChannels (set: bandwidth_latency ran on it)
    if algo == "ring" and p == SIMPLE and op == "all_reduce" and size / (channels * nodes * ppn) >= 64:
        lat *= 1.4
    return lat + size / (1000.0 * bw)
