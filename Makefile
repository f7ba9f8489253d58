# Two commands on a fresh machine: `make demo` (run the workflow on config/config.yaml) and `make test`;
# `make docs` builds the documentation site into site/ (offline, warnings are errors).
VENV ?= .venv
PYTHON ?= python3
BIN := $(abspath $(VENV))/bin
export PATH := $(BIN):$(PATH)

.PHONY: setup demo test docs test-slurm lint bench clean report slurm-profile slurm-start slurm-stop

EXTRAS := workflow,test,models,formats,docs
# Setup installs with uv (itself pip-installed into the venv first; ~3x faster than pip here: it fetches and unpacks
# wheels in parallel) and falls back to pip when uv cannot be had or
# fails. uv is given pip's configured sources (find-links, index URLs, constraints: `pip config list`) and, like
# pip, picks the best version across all of them, so both install the same packages from the same places.
define UV_SOURCES_PY
import ast, shlex, subprocess, sys
flags = {"find-links": "--find-links", "index-url": "--index-url", "extra-index-url": "--extra-index-url",
         "constraint": "--constraint"}
listing = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True).stdout
args = []
for line in listing.splitlines():
    key, _, value = line.partition("=")
    scope, _, name = key.rpartition(".")
    if name in flags and scope in ("global", "install", ":env:"):
        for item in ast.literal_eval(value).split():
            if [flags[name], item] not in [args[i:i + 2] for i in range(0, len(args), 2)]:
                args += [flags[name], item]
print(shlex.join(args))
endef
export UV_SOURCES_PY
# Every module is compiled to bytecode at install (uv --compile-bytecode, pip's default; our own package by compileall):
# where PYTHONDONTWRITEBYTECODE is set (a shell, a CI image), Python never writes a .pyc, so without them every
# workflow job process recompiled numpy, scipy, scikit-learn and pandas from source (3-4x the job's import time,
# bench/workflow.py). Inside make, bytecode caching is on as well.
unexport PYTHONDONTWRITEBYTECODE

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	if $(BIN)/python -m pip install --quiet uv; then \
		sources=$$($(BIN)/python -c "$$UV_SOURCES_PY") && \
		eval "$(BIN)/uv pip install --quiet --compile-bytecode --python $(BIN)/python --index-strategy unsafe-best-match $$sources \
			-e '.[$(EXTRAS)]'"; \
	else false; fi || { \
		echo "uv unavailable or failed: installing with pip"; \
		$(BIN)/python -m pip install --quiet --upgrade pip && \
		$(BIN)/python -m pip install --quiet -e '.[$(EXTRAS)]'; }
	$(BIN)/python -m compileall -q vertebrae
	touch $@

setup: $(VENV)/.installed

demo: setup
	$(BIN)/snakemake --cores all
	@echo "Reports written to results/reports/*/report.{md,json}"
	@echo "Next: source .venv/bin/activate, then vertebrae leaderboard (or call .venv/bin/vertebrae directly)"

# The suite touches nothing outside the repository, its venv and temporary folders: it installs no system package
# and starts no service. The SLURM test (which does both, as root) is skipped there and runs with `make test-slurm`.
# Two pytest-xdist workers (the suite is mostly Snakemake job processes: CPU-bound), one test file per work unit
# in collection order, the workflow tests first (module fixtures built once; tests/conftest.py); the files that
# read the default run form one unit, so it runs once (tests/workflow/conftest.py).
TEST_WORKERS ?= 2
test: setup
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=30

# The default workflow on a real single-node SLURM started on this machine (installs slurm + munge with apt if
# needed: root, Debian/Ubuntu); the cluster is stopped afterwards unless it was already running.
test-slurm: setup
	VERTEBRAE_SLURM=1 $(BIN)/python -m pytest tests/workflow/test_slurm.py -x -q -s

# The documentation site (mkdocs.yml, docs/): the reference pages are generated from the code while it builds
docs: setup
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

bench: setup
	$(BIN)/python -m pip install --quiet -e '.[bench]'
	$(BIN)/python bench/retrieval.py
	$(BIN)/python bench/workflow.py

lint: setup
	$(BIN)/snakemake --lint

report: setup
	$(BIN)/snakemake --cores all results/index.html
	$(BIN)/snakemake --report report.html
	@echo "Open results/index.html: every benchmark's page (ranking, figures, comparison, costs) and the leaderboard"
	@echo "(report.html is Snakemake's bundle of the same figures and tables, with the rule graph and run statistics)"

# Install profiles/slurm as the global `slurm` profile: make slurm-profile SLURM_ACCOUNT=a SLURM_PARTITION=p [SLURM_GPU_PARTITION=g]
# (install.sh refuses a missing account or partition, naming it, and installs nothing)
slurm-profile:
	PATH="$(VENV)/bin:$$PATH" profiles/slurm/install.sh "$(SLURM_ACCOUNT)" "$(SLURM_PARTITION)" $(SLURM_GPU_PARTITION)

# A real single-node SLURM cluster on this machine (root, Debian/Ubuntu), for trying the cluster path locally
slurm-start:
	profiles/slurm/localhost/cluster.sh start

slurm-stop:
	profiles/slurm/localhost/cluster.sh stop

clean:
	rm -rf results logs benchmarks .snakemake site
