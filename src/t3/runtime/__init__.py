"""Runtime: tile-triggered GEMM + collective overlap on torch.distributed.

Three public ops, each with the values, shape, dtype and strides of its reference
(``A @ B`` followed by torch.distributed's collective, or all-gather followed by ``@``):

- :func:`matmul_reduce_scatter`
- :func:`matmul_all_reduce`
- :func:`all_gather_matmul`

PyTorch is an optional dependency of ``t3``; importing this package without it raises an
``ImportError`` that says how to install it.
"""

from __future__ import annotations

try:
    import torch  # noqa: F401
    import torch.distributed  # noqa: F401
except ImportError as err:  # pragma: no cover - exercised only on machines without torch
    raise ImportError(
        "t3.runtime needs PyTorch. Install the CPU build with `pip install torch==2.13.0` "
        "(or the `torch` extra: `pip install 't3[torch]'`)."
    ) from err

from t3.runtime.errors import PeerError
from t3.runtime.ops import all_gather_matmul, matmul_all_reduce, matmul_reduce_scatter
from t3.runtime.plan import Plan
from t3.runtime.stats import RuntimeStats

__all__ = [
    "PeerError",
    "Plan",
    "RuntimeStats",
    "all_gather_matmul",
    "matmul_all_reduce",
    "matmul_reduce_scatter",
]
