"""The shipped learned FiCCO selector, written by `benchmarks/fit_ficco_selector.py fit --write`
(depth and leaf size chosen by 5-fold cross-validation on the training data; docs/ficco.md).
"""

# ruff: noqa: E501

SHIPPED_SELECTOR = "pipeline"
DEPTH = 6
MIN_LEAF = 5
FIT = {"cases": 464, "operators": 232, "cv_right": 341, "cv_accuracy_pct": 73.5, "fit_right": 401}
TREE = {
    "feature": "est_overlap_vs_bulk",
    "threshold": 1.051,
    "le": {
        "feature": "est_rb_vs_inc",
        "threshold": 0.9958,
        "le": {
            "feature": "log2_comm_ratio",
            "threshold": -0.1655,
            "le": {
                "feature": "log2_msg_over_dma",
                "threshold": -0.9623,
                "le": {"family": "ficco-gN-N-cu-s2-rb", "cases": 9},
                "gt": {
                    "feature": "log2_waves",
                    "threshold": 0.2055,
                    "le": {"family": "ficco-gN-N-cu-s2-rb", "cases": 6},
                    "gt": {
                        "feature": "log2_comm_ratio",
                        "threshold": -2.639,
                        "le": {"family": "ficco-g2N-N-cu-s2-rb", "cases": 8},
                        "gt": {"family": "ficco-g2N-N-dma-s2-rb", "cases": 67},
                    },
                },
            },
            "gt": {
                "feature": "est_dma_vs_cu",
                "threshold": 1.064,
                "le": {
                    "feature": "log2_comm_ratio",
                    "threshold": 0.6235,
                    "le": {"family": "ficco-g2N-N-cu-s2-rb", "cases": 9},
                    "gt": {"family": "ficco-g4N-N-cu-s2-rb", "cases": 7},
                },
                "gt": {
                    "feature": "est_overlap_vs_bulk",
                    "threshold": 0.8966,
                    "le": {
                        "feature": "est_overlap_vs_bulk",
                        "threshold": 0.7293,
                        "le": {"family": "ficco-g2N-N-dma-s2-rb", "cases": 5},
                        "gt": {"family": "ficco-gN-N-cu-rb", "cases": 9},
                    },
                    "gt": {"family": "estimate", "cases": 5},
                },
            },
        },
        "gt": {
            "feature": "log2_waves",
            "threshold": -0.865,
            "le": {
                "feature": "est_k_vs_m",
                "threshold": 1.257,
                "le": {"family": "ficco-gN-K-cu", "cases": 20},
                "gt": {
                    "feature": "log2_waves",
                    "threshold": -1.806,
                    "le": {"family": "bulk-g1-M-dma", "cases": 7},
                    "gt": {"family": "ficco-gN-M-cu-s2", "cases": 6},
                },
            },
            "gt": {
                "feature": "log2_piece_row_tiles",
                "threshold": 3.768,
                "le": {
                    "feature": "est_k_vs_m",
                    "threshold": 0.8721,
                    "le": {
                        "feature": "est_overlap_vs_bulk",
                        "threshold": 0.9642,
                        "le": {"family": "ficco-gN-K-dma", "cases": 6},
                        "gt": {"family": "bulk-g1-M-dma", "cases": 5},
                    },
                    "gt": {
                        "feature": "log2_k_tiles",
                        "threshold": 6.113,
                        "le": {"family": "estimate", "cases": 140},
                        "gt": {"family": "ficco-gN-M-dma-s2", "cases": 19},
                    },
                },
                "gt": {"family": "ficco-gN-M-dma-s2", "cases": 26},
            },
        },
    },
    "gt": {
        "feature": "est_dma_vs_cu",
        "threshold": 0.9547,
        "le": {
            "feature": "log2_waves",
            "threshold": 4.154,
            "le": {"family": "ficco-g2N-N-dma-s2-rb", "cases": 5},
            "gt": {"family": "bulk-g1-M-dma", "cases": 6},
        },
        "gt": {
            "feature": "log2_msg_over_dma",
            "threshold": -0.3532,
            "le": {
                "feature": "log2_piece_row_tiles",
                "threshold": 0.9037,
                "le": {
                    "feature": "log2_n_tiles",
                    "threshold": 6.904,
                    "le": {"family": "bulk-g1-M-dma", "cases": 81},
                    "gt": {"family": "ficco-gN-N-cu-s2-rb", "cases": 5},
                },
                "gt": {"family": "shard-gN-M-cu-s2", "cases": 5},
            },
            "gt": {"family": "ficco-gN-N-cu-rb", "cases": 8},
        },
    },
}
