"""The shipped learned FiCCO selector, written by `benchmarks/fit_ficco_selector.py fit --write`
(depth and leaf size chosen by 5-fold cross-validation on the training data; docs/ficco.md).
"""

# ruff: noqa: E501

SHIPPED_SELECTOR = "pipeline"
DEPTH = 5
MIN_LEAF = 5
FIT = {"cases": 464, "operators": 232, "cv_right": 320, "cv_accuracy_pct": 69.0, "fit_right": 357}
TREE = {"feature": "est_overlap_vs_bulk", "threshold": 0.96, "le": {"feature": "est_rb_vs_inc", "threshold": 0.4969, "le": {"feature": "est_dma_vs_cu", "threshold": 1.022, "le": {"family": "ficco-g2N-N-dma-rb", "cases": 5}, "gt": {"family": "ficco-g2N-N-cu-s2-rb", "cases": 14}}, "gt": {"feature": "est_k_vs_m", "threshold": 0.9688, "le": {"feature": "log2_msg_over_dma", "threshold": 2.82, "le": {"feature": "est_dma_vs_cu", "threshold": 0.9975, "le": {"family": "ficco-gN-K-dma", "cases": 5}, "gt": {"family": "ficco-gN-K-cu", "cases": 9}}, "gt": {"family": "ficco-g2N-M-dma-s2", "cases": 7}}, "gt": {"feature": "log2_n_tiles", "threshold": 2.453, "le": {"feature": "log2_piece_row_tiles", "threshold": 2.446, "le": {"family": "ficco-gN-K-cu", "cases": 9}, "gt": {"family": "ficco-g2N-M-cu-s2", "cases": 5}}, "gt": {"feature": "log2_msg_over_dma", "threshold": -1.648, "le": {"family": "bulk-g1-M-dma", "cases": 7}, "gt": {"family": "estimate", "cases": 229}}}}}, "gt": {"feature": "log2_msg_over_dma", "threshold": 1.063, "le": {"feature": "est_overlap_vs_bulk", "threshold": 0.9661, "le": {"family": "ficco-gN-K-dma", "cases": 6}, "gt": {"feature": "is_ag", "threshold": 0.5, "le": {"feature": "est_overlap_vs_bulk", "threshold": 0.9969, "le": {"family": "ficco-gN-N-cu-s2-rb", "cases": 10}, "gt": {"family": "bulk-g1-M-dma", "cases": 69}}, "gt": {"feature": "log2_msg_over_dma", "threshold": 0.1066, "le": {"family": "bulk-g1-M-dma", "cases": 63}, "gt": {"family": "estimate", "cases": 6}}}}, "gt": {"feature": "est_dma_vs_cu", "threshold": 0.987, "le": {"family": "ficco-gN-M-dma-s2", "cases": 15}, "gt": {"family": "ficco-gN-M-cu-s2", "cases": 5}}}}
