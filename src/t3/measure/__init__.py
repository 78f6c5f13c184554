"""``t3 measure``: the measurement kit that turns a GPU into dataset rows, and ``t3 calibrate
--measured``, which fits a preset's single-GPU parameters to them (``docs/measure.md``).

Modules (each small). The measuring modules import each other relatively and take what they need of
``t3`` through :mod:`~t3.measure.compat` only, so that a copy of the package runs alone on a GPU machine
whose Python lacks ``t3``'s dependencies (``benchmarks/device_measure.sh``); the fit needs ``t3``:

- :mod:`~t3.measure.backend`: timer, streams, events, copy engines, fixed-grid kernels (GPU and CPU);
- :mod:`~t3.measure.kernels`: the Triton kernels (imported only on a GPU);
- :mod:`~t3.measure.timing`: gated batches, chains, medians and percentiles;
- :mod:`~t3.measure.plan`: the grids (default, ``--quick``, CPU);
- :mod:`~t3.measure.suites`: GEMM throughput, HBM streams, latencies;
- :mod:`~t3.measure.interference`: a GEMM beside copies, copy engines and reductions;
- :mod:`~t3.measure.rows`: the row writer (``[[row]]`` TOML, checked by the dataset's loader);
- :mod:`~t3.measure.runner`: options, the run, ``run.json``;
- :mod:`~t3.measure.calibrate`, :mod:`~t3.measure.preset`: the fit and the preset it writes.

Nothing here imports torch until a run starts.
"""
