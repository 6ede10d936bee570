# The two commands a newcomer runs: `make demo` and `make test`.
# Each creates the local virtualenv (.venv) and installs gpuplan into it when missing.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
JOBS ?= 2

.PHONY: demo test lint bench bench-speed figures figures-check mutation ui clean-venv

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/gpuplan demo

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -n $(JOBS) -q

lint: $(STAMP)
	$(BIN)/ruff check .

bench: $(STAMP)
	$(BIN)/gpuplan bench

# The speed targets the suite no longer times (machine-dependent; prints a table).
bench-speed: $(STAMP)
	$(BIN)/python benchmarks/speed_targets.py

# Every deterministic figure in README.md, BENCHMARKS.md and docs/ (pipelines/figures.py):
# `figures` rewrites the marked blocks, `figures-check` fails on any stale one. Both run the
# replays of docs/simulate.md (about 2 minutes on 2 cores); FIGURES_FLAGS=--quick skips them.
FIGURES_FLAGS ?=

figures: $(STAMP)
	$(BIN)/gpuplan figures $(FIGURES_FLAGS)

figures-check: $(STAMP)
	$(BIN)/gpuplan figures --check $(FIGURES_FLAGS)

# Mutation testing (mutmut; scope and tests in pyproject.toml [tool.mutmut]), bounded by
# MUTATION_SECONDS of wall time; results survive in mutants/ (`mutmut results`,
# `mutmut show NAME`). Not part of `make test`: hours of CPU for the whole scope.
MUTATION_SECONDS ?= 3000

mutation: $(STAMP)
	-HYPOTHESIS_PROFILE=quick timeout $(MUTATION_SECONDS) $(BIN)/mutmut run --max-children $(JOBS)
	$(BIN)/mutmut export-cicd-stats
	cat mutants/mutmut-cicd-stats.json

# The embedded store `gpuplan` writes by default (pipelines/tracking.py); UI_PORT=5001 to move it.
UI_PORT ?= 5000

ui: $(STAMP)
	mkdir -p mlruns
	MLFLOW_DISABLE_TELEMETRY=true $(BIN)/mlflow ui --backend-store-uri sqlite:///mlruns/mlflow.db \
		--host 127.0.0.1 --port $(UI_PORT) --workers 1

clean-venv:
	rm -rf $(VENV)
