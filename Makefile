# The two commands a newcomer runs: `make demo` and `make test`.
# Each creates the local virtualenv (.venv) and installs gpuplan into it when missing
# (again when pyproject.toml or the C decoder changes: the install compiles it).

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
JOBS ?= 2

.PHONY: demo test lint bench ui clean-venv

$(STAMP): pyproject.toml allocator/policies/_packc.c
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
