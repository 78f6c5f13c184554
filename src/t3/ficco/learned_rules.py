"""The shipped learned FiCCO selector, written by `benchmarks/fit_ficco_selector.py fit --write`
(depth and leaf size chosen by 5-fold cross-validation on the training data; docs/ficco.md).
"""

# ruff: noqa: E501

SHIPPED_SELECTOR = "pipeline"
DEPTH = 6
MIN_LEAF = 10
FIT = {"cases": 464, "operators": 232, "cv_right": 313, "cv_accuracy_pct": 67.5, "fit_right": 339}
TREE = {"feature": "est_overlap_vs_bulk", "threshold": 0.9532, "le": {"feature": "est_rb_vs_inc", "threshold": 0.4969, "le": {"family": "ficco-g2N-N-cu-s2-rb", "cases": 19}, "gt": {"feature": "log2_waves", "threshold": -1.52, "le": {"family": "ficco-gN-K-cu", "cases": 15}, "gt": {"feature": "est_k_vs_m", "threshold": 0.9286, "le": {"family": "ficco-gN-K-dma", "cases": 10}, "gt": {"feature": "log2_msg_over_dma", "threshold": -1.459, "le": {"family": "bulk-g1-M-dma", "cases": 12}, "gt": {"feature": "is_moe", "threshold": 0.5, "le": {"family": "estimate", "cases": 201}, "gt": {"family": "ficco-gN-M-dma-s2", "cases": 26}}}}}}, "gt": {"feature": "log2_msg_over_dma", "threshold": 1.063, "le": {"feature": "is_ag", "threshold": 0.5, "le": {"feature": "is_rs", "threshold": 0.5, "le": {"family": "bulk-g1-M-dma", "cases": 24}, "gt": {"feature": "est_overlap_vs_bulk", "threshold": 1.007, "le": {"family": "ficco-gN-N-cu-s2-rb", "cases": 12}, "gt": {"family": "bulk-g1-M-dma", "cases": 46}}}, "gt": {"feature": "log2_msg_over_dma", "threshold": 0.05132, "le": {"family": "bulk-g1-M-dma", "cases": 68}, "gt": {"family": "estimate", "cases": 10}}}, "gt": {"feature": "est_dma_vs_cu", "threshold": 0.9611, "le": {"family": "ficco-gN-M-dma-s2", "cases": 11}, "gt": {"family": "ficco-gN-M-cu-s2", "cases": 10}}}}
