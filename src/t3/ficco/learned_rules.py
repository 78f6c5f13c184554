"""The shipped learned FiCCO selector, written by `benchmarks/fit_ficco_selector.py fit --write`
(depth and leaf size chosen by 5-fold cross-validation on the training data; docs/ficco.md).
"""

# ruff: noqa: E501

SHIPPED_SELECTOR = "pipeline"
DEPTH = 4
MIN_LEAF = 5
FIT = {"cases": 464, "operators": 232, "cv_right": 320, "cv_accuracy_pct": 69.0, "fit_right": 347}
TREE = {"feature": "est_overlap_vs_bulk", "threshold": 0.9529, "le": {"feature": "est_rb_vs_inc", "threshold": 0.4969, "le": {"feature": "log2_msg_over_dma", "threshold": 0.1512, "le": {"family": "ficco-g2N-N-dma-rb", "cases": 5}, "gt": {"family": "ficco-g2N-N-cu-s2-rb", "cases": 15}}, "gt": {"feature": "log2_waves", "threshold": -1.52, "le": {"feature": "est_k_vs_m", "threshold": 1.356, "le": {"family": "ficco-gN-K-cu", "cases": 9}, "gt": {"family": "bulk-g1-M-dma", "cases": 6}}, "gt": {"feature": "est_k_vs_m", "threshold": 0.9536, "le": {"family": "ficco-gN-K-dma", "cases": 14}, "gt": {"family": "estimate", "cases": 242}}}}, "gt": {"feature": "log2_msg_over_dma", "threshold": 1.401, "le": {"feature": "log2_msg_over_dma", "threshold": 0.6091, "le": {"feature": "est_dma_vs_cu", "threshold": 0.8861, "le": {"family": "ficco-gN-K-dma", "cases": 7}, "gt": {"family": "bulk-g1-M-dma", "cases": 145}}, "gt": {"family": "estimate", "cases": 7}}, "gt": {"feature": "est_dma_vs_cu", "threshold": 0.9695, "le": {"family": "ficco-gN-M-dma-s2", "cases": 9}, "gt": {"family": "ficco-gN-M-cu-s2", "cases": 5}}}}
