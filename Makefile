# Quick start: `make demo` runs the exporter on a simulated store; `make test` runs every check.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-$(shell cksum < pyproject.toml | cut -d' ' -f1)
# checkov pins libraries the test tools need newer: it gets a virtualenv of its own.
CHECKOV_VERSION := 3.3.30
CHECKOV := .tools/checkov/bin/checkov

.PHONY: demo test lint typecheck unit tools chart-files bench clean

$(STAMP): pyproject.toml
	scripts/bootstrap-venv.sh "$(PYTHON)" "$(VENV)"
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[dev]'
	rm -f $(VENV)/.installed-* && touch $@

# Test tools: prometheus, promtool, prometheus-alertmanager and shellcheck from Debian;
# checkov from PyPI, in its own virtualenv.
tools: $(CHECKOV)
	scripts/install-test-tools.sh

$(CHECKOV):
	scripts/bootstrap-venv.sh "$(PYTHON)" .tools/checkov
	.tools/checkov/bin/pip install --quiet --disable-pip-version-check checkov==$(CHECKOV_VERSION)

demo: $(STAMP)
	$(BIN)/python -m testbed.demo

lint: $(STAMP)
	$(BIN)/ruff check .

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP) tools
	$(BIN)/pytest

test: lint typecheck unit

# Performance, side by side with a generic SQL exporter (docs/performance.md). Stores are
# generated once into .bench/; `make bench BENCH_SIZES=100k,1m,10m` adds the 10M store.
BENCH_SIZES ?= 100k,1m
bench: $(STAMP)
	$(BIN)/python -m bench.run --sizes $(BENCH_SIZES)

# Copies rules/ and dashboards/*.json into the Helm chart (a test keeps them equal).
chart-files:
	cp rules/actionscheduler.rules.yml helm/actionscheduler-exporter/files/rules/
	cp dashboards/*.json helm/actionscheduler-exporter/files/dashboards/

clean:
	rm -rf $(VENV) .tools .demo .mypy_cache .ruff_cache .pytest_cache
