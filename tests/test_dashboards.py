"""The dashboards: generated from source, structurally sound, and every query answered by
a real Prometheus that scrapes the exporter over a moving MariaDB queue."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from actionscheduler_exporter.config import SiteConfig
from actionscheduler_exporter.config.model import WorkersConfig
from dashboards import build, hooks, overview, slo
from dashboards.grafana import CLUSTER, DATASOURCE, RUNBOOKS, SCHEMA_VERSION, Panel, Query
from dashboards.queries import keda_query
from testbed import schedules
from testbed.mariadb import Server
from testbed.store import ActionSchedulerStore
from tests.support.http_server import RunningExporter
from tests.support.prometheus import Prometheus
from tests.support.recurring import NIGHTLY, write_history
from tests.support.series import RULES, exported_series, external_series, referenced_names, rules
from tests.support.waiting import wait_until

ROOT = Path(__file__).resolve().parent.parent
FILES = {name: ROOT / "dashboards" / name for name in build.DASHBOARDS}
SOURCES: dict[str, list[Panel]] = {
    "actionscheduler-overview.json": overview.panels(),
    "actionscheduler-hooks.json": hooks.panels(),
    "actionscheduler-slo.json": slo.panels(),
}
SITE = "shop"


def load(name: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(FILES[name].read_text())
    return document


def test_committed_json_is_what_the_source_generates() -> None:
    for name, text in build.rendered().items():
        assert FILES[name].read_text() == text, f"{name}: run python -m dashboards.build"


@pytest.mark.parametrize("name", FILES)
def test_dashboard_structure(name: str) -> None:
    document = load(name)
    assert document["schemaVersion"] == SCHEMA_VERSION
    assert document["uid"] == name.removesuffix(".json")
    assert document["time"] == {"from": "now-6h", "to": "now"} and document["refresh"]
    variables = {v["name"]: v for v in document["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    for variable in (
        "cluster",
        "site",
        "namespace",
        *(("hook", "group") if "hooks" in name else ()),
    ):
        assert variables[variable]["multi"] and variables[variable]["includeAll"]
        assert variables[variable]["datasource"] == DATASOURCE

    panels = document["panels"]
    ids = [panel["id"] for panel in panels]
    assert len(ids) == len(set(ids))
    cells: set[tuple[int, int]] = set()
    for panel in panels:
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24
        covered = {
            (x, y)
            for x in range(grid["x"], grid["x"] + grid["w"])
            for y in range(grid["y"], grid["y"] + grid["h"])
        }
        assert not covered & cells, panel["title"]
        cells |= covered
        assert panel["datasource"] == DATASOURCE
        assert all(target["datasource"] == DATASOURCE for target in panel["targets"])
        assert len(panel["description"]) > 40, panel["title"]
        defaults = panel["fieldConfig"]["defaults"]
        assert defaults["unit"] and defaults["thresholds"]["steps"], panel["title"]
        for link in panel.get("links", []):
            page = link["url"].removeprefix(RUNBOOKS)
            assert (ROOT / "docs" / "runbooks" / page).is_file(), page
    # Every datasource reference anywhere goes through the variable: no hard-coded uid.
    uids = set(re.findall(r'"uid": "([^"]*)"', FILES[name].read_text()))
    assert uids == {"${datasource}", document["uid"]}


def test_queries_use_only_series_that_exist() -> None:
    recorded = {rule["record"] for rule in rules() if "record" in rule}
    known = exported_series() | recorded | external_series()
    used: set[str] = set()
    for name in FILES:
        document = load(name)
        expressions = [t["expr"] for p in document["panels"] for t in p["targets"]]
        expressions += [a["expr"] for a in document["annotations"]["list"]]
        expressions += [
            re.sub(r"label_values\((.*), \w+\)", r"\1", v["definition"])
            for v in document["templating"]["list"]
            if v["type"] == "query"
        ]
        for expression in expressions:
            names = referenced_names(expression)
            assert names <= known, (name, names - known)
            used |= names
    rule_names = {n for rule in rules() for n in referenced_names(str(rule["expr"]))}
    # Every series documented as coming from elsewhere is used by a rule or a panel.
    assert external_series() <= used | rule_names


def test_the_autoscaling_panel_uses_the_keda_query_verbatim() -> None:
    workers = next(
        p
        for p in load("actionscheduler-overview.json")["panels"]
        if p["title"].startswith("Workers")
    )
    assert workers["repeat"] == "site"
    assert workers["targets"][0]["expr"] == keda_query("$site")


def substitute(expression: str) -> str:
    """Variables as Grafana would fill them: one site for repeated panels, All elsewhere."""
    expression = expression.replace('site="$site"', f'site="{SITE}"')
    for variable in ("cluster", "site", "namespace", "hook", "group", "slo"):
        expression = expression.replace(f"${variable}", ".*")
    return expression.replace("$__rate_interval", "1m")


@pytest.fixture
def scraped_queue(
    mariadb: Server,
    database: str,
    store_factory: Callable[[str], ActionSchedulerStore],
    site: Callable[..., SiteConfig],
    exporter_http: Callable[..., RunningExporter],
    tmp_path: Path,
) -> Iterator[Prometheus]:
    """A queue through healthy flow, a backlog and failures, scraped for 20 seconds."""
    store = store_factory("wp_")
    exporter = exporter_http(
        site(
            name=SITE,
            concurrent_batches_limit=2,
            workers=(WorkersConfig("shop", "shop-worker"),),
            heavy_interval=2.0,
        )
    )
    prometheus = Prometheus([f"127.0.0.1:{exporter.port}"], rule_files=every_second(tmp_path))
    stop = threading.Event()

    def run() -> None:
        writer = ActionSchedulerStore(mariadb.connect(database))
        while not stop.is_set():
            for index in range(4):
                writer.create("woocommerce_deliver_webhook_async", group="webhooks", args=[index])
                writer.create("mailchimp_sync_order", group="mailchimp", args=[index])
            writer.run_batch(
                5,
                lambda hook: "Supplier API unreachable" if hook == "mailchimp_sync_order" else None,
            )
            stop.wait(0.2)
        writer.connection.close()

    try:
        prometheus.wait_for("actionscheduler_up == 1")
        # Runs by every runner, and recurring hooks Action Scheduler stopped (before the
        # worker below starts: it would claim their due occurrences)...
        write_history(store)
        prometheus.wait_for(
            f'actionscheduler_recurring_actions_stopped_total{{hook="{NIGHTLY}"}} == 1'
        )
        # ... one of which, scheduled again, is stopped again: an increase in the log.
        with store.seconds_ago(60):
            again = store.create(NIGHTLY, schedule=schedules.INTERVAL, recurrence=60)
        assert store.run_recurring(again, "Supplier API unreachable", threshold=1) is None
        thread = threading.Thread(target=run)
        thread.start()
        with store.seconds_ago(600):
            for index in range(30):
                store.create("wc_admin_import_orders", group="imports", args=[index])
        # Until every panel that must show data does (the test checks it again below).
        wait_until(lambda: not empty_panels(prometheus), 90, interval=1.0)
        stop.set()
        thread.join()
        yield prometheus
    finally:
        stop.set()
        prometheus.stop()


def every_second(folder: Path) -> list[Path]:
    """The rule files with every group evaluated at the test Prometheus' global interval
    (the SLO window group's 5 minutes would leave its panels empty for that long)."""
    copies = []
    for path in RULES:
        document = yaml.safe_load(path.read_text())
        for group in document["groups"]:
            group.pop("interval", None)
        copy = folder / path.name
        copy.write_text(yaml.safe_dump(document))
        copies.append(copy)
    return copies


def all_queries() -> list[tuple[str, str, Query]]:
    return [
        (name, panel.title, query)
        for name, panels in SOURCES.items()
        for panel in panels
        for query in panel.queries
    ]


def empty_panels(prometheus: Prometheus) -> list[tuple[str, str, str]]:
    """Panel queries that return nothing although they should show data."""
    return [
        (name, title, query.expr)
        for name, title, query in all_queries()
        if not query.may_be_empty and not prometheus.query(substitute(query.expr))
    ]


def test_every_panel_query_returns_data_from_a_real_prometheus(scraped_queue: Prometheus) -> None:
    assert not empty_panels(scraped_queue)
    # The queries the JSON files carry are the ones just checked.
    for name, panels in SOURCES.items():
        assert {t["expr"] for p in load(name)["panels"] for t in p["targets"]} == {
            query.expr for panel in panels for query in panel.queries
        }
    # Variables list values, and the alert annotation query is valid PromQL.
    for name in FILES:
        for variable in load(name)["templating"]["list"]:
            if variable["type"] != "query":
                continue
            match = re.fullmatch(r"label_values\((.*), (\w+)\)", variable["definition"])
            assert match, variable["definition"]
            selector, label = match.groups()
            values = scraped_queue.query(f"group by ({label}) ({substitute(selector)})")
            assert values, (name, variable["name"])
        for annotation in load(name)["annotations"]["list"]:
            scraped_queue.query(substitute(annotation["expr"]))


def test_empty_panels_are_documented() -> None:
    readme = (ROOT / "dashboards" / "README.md").read_text()
    for _, title, query in all_queries():
        if query.may_be_empty:
            assert title in readme, title


def test_the_readme_lists_every_recorded_series_a_dashboard_needs() -> None:
    """Issue 26, item 7: imported alone, the key panels were empty and nothing said why.
    The dashboards README's table names the recording rules each dashboard queries."""
    recorded = {rule["record"] for rule in rules() if "record" in rule}
    readme = (ROOT / "dashboards" / "README.md").read_text()
    table = readme.split("recorded series it queries", 1)[1].split("\n\n", 1)[0]
    for name, label in (("actionscheduler-overview.json", "overview"),
                        ("actionscheduler-hooks.json", "hooks"),
                        ("actionscheduler-slo.json", "slo")):  # fmt: skip
        document = load(name)
        used = {
            series
            for panel in document["panels"]
            for target in panel["targets"]
            for series in referenced_names(target["expr"])
            if series in recorded
        }
        row = next(line for line in table.splitlines() if line.startswith(f"| {label} |"))
        listed = set(re.findall(r"`([a-z_]+:[a-z_0-9:]+)`", row))
        assert used == listed, (label, used ^ listed)


@pytest.mark.parametrize("name", sorted(FILES))
def test_the_import_dialog_asks_for_prometheus_and_knows_the_panels(name: str) -> None:
    """Issue 26, item 7: without __inputs and __requires, grafana.com's import did not
    ask for a data source nor say what the dashboard needs."""
    document = load(name)
    assert [entry["pluginId"] for entry in document["__inputs"]] == ["prometheus"]
    required = {(entry["type"], entry["id"]) for entry in document["__requires"]}
    assert {("grafana", "grafana"), ("datasource", "prometheus")} <= required
    assert {panel["type"] for panel in document["panels"]} == {
        panel_id for kind, panel_id in required if kind == "panel"
    }


def datasource_references(node: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """Every `datasource` value anywhere in a dashboard, with where it is."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "datasource":
                yield f"{path}.{key}", value
            yield from datasource_references(value, f"{path}.{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from datasource_references(value, f"{path}[{index}]")


@pytest.mark.parametrize("name", sorted(FILES))
def test_the_data_source_chosen_at_import_is_the_default_of_the_variable(name: str) -> None:
    """Issue 39, item 5: `__inputs` declared DS_PROMETHEUS but nothing referenced it, and
    the variable's `current` was empty, so the import dialog's choice was ignored."""
    text = FILES[name].read_text()
    document = json.loads(text)
    [source] = document["__inputs"]
    variables = {v["name"]: v for v in document["templating"]["list"]}
    references = list(datasource_references(document))
    assert len(references) > len(document["panels"])
    for where, reference in references:
        assert reference == {"type": "prometheus", "uid": "${datasource}"}, where
    # The variable defaults to the input ...
    assert variables["datasource"]["current"]["value"] == "${" + source["name"] + "}"
    # ... which is what Grafana's import substitutes, textually, with the chosen uid.
    imported = json.loads(text.replace("${" + source["name"] + "}", "prom-eu-1"))
    current = next(v for v in imported["templating"]["list"] if v["name"] == "datasource")
    assert current["current"] == {"selected": False, "text": "prom-eu-1", "value": "prom-eu-1"}
    assert "${" + source["name"] + "}" not in json.dumps(imported)


@pytest.mark.parametrize("name", sorted(FILES))
def test_every_query_of_our_series_selects_the_cluster(name: str) -> None:
    """Issue 39, item 5: the `cluster` variable (All: `.*`, which matches series without
    the label) narrows the sites and every panel that selects them."""
    document = load(name)
    variables = {v["name"]: v for v in document["templating"]["list"]}
    assert variables["cluster"]["allValue"] == ".*"
    assert variables["cluster"]["definition"] == "label_values(actionscheduler_up, cluster)"
    assert CLUSTER in variables["site"]["definition"]
    expressions = [t["expr"] for p in document["panels"] for t in p["targets"]]
    for expression in expressions:
        # A repeated panel's one site was picked from the cluster's sites.
        if 'site=~"$site"' in expression:
            assert expression.count(CLUSTER) == expression.count('site=~"$site"'), expression
    assert sum(CLUSTER in expression for expression in expressions) > len(expressions) // 2
