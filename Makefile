# The README's two commands call `make main` and `make test`.
PY ?= python3
VENV ?= .venv
BIN = $(VENV)/bin

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

install: $(BIN)/python
	$(BIN)/pip install -q -e '.[notebooks,test]'

main: install
	$(BIN)/workbench run --all

test: install
	$(BIN)/pytest

bench: install
	$(BIN)/python benchmarks/bench_inference.py
	$(BIN)/python benchmarks/bench_training.py

.PHONY: install main test bench
