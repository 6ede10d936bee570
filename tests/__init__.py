"""gpuplan's tests; a package so that helpers import as `tests.strategies`."""
