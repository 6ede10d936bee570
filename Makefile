# The two commands a newcomer runs: `make demo` and `make test`.
# Each creates the local virtualenv (.venv) and installs gpuplan into it when missing
# (again when pyproject.toml or the C decoder changes: the install compiles it).

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
JOBS ?= 2

.PHONY: demo test lint bench bench-speed bench-full bench-quality bench-optima bench-estimators \
	figures figures-check mutation ui clean-venv

$(STAMP): pyproject.toml allocator/policies/_packc.c
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/gpuplan demo

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	$(BIN)/mypy
	$(BIN)/python -m pytest -n $(JOBS) -q

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/gpuplan bench

# The speed targets the suite no longer times (machine-dependent; prints a table).
bench-speed: $(STAMP)
	$(BIN)/python benchmarks/speed_targets.py

# The other benchmarks of benchmarks/ (each prints its table; `--help` on each script):
# full mode against fast per scenario, the wider family (QUALITY_SET=tuning|test), the
# proven optima of data/quality, the estimator tables. Minutes each; none runs in `make test`.
QUALITY_SET ?= tuning

bench-full: $(STAMP)
	$(BIN)/python benchmarks/full_mode.py

bench-quality: $(STAMP)
	$(BIN)/python benchmarks/quality.py --set $(QUALITY_SET)

bench-optima: $(STAMP)
	$(BIN)/python benchmarks/optima.py

bench-estimators: $(STAMP)
	$(BIN)/python benchmarks/estimator_tables.py

# Every deterministic figure in README.md, BENCHMARKS.md and docs/ (benchmarks/figures.py):
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
	$(BIN)/python scripts/mutation_direct.py "*" --jobs $(JOBS)  # mutmut's timeouts, rerun
	cat mutants/mutmut-cicd-stats.json

# The store `gpuplan` writes (`gpuplan where`: GPUPLAN_HOME, else this checkout's mlruns/);
# UI_PORT=5001 to move it. MLflow 3 opens in its GenAI view: the runs are under "Model training".
UI_PORT ?= 5000

ui: $(STAMP)
	@echo "gpuplan's runs: http://127.0.0.1:$(UI_PORT)/#/experiments?workflowType=machine_learning"
	uri="$$($(BIN)/gpuplan where --uri)"; \
	case "$$uri" in sqlite:///*) mkdir -p "$$(dirname "$${uri#sqlite:///}")";; esac; \
	MLFLOW_DISABLE_TELEMETRY=true $(BIN)/mlflow ui --backend-store-uri "$$uri" \
		--host 127.0.0.1 --port $(UI_PORT) --workers 1

clean-venv:
	rm -rf $(VENV)
