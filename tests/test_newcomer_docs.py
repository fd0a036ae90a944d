"""Issue 39, item 9: what a newcomer reading the docs tripped on, held by tests."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from actionscheduler_exporter.metrics import catalog
from testbed.store import ActionSchedulerStore
from tests.support.helm_chart import ALL_ON, merged, render

ROOT = Path(__file__).resolve().parent.parent
RUNBOOKS = sorted((ROOT / "docs" / "runbooks").glob("*.md"))


def section(text: str, heading: str) -> str:
    return text.split(f"\n{heading}\n", 1)[1].split("\n## ", 1)[0]


def test_the_memory_bullet_is_under_sizing() -> None:
    operations = (ROOT / "docs" / "operations.md").read_text()
    assert "- **Memory.**" in section(operations, "## Sizing")
    assert "- **Memory.**" not in section(operations, "## The heavy tier on a read replica")


def test_metrics_md_names_the_series_without_a_site() -> None:
    opening = (ROOT / "docs" / "metrics.md").read_text().split("\n\n", 2)[1]
    assert "Every series carries" not in opening
    without_site = [m.name for m in catalog.ALL if "no `site`" in m.meaning]
    assert without_site
    for name in without_site:
        assert f"`{name}_info`" in opening or f"`{name}`" in opening, name
    assert "`process_*`" in opening


@pytest.mark.parametrize("page", RUNBOOKS, ids=lambda path: path.name)
def test_runbooks_name_no_fixed_prefix_nor_deployment_of_the_exporter(page: Path) -> None:
    text = page.read_text()
    assert "wp_actionscheduler" not in text
    assert not re.search(r"deploy/<(exporter|release)", text)


def test_the_runbooks_log_selector_finds_the_exporter_pods_in_both_modes() -> None:
    """A sharded install runs a StatefulSet: `deploy/<exporter>` found nothing there."""
    selectors = {
        selector
        for page in RUNBOOKS
        for selector in re.findall(r"logs\s+-l\s+(\S+)", page.read_text())
    }
    assert len(selectors) == 1
    [selector] = selectors
    wanted = dict(pair.split("=") for pair in selector.replace("<release>", "shop").split(","))
    for values, kind in (
        (ALL_ON, "Deployment"),
        (merged(ALL_ON, **{"sharding": {"enabled": True, "shards": 3}}), "StatefulSet"),
    ):
        pods = [
            (o["kind"], o["spec"]["template"]["metadata"]["labels"])
            for o in render(values)
            if o["kind"] in ("Deployment", "StatefulSet")
        ]
        chosen = [k for k, labels in pods if wanted.items() <= labels.items()]
        # The exporter's pods, not the workers'.
        assert chosen == [kind], (kind, pods)


def test_the_install_section_says_what_is_published() -> None:
    """The Install section described a PyPI package, an image and an OCI chart as if they
    existed; until a release is tagged it says so and installs from a checkout."""
    install = section((ROOT / "README.md").read_text(), "## Install")
    released = re.findall(r"^## \[?v?\d+\.\d+\.\d+", (ROOT / "CHANGELOG.md").read_text(), re.M)
    if not released:
        assert "Nothing is published yet" in install
        checkout = install.split("Once released", 1)[0]
        assert "pipx install ." in checkout and "oci://" not in checkout
        assert "docker build -t actionscheduler-exporter ." in checkout
        assert (ROOT / "Dockerfile").is_file()
        chart = re.search(r"helm install shop-queue (\S+)", checkout)
        assert chart and (ROOT / chart.group(1) / "Chart.yaml").is_file()
    values = yaml.safe_load(
        (ROOT / "helm" / "actionscheduler-exporter" / "values.yaml").read_text()
    )
    for key in re.findall(r"--set\s+([\w.]+)=", install):
        node: object = values
        for part in key.split("."):
            assert isinstance(node, dict) and part in node, key
            node = node[part]


PLACEHOLDERS = {"<hook>": "woocommerce_deliver_webhook_async"}


def runbook_statements(prefix: str) -> list[tuple[str, str]]:
    """Every SQL statement of the runbooks, with the site's prefix and the other
    placeholders filled as a reader fills them."""
    found = []
    for page in RUNBOOKS:
        for block in re.findall(r"```sql\n(.*?)```", page.read_text(), re.DOTALL):
            text = block.replace("<prefix>", prefix)
            for placeholder, value in PLACEHOLDERS.items():
                text = text.replace(placeholder, value)
            assert not re.search(r"<[a-z_-]+>", text), (page.name, text)
            found += [(page.name, s.strip()) for s in text.split(";") if s.strip()]
    return found


def test_the_runbooks_sql_runs_on_a_site_of_any_prefix(
    store_factory: Callable[[str], ActionSchedulerStore],
) -> None:
    """The runbooks' queries, with a multisite's second prefix filled in, run read-only
    against real Action Scheduler tables of that prefix (MariaDB)."""
    store = store_factory("shop_2_")
    store.create("woocommerce_deliver_webhook_async", group="webhooks")
    statements = runbook_statements("shop_2_")
    assert len(statements) >= len([p for p in RUNBOOKS if "```sql" in p.read_text()])
    with store.connection.cursor() as cursor:
        for page, statement in statements:
            assert statement.lstrip().upper().startswith("SELECT"), (page, statement)
            cursor.execute(statement)
            cursor.fetchall()
