"""Published measurements of real GPUs and the comparison of ``t3``'s predictions with them.

``data/*.toml`` holds the dataset (one row per published measurement, with its source, its
conventions and whether it is a calibration row, which a model may be fitted to, or a validation
row, which is never fitted). :mod:`~t3.validation.dataset` loads and checks it,
:mod:`~t3.validation.runner` predicts every row through the public API (``t3.api``) and summarises
the errors; ``t3 validate`` prints them (``docs/validation.md``).
"""

from t3.validation.dataset import CATEGORIES, ROLES, DatasetError, Row, load_dataset, parse_rows
from t3.validation.runner import Outcome, Predictor, run, select, summarize

__all__ = [
    "CATEGORIES", "ROLES", "DatasetError", "Outcome", "Predictor", "Row", "load_dataset", "parse_rows",
    "run", "select", "summarize",
]  # fmt: skip
