# Quick start: `make demo` runs the exporter on a simulated store; `make test` runs every check.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml constraints.txt | cksum | cut -d' ' -f1)
# checkov pins libraries the test tools need newer: it gets a virtualenv of its own.
CHECKOV_VERSION := 3.3.30
CHECKOV := .tools/checkov/bin/checkov
# `make demo PORT=9967 DSN=mysql://root@db:3306`: the port to serve, a server to use.
PORT ?= 9966
DSN ?=
# The demo needs the exporter's runtime dependencies only.
DEMO_VENV := .venv-demo
DEMO_STAMP := $(DEMO_VENV)/.installed-$(shell cat pyproject.toml constraints.txt | cksum | cut -d' ' -f1)
# The other Pythons the fast tier and the database tests run on, where this machine has them.
OTHER_PYTHONS ?= 3.12 3.13
# Test processes of the full suite (pytest-xdist, a test file per process at a time): most
# of its time is spent waiting on Prometheus, Alertmanager and MariaDB, not on the CPU.
TEST_WORKERS ?= 2

.PHONY: demo check test lint format typecheck unit all-tests other-pythons dependency-ranges tools chart-files \
	docs constraints bench clean

$(STAMP): pyproject.toml constraints.txt
	scripts/bootstrap-venv.sh "$(PYTHON)" "$(VENV)"
	$(BIN)/pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[dev]'
	rm -f $(VENV)/.installed-* && touch $@

# Test tools: prometheus, promtool, prometheus-alertmanager and shellcheck from Debian;
# checkov from PyPI, in its own virtualenv.
tools: $(CHECKOV)
	scripts/install-test-tools.sh

$(CHECKOV):
	scripts/bootstrap-venv.sh "$(PYTHON)" .tools/checkov
	.tools/checkov/bin/pip install --quiet --disable-pip-version-check checkov==$(CHECKOV_VERSION)

$(DEMO_STAMP): pyproject.toml constraints.txt
	scripts/bootstrap-venv.sh "$(PYTHON)" "$(DEMO_VENV)"
	$(DEMO_VENV)/bin/pip install --quiet --disable-pip-version-check -c constraints.txt -e .
	rm -f $(DEMO_VENV)/.installed-* && touch $@

demo: $(DEMO_STAMP)
	$(DEMO_VENV)/bin/python -m testbed.demo --port $(PORT) $(if $(DSN),--dsn '$(DSN)')

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

# The fast tier: no server, no test tool; under a minute once the virtualenv exists.
unit: $(STAMP)
	$(BIN)/pytest -q tests/unit

check: lint typecheck unit

# Everything, against real MariaDB, Prometheus, Alertmanager and the Helm engine. A file's
# tests stay in one process (`loadfile`): its module fixtures (the image, a Prometheus) are
# made once.
all-tests: $(STAMP) tools
	$(BIN)/pytest -n $(TEST_WORKERS) --dist loadfile

# Lint and types first; then the full suite beside the other Pythons' and the dependency
# ranges' tiers (mostly installs), each tier's output printed whole when it ends. The full
# suite holds the fast tier (`tests/unit`), so `check`'s run of it is not repeated.
test: lint typecheck
	$(MAKE) --no-print-directory --jobs=3 --output-sync=target all-tests other-pythons \
		dependency-ranges

other-pythons:
	scripts/other-pythons.sh $(OTHER_PYTHONS)

# The HTTP, TLS and configuration tests with the runtime dependencies at the lowest
# versions pyproject.toml allows, then at the newest it allows (about a minute each).
dependency-ranges:
	scripts/dependency-range.sh "$(PYTHON)"

# Rewrites the generated tables of docs/metrics.md from the catalog.
docs: $(STAMP)
	$(BIN)/python -m actionscheduler_exporter.metrics.docs

# Pins every dependency at what pip resolves today (after a change of pyproject.toml).
constraints:
	rm -rf .constraints-venv && $(PYTHON) -m venv .constraints-venv
	.constraints-venv/bin/pip install --quiet --disable-pip-version-check -e '.[dev]'
	{ head -2 constraints.txt; .constraints-venv/bin/pip freeze --exclude-editable \
		| grep -v '^-e'; } > constraints.txt.new && mv constraints.txt.new constraints.txt
	rm -rf .constraints-venv

# Performance, side by side with a generic SQL exporter (docs/performance.md). Stores are
# generated once into .bench/; `make bench BENCH_SIZES=100k,1m,10m` adds the 10M store.
BENCH_SIZES ?= 100k,1m
bench: $(STAMP)
	$(BIN)/python -m bench.run --sizes $(BENCH_SIZES)

# Writes the SLO forms from slo/objectives.yml (rules/, slo/generated/); copies rules/ and
# dashboards/*.json into the Helm chart, with the rules scoped for one
# release beside them, and writes the schema of the chart's sites from the exporter's own
# configuration keys (tests keep them equal); writes the monitoring mixin (mixin/).
chart-files: $(STAMP)
	$(BIN)/python -m slo
	$(BIN)/python -m actionscheduler_exporter.config.chart_schema
	cp rules/actionscheduler.rules.yml helm/actionscheduler-exporter/files/rules/
	$(BIN)/python -m rules.scope
	$(BIN)/python -m rules.native
	cp dashboards/*.json helm/actionscheduler-exporter/files/dashboards/
	mkdir -p helm/actionscheduler-exporter/files/dashboards/native
	cp dashboards/native/*.json helm/actionscheduler-exporter/files/dashboards/native/
	$(BIN)/python -m mixin

clean:
	rm -rf $(VENV) $(DEMO_VENV) .venv-3.* .venv-deps-* .tools .demo .mypy_cache .ruff_cache .pytest_cache build dist *.egg-info
