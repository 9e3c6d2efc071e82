# Two commands for a fresh machine: `make demo` and `make test`.
PY ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
export TRAINLEAK_DATA ?= $(abspath ../shared/data)
export OMP_NUM_THREADS ?= 2

.PHONY: demo test test-slow lint typecheck bench fuzz install install-dev clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(VENV)/.installed: $(BIN)/python pyproject.toml constraints.txt
	$(BIN)/pip install -q -c constraints.txt torch==2.13.0
	$(BIN)/pip install -q -c constraints.txt -e .
	touch $@

$(VENV)/.installed-dev: $(VENV)/.installed
	$(BIN)/pip install -q -c constraints.txt -e '.[dev]'
	touch $@

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

demo: $(VENV)/.installed
	$(BIN)/trainleak demo --out runs/demo

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

typecheck: $(VENV)/.installed-dev
	$(BIN)/mypy

test: lint typecheck
	$(BIN)/python -m pytest -n 2

test-slow: $(VENV)/.installed-dev
	$(BIN)/python -m pytest -m slow

bench: $(VENV)/.installed-dev
	for f in benchmarks/*.py; do $(BIN)/python $$f || exit 1; done

# At least 10,000 hypothesis cases over every parser of user input; results in
# benchmarks/results/fuzz.md (the default suite runs 40 cases per target).
fuzz: $(VENV)/.installed-dev
	$(BIN)/python benchmarks/fuzz.py --cases-per-target 1200

clean:
	rm -rf $(VENV) runs .pytest_cache .mypy_cache .ruff_cache
