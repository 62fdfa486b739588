# Two entry points for a newcomer: `make train` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: train test test-slow test-all bench lint install clean gpu-check

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(STAMP): pyproject.toml Makefile | $(BIN)/python
	$(BIN)/pip install -q -e '.[test,hf]'
	touch $(STAMP)

install: $(STAMP)

train: $(STAMP)
	$(BIN)/diagevo train $(ARGS)

# the fast tier (a few minutes); the slow tier: real-model steps, multi-process runs and soaks
test: $(STAMP)
	$(BIN)/python -m pytest -m "not slow" $(PYTEST_ARGS)

test-slow: $(STAMP)
	$(BIN)/python -m pytest -m slow $(PYTEST_ARGS)

test-all: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# on a CUDA machine, models already in models/ (no network needed): one round of the real loop
GPU_MODEL ?= models/smollm2
gpu-check: $(STAMP)
	$(BIN)/diagevo gpu-check --model $(GPU_MODEL) --out gpu-check/$$(date +%Y%m%d-%H%M%S)

lint: $(STAMP)
	$(BIN)/ruff check diagevo cli tests benchmarks
	$(BIN)/mypy diagevo cli

bench: $(STAMP)
	for b in benchmarks/bench_*.py; do $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) diagevo.db diagevo.db-wal diagevo.db-shm diagevo.lance diagevo.runs runs
