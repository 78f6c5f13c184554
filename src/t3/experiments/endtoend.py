"""End-to-end projection (Amdahl) from simulated sublayer times to a Transformer layer's time.

The T3 paper projected its sublayer speedups onto measured whole-model time breakdowns from an
MLPerf-BERT-derived implementation in which *non-sliced attention* (scores, softmax, context) takes
40-45 % of the time. Those breakdowns were not published, so the layer time here is built from
stated assumptions (every one a named value below):

1. A layer's time on one GPU of the TP group = the four sliced sublayers (GEMM + all-reduce,
   simulated: op and fc2 forward, fc1-bwd and ip-bwd backward) + the *other* TP GEMMs of the layer
   (no collective after them; simulated alone on the same hardware) + non-sliced attention.
2. Non-sliced attention is ``attention_share`` of the layer's *baseline* time (paper: 40-45 %; we use
   the midpoint 0.425 and report the ends as a range). Elementwise work (layer norms, GeLU, dropout,
   residuals) is folded into that share.
3. Training = forward + backward. Forward GEMMs: QKV (M=T, N=qkv/t, K=H), op (sliced), FC-1
   (M=T, N=fc1/t, K=H), FC-2 (sliced). Backward: data gradients of op (M=T, N=H/t, K=H) and FC-2
   (M=T, N=ffn/t, K=H) plus the sliced fc1-bwd and ip-bwd; weight gradients of all four
   (QKV: M=H, N=qkv/t, K=T; op: M=H/t, N=H, K=T; FC-1: M=H, N=fc1/t, K=T; FC-2: M=ffn/t, N=H, K=T).
   Prompt-phase inference = the forward pass only (its sliced sublayers: op and fc2).
4. Every layer is identical, so the layer's speedup is the model's (embeddings, the loss and the
   optimizer step are left out).

Amdahl: ``T_layer(cfg) = T_layer(seq) - sum_i (T_seq,i - T_cfg,i)`` over the phase's sliced
sublayers, speedup ``= T_layer(seq) / T_layer(cfg) - 1``. The projection also reports the share of
the baseline layer time that is exposed communication, to compare with the paper's "up to 34 %
(training) / 43 % (prompt inference)".
"""

from __future__ import annotations

from dataclasses import dataclass

from t3.workload.models import ModelSpec
from t3.workload.sublayers import GemmShape

ATTENTION_SHARE = 0.425  # midpoint of the paper's "non-sliced attention is 40-45% of time"
ATTENTION_SHARE_RANGE = (0.40, 0.45)

PHASE_SUBLAYERS = {"training": ("op", "fc2", "fc1-bwd", "ip-bwd"), "prompt_inference": ("op", "fc2")}


def other_gemms(model: ModelSpec, tp: int, tokens: int, phase: str) -> dict[str, GemmShape]:
    """The layer's TP GEMMs that have no collective after them (assumption 3), per GPU."""
    t, h, dt = tokens, model.hidden, model.dtype
    qkv, fc1, ffn = model.qkv_width // tp, model.fc1_width // tp, model.ffn // tp
    out = {
        "qkv-fwd": GemmShape(t, qkv, h, dt),
        "fc1-fwd": GemmShape(t, fc1, h, dt),
    }
    if phase == "training":
        out.update(
            {
                "op-dgrad": GemmShape(t, h // tp, h, dt),
                "fc2-dgrad": GemmShape(t, ffn, h, dt),
                "qkv-wgrad": GemmShape(h, qkv, t, dt),
                "op-wgrad": GemmShape(h // tp, h, t, dt),
                "fc1-wgrad": GemmShape(h, fc1, t, dt),
                "fc2-wgrad": GemmShape(ffn, h, t, dt),
            }
        )
    return out


@dataclass(frozen=True)
class Projection:
    layer_seq_s: float  # baseline layer time
    layer_cfg_s: float
    speedup: float  # fraction
    comm_share: float  # exposed communication of the baseline / baseline layer time
    sliced_s: float  # baseline time of the sliced sublayers
    other_gemm_s: float
    attention_s: float


def project(
    seq: dict[str, float],
    cfg: dict[str, float],
    seq_gemm: dict[str, float],
    other_gemm_s: float,
    attention_share: float = ATTENTION_SHARE,
) -> Projection:
    """Amdahl projection for one model/phase. ``seq``/``cfg``: sliced sublayer -> time (s) under the
    baseline and the configuration; ``seq_gemm``: sublayer -> its GEMM time in the baseline."""
    if not 0 <= attention_share < 1:
        raise ValueError(f"attention_share: must be in [0, 1), got {attention_share}")
    sliced = sum(seq.values())
    base = (sliced + other_gemm_s) / (1.0 - attention_share)
    saved = sum(seq[k] - cfg[k] for k in seq)
    new = base - saved
    comm = sum(seq[k] - seq_gemm[k] for k in seq)
    return Projection(
        layer_seq_s=base,
        layer_cfg_s=new,
        speedup=base / new - 1.0,
        comm_share=comm / base,
        sliced_s=sliced,
        other_gemm_s=other_gemm_s,
        attention_s=base * attention_share,
    )
