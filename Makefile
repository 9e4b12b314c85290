# The README's two commands: `make demo` and `make test`. Each sets up what it needs: the demo the
# Python venv (trainer included); the tests the venv and the system packages (PostgreSQL,
# Prometheus, Alertmanager, Chromium: scripts/setup-system.sh).
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check -q
BASE_PYTHON ?= $(shell command -v python3.11 || command -v python3)
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: demo test setup system-deps venv lint typecheck unit bench screenshots clean

setup: system-deps venv

system-deps:
	@bash scripts/setup-system.sh

venv: $(STAMP)

$(STAMP): pyproject.toml instrument/pyproject.toml trainer/requirements.txt
	@test -x $(PY) || $(BASE_PYTHON) -m venv $(VENV)
	@echo "installing Python dependencies into $(VENV) (pinned; torch comes from the local disk)"
	$(PIP) install -e ./instrument -e '.[grafana,dashboard,dev]'
	bash scripts/install-trainer.sh $(PY)
	@touch $@

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: venv
	$(VENV)/bin/mypy

# The suite in two parts, to keep it under 20 minutes on a 2-core machine: the tests that are not
# e2e on TEST_WORKERS processes (pytest-xdist; each starts its own PostgreSQL, Prometheus, ...),
# then the e2e tests (real torchrun jobs, Chromium, whole wheels) one at a time, as before: they
# keep every core busy and some bound what they measure by the machine's pace. A part that
# PYTEST_ARGS leaves empty (pytest's exit 5, "no tests collected") is not a failure.
# --durations: the slowest tests of each part.
TEST_WORKERS ?= 2
test: setup lint typecheck
	$(PY) -m pytest -m "not performance and not e2e" -n $(TEST_WORKERS) --durations=15 \
	  $(PYTEST_ARGS) || [ $$? -eq 5 ]
	$(PY) -m pytest -m "e2e and not performance" --durations=20 $(PYTEST_ARGS) || [ $$? -eq 5 ]

bench: setup
	$(PY) -m pytest -m performance -s tests/performance $(PYTEST_ARGS)

screenshots: setup  # docs/dashboard-*.png from a simulated fleet, in headless Chromium
	$(PY) scripts/screenshots.py

demo: venv  # the demo needs no system package: SQLite, and the dashboard in your own browser
	$(PY) scripts/demo.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .ett-demo
