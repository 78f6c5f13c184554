"""The T3 paper's published numbers (ASPLOS 2024, arXiv 2401.16677), as data with their source.

Only numbers that were published are here; everything the paper did not publish is a calibrated
parameter (``docs/calibration.md``). Speedups are fractions over Sequential (0.30 = 30 %); data
movement reductions are fractions of Sequential's DRAM bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

REF = "T3 paper (Pati et al., ASPLOS 2024, arXiv 2401.16677)"
ABSTRACT = "T3 paper abstract (arXiv 2401.16677)"


@dataclass(frozen=True)
class Published:
    value: float
    source: str
    role: str = "result"  # "target" = used for calibration; "result" = compared only; "context"


# Keys follow the JSON summary: "<section>.<field>".
PUBLISHED: dict[str, Published] = {
    "ideal_gemm_rs_overlap.geomean_speedup": Published(
        0.35, f"{REF}, evaluation: sublayer speedup over Sequential", "target"
    ),
    "ideal_gemm_rs_overlap.max_speedup": Published(
        0.50, f"{REF}, evaluation: sublayer speedup over Sequential", "target"
    ),
    "t3_mca.geomean_speedup": Published(
        0.30, f"{REF}, evaluation: sublayer speedup over Sequential; {ABSTRACT}", "target"
    ),
    "t3_mca.max_speedup": Published(
        0.47, f"{REF}, evaluation: sublayer speedup over Sequential; {ABSTRACT}", "target"
    ),
    "large_models_t3_mca.geomean_speedup": Published(
        0.29, f"{ABSTRACT}: 'geomean 29% for sublayers in ~500-billion parameter models, PaLM and MT-NLG'"
    ),
    "data_movement_reduction.geomean": Published(0.22, f"{ABSTRACT}: 'reduces data movement by 22% geomean'"),
    "data_movement_reduction.max": Published(0.36, f"{ABSTRACT}: '(max 36%)'"),
}

# Statements used to set up the end-to-end projection (not compared as results).
CONTEXT = {
    "comm_share_training_max": Published(
        0.34, f"{REF}: communication up to 34% of training runtime (Mega-GPT-2, T-NLG)", "context"
    ),
    "comm_share_prompt_max": Published(
        0.43, f"{REF}: communication up to 43% of prompt-inference runtime (Mega-GPT-2, T-NLG)", "context"
    ),
    "comm_share_large_training_max": Published(
        0.46, f"{REF}: up to 46% (training) for PaLM, MT-NLG and future models", "context"
    ),
    "comm_share_large_prompt_max": Published(
        0.44, f"{REF}: up to 44% (prompt inference) for PaLM, MT-NLG and future models", "context"
    ),
    "attention_share_low": Published(
        0.40, f"{REF}: non-sliced attention is 40-45% of time in the paper's implementation", "context"
    ),
    "attention_share_high": Published(0.45, f"{REF}: (same statement, upper end)", "context"),
}


def published(key: str) -> float | None:
    p = PUBLISHED.get(key)
    return None if p is None else p.value
