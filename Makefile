# Set-up and everyday commands. `make demo` and `make test` work on a fresh machine: they create
# the virtual environment (.venv) and install agentcore with its development extras first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: venv demo test lint check test-dynamo bench clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q -U pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

## Run the main job: a batch of agents against the embedded simulated backend (sim://).
demo: venv
	$(BIN)/agentcore demo

## Run the test suite (unit, property and loopback tests; no external servers needed).
test: venv
	$(BIN)/python -m pytest -q -p no:cacheprovider

## Static checks: mypy --strict and ruff on the sources.
lint: venv
	$(BIN)/mypy src/agentcore
	$(BIN)/ruff check src tests bench fuzz
	$(BIN)/ruff format --check src tests bench fuzz

check: test lint

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache .mypy_cache .ruff_cache .hypothesis
