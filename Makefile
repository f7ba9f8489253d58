# Two commands on a fresh machine: `make demo` (run the workflow on config/config.yaml) and `make test`.
VENV ?= .venv
PYTHON ?= python3
BIN := $(abspath $(VENV))/bin
export PATH := $(BIN):$(PATH)

.PHONY: setup demo test lint bench clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[workflow,test]'
	touch $@

setup: $(VENV)/.installed

demo: setup
	$(BIN)/snakemake --cores all
	@echo "Reports written to results/reports/*/report.{md,json}"

test: setup
	$(BIN)/python -m pytest

bench: setup
	$(BIN)/python -m pip install --quiet -e '.[bench]'
	$(BIN)/python bench/retrieval.py

lint: setup
	$(BIN)/snakemake --lint

clean:
	rm -rf results logs benchmarks .snakemake
