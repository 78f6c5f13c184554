"""The shipped learned FiCCO selector, written by `benchmarks/fit_ficco_selector.py fit --write`
(depth and leaf size chosen by 5-fold cross-validation on the training data; docs/ficco.md).
"""

# ruff: noqa: E501

SHIPPED_SELECTOR = "pipeline"
DEPTH = 5
MIN_LEAF = 20
FIT = {"cases": 464, "operators": 232, "cv_right": 331, "cv_accuracy_pct": 71.3, "fit_right": 342}
TREE = {"feature": "est_overlap_vs_bulk", "threshold": 0.9592, "le": {"feature": "est_k_vs_m", "threshold": 0.9628, "le": {"family": "ficco-gN-K-dma", "cases": 23}, "gt": {"feature": "est_shard_vs_ficco", "threshold": 1.049, "le": {"feature": "est_rb_vs_inc", "threshold": 0.4954, "le": {"family": "ficco-g2N-N-cu-s2-rb", "cases": 22}, "gt": {"feature": "log2_comm_ratio", "threshold": 0.07718, "le": {"family": "estimate", "cases": 213}, "gt": {"family": "ficco-gN-K-cu", "cases": 21}}}, "gt": {"family": "ficco-gN-M-dma-s2", "cases": 20}}}, "gt": {"feature": "log2_msg_over_dma", "threshold": 0.5463, "le": {"family": "bulk-g1-M-dma", "cases": 145}, "gt": {"family": "ficco-gN-M-cu-s2", "cases": 20}}}
