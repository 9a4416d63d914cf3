# Every target bootstraps .venv from plain python3, so a fresh clone needs nothing else.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
TEST_STAMP := $(VENV)/.installed-test
DEV_STAMP := $(VENV)/.installed-dev

.PHONY: test test-slow lint demo bench bench-smoke bench-peers clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(TEST_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(TEST_STAMP)

$(DEV_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(DEV_STAMP) $(TEST_STAMP)

# The tests, the benchmarks and their smoke run get a throwaway PostgreSQL server (stopped
# afterwards, even on failure): scripts/with-postgres exports its DSN for tests/postgres and
# benchmarks/bench_postgres.py.
WITH_POSTGRES := bash scripts/with-postgres

test: $(TEST_STAMP)
	$(WITH_POSTGRES) $(BIN)/python -m pytest -q $(PYTEST_ARGS)

# The stress tests at their full counts (pytest's `slow` marker), which `make test` skips.
test-slow: $(TEST_STAMP)
	$(BIN)/python -m pytest -q -m slow $(PYTEST_ARGS)

lint: $(DEV_STAMP)
	$(BIN)/ruff check trio_agent tests benchmarks examples
	$(BIN)/ruff format --check trio_agent tests benchmarks examples
	$(BIN)/mypy

demo: $(TEST_STAMP)
	$(BIN)/python -m trio_agent.demo

bench: $(TEST_STAMP)
	$(WITH_POSTGRES) $(BIN)/python -m benchmarks

bench-smoke: $(TEST_STAMP)
	$(WITH_POSTGRES) $(BIN)/python -m benchmarks --smoke

# Peer frameworks live in their own venv, installed from the bench-peers extra, never in .venv.
PEERS_VENV := .venv-peers
PEERS_STAMP := $(PEERS_VENV)/.installed

$(PEERS_STAMP): pyproject.toml | $(TEST_STAMP)
	$(PYTHON) -m venv $(PEERS_VENV)
	$(BIN)/python -m benchmarks.bench_peers --requirements > $(PEERS_VENV)/requirements.txt
	$(PEERS_VENV)/bin/python -m pip install --quiet -r $(PEERS_VENV)/requirements.txt
	touch $(PEERS_STAMP)

bench-peers: $(TEST_STAMP) $(PEERS_STAMP)
	$(BIN)/python -m benchmarks bench_peers

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache build *.egg-info
