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

test: setup lint typecheck  # --durations: the slowest tests, to keep the suite under 20 minutes
	$(PY) -m pytest -m "not performance" --durations=25 $(PYTEST_ARGS)

bench: setup
	$(PY) -m pytest -m performance -s tests/performance $(PYTEST_ARGS)

screenshots: setup  # docs/dashboard-*.png from a simulated fleet, in headless Chromium
	$(PY) scripts/screenshots.py

demo: venv  # the demo needs no system package: SQLite, and the dashboard in your own browser
	$(PY) scripts/demo.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .ett-demo
