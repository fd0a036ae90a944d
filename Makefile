# Quick start: `make demo` runs the exporter on a simulated store; `make test` runs every check.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-$(shell cksum < pyproject.toml | cut -d' ' -f1)

.PHONY: demo test lint typecheck unit tools clean

$(STAMP): pyproject.toml
	scripts/bootstrap-venv.sh "$(PYTHON)" "$(VENV)"
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[dev]'
	rm -f $(VENV)/.installed-* && touch $@

# Test tools that come from Debian: prometheus, promtool and prometheus-alertmanager.
tools:
	scripts/install-test-tools.sh

demo: $(STAMP)
	$(BIN)/python -m testbed.demo

lint: $(STAMP)
	$(BIN)/ruff check .

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP) tools
	$(BIN)/pytest

test: lint typecheck unit

clean:
	rm -rf $(VENV) .demo .mypy_cache .ruff_cache .pytest_cache
