"""The shipped learned FiCCO selector, written by `benchmarks/fit_ficco_selector.py fit --write`
(depth and leaf size chosen by 5-fold cross-validation on the training data; docs/ficco.md).
"""

# ruff: noqa: E501

SHIPPED_SELECTOR = "pipeline"
DEPTH = 5
MIN_LEAF = 5
FIT = {"cases": 464, "operators": 232, "cv_right": 341, "cv_accuracy_pct": 73.5, "fit_right": 373}
TREE = {
    "feature": "est_overlap_vs_bulk",
    "threshold": 0.9482,
    "le": {
        "feature": "log2_n_tiles",
        "threshold": 3.246,
        "le": {
            "feature": "log2_piece_row_tiles",
            "threshold": 1.522,
            "le": {"family": "estimate", "cases": 9},
            "gt": {
                "feature": "log2_waves",
                "threshold": -0.6705,
                "le": {"family": "ficco-gN-K-cu", "cases": 5},
                "gt": {"family": "ficco-gN-M-cu-s2", "cases": 26},
            },
        },
        "gt": {
            "feature": "est_k_vs_m",
            "threshold": 0.9511,
            "le": {"family": "ficco-gN-K-dma", "cases": 10},
            "gt": {
                "feature": "log2_piece_row_tiles",
                "threshold": 0.4534,
                "le": {
                    "feature": "est_overlap_vs_bulk",
                    "threshold": 0.7881,
                    "le": {"family": "estimate", "cases": 5},
                    "gt": {"family": "ficco-gN-N-cu-s2-rb", "cases": 23},
                },
                "gt": {
                    "feature": "est_k_vs_m",
                    "threshold": 0.9582,
                    "le": {"family": "ficco-gN-M-cu-s2", "cases": 5},
                    "gt": {"family": "estimate", "cases": 189},
                },
            },
        },
    },
    "gt": {
        "feature": "log2_piece_row_tiles",
        "threshold": 1.904,
        "le": {
            "feature": "log2_waves",
            "threshold": 2.652,
            "le": {
                "feature": "log2_piece_row_tiles",
                "threshold": 1.522,
                "le": {
                    "feature": "log2_msg_over_dma",
                    "threshold": 0.2801,
                    "le": {"family": "bulk-g1-M-cu", "cases": 126},
                    "gt": {"family": "ficco-gN-K-cu", "cases": 13},
                },
                "gt": {"family": "estimate", "cases": 5},
            },
            "gt": {"family": "ficco-gN-N-cu-s2-rb", "cases": 26},
        },
        "gt": {
            "feature": "est_shard_vs_ficco",
            "threshold": 1.031,
            "le": {
                "feature": "is_ag",
                "threshold": 0.5,
                "le": {
                    "feature": "log2_msg_over_dma",
                    "threshold": 1.175,
                    "le": {"family": "estimate", "cases": 5},
                    "gt": {"family": "ficco-gN-N-cu-s2-rb", "cases": 7},
                },
                "gt": {"family": "estimate", "cases": 5},
            },
            "gt": {"family": "bulk-g1-M-cu", "cases": 5},
        },
    },
}
