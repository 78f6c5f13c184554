"""The shipped learned FiCCO selector, written by `benchmarks/fit_ficco_selector.py fit --write`
(depth and leaf size chosen by 5-fold cross-validation on the training data; docs/ficco.md).
"""

# ruff: noqa: E501

SHIPPED_SELECTOR = "pipeline"
DEPTH = 6
MIN_LEAF = 10
FIT = {"cases": 464, "operators": 232, "cv_right": 328, "cv_accuracy_pct": 70.7, "fit_right": 355}
TREE = {"feature": "est_overlap_vs_bulk", "threshold": 0.947, "le": {"feature": "est_rb_vs_inc", "threshold": 0.4946, "le": {"family": "ficco-g2N-N-cu-s2-rb", "cases": 20}, "gt": {"feature": "est_shard_vs_ficco", "threshold": 1.048, "le": {"feature": "log2_n_tiles", "threshold": 2.453, "le": {"family": "ficco-gN-K-cu", "cases": 13}, "gt": {"feature": "est_k_vs_m", "threshold": 0.9996, "le": {"family": "ficco-g2N-M-dma-s2", "cases": 10}, "gt": {"feature": "is_moe", "threshold": 0.5, "le": {"family": "estimate", "cases": 200}, "gt": {"family": "ficco-gN-M-dma-s2", "cases": 15}}}}, "gt": {"feature": "log2_waves", "threshold": 3.674, "le": {"family": "ficco-gN-K-dma", "cases": 11}, "gt": {"family": "ficco-gN-M-dma-s2", "cases": 19}}}}, "gt": {"feature": "log2_msg_over_dma", "threshold": 1.401, "le": {"feature": "est_overlap_vs_bulk", "threshold": 0.9622, "le": {"family": "ficco-gN-K-dma", "cases": 11}, "gt": {"feature": "is_ag", "threshold": 0.5, "le": {"feature": "est_overlap_vs_bulk", "threshold": 0.9969, "le": {"family": "estimate", "cases": 11}, "gt": {"family": "bulk-g1-M-dma", "cases": 67}}, "gt": {"family": "bulk-g1-M-dma", "cases": 70}}}, "gt": {"family": "ficco-gN-M-cu-s2", "cases": 17}}}
