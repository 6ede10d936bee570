"""The benchmarks and experiments of the source checkout: code that imports gpuplan.

Not installed with gpuplan (pyproject.toml packages only allocator, forecasting and
pipelines, and `lint-imports` forbids them to import this package). `gpuplan bench`,
`bench-compare`, `profile-eval`, `profile-clients` and `figures` load it from the
checkout at call time (pipelines/checkout.py); the scripts here are typer commands, as
gpuplan's are: `python benchmarks/NAME.py --help` (or `python -m benchmarks.NAME`) from
the checkout's root, several also as Makefile targets.
"""
