"""CONTRIBUTING.md's recipe "add a metric family", walked in a copy of the repository
against a real MariaDB: a catalog entry, a collector and its line in `site_sources` are
all it takes for the family to be documented, reserved, emitted with its help, and caught
by the docs test. (tests/unit/test_recipe.py walks every step in the fast tier.)"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from actionscheduler_exporter.config import SiteConfig
from testbed.store import ActionSchedulerStore
from tests.unit.test_recipe import CATALOG_ENTRY

ROOT = Path(__file__).resolve().parent.parent

COLLECTOR = """
from collections.abc import Iterator

from actionscheduler_exporter.sources.database import Collector, DatabaseContext
from actionscheduler_exporter.metrics import catalog
from actionscheduler_exporter.metrics.samples import Sample, sample


class GroupRowsCollector(Collector):
    name = "group_rows"
    metrics = (catalog.GROUP_ROWS,)

    def read(self, context: DatabaseContext) -> Iterator[Sample]:
        (rows,) = context.one(f"SELECT COUNT(*) FROM {context.tables.groups}")
        yield sample(catalog.GROUP_ROWS, rows, recipe="example")
"""
CHECK = """
import sys
from actionscheduler_exporter.config import ExporterConfig, SiteConfig
from actionscheduler_exporter.exposition.render import render
from actionscheduler_exporter.metrics import catalog
from actionscheduler_exporter.scrape.coordinator import Coordinator

assert catalog.GROUP_ROWS in catalog.ALL
assert "recipe" in catalog.RESERVED_LABELS
host, port, user, password, database = sys.argv[1:]
site = SiteConfig(name="shop", host=host, port=int(port), user=user, password=password,
                  database=database)
coordinator = Coordinator(ExporterConfig(sites=(site,)))
body, _ = render(coordinator.scrape(), None)
coordinator.close()
print(body.decode())
"""


def run(copy: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], cwd=copy, capture_output=True, text=True, timeout=120
    )


def test_adding_a_family_takes_the_catalog_a_collector_and_its_line(
    tmp_path: Path, store: ActionSchedulerStore, site: Callable[..., SiteConfig]
) -> None:
    copy = tmp_path / "repo"
    for part in ("actionscheduler_exporter", "docs"):
        shutil.copytree(ROOT / part, copy / part, ignore=shutil.ignore_patterns("__pycache__"))
    store.create("woocommerce_deliver_webhook_async", group="webhooks")
    store.create("woocommerce_send_email", group="emails")
    with store.connection.cursor() as cursor:
        cursor.execute(f"SELECT COUNT(*) FROM {store.groups}")
        (groups,) = cursor.fetchone()

    # 1. The catalog entry, before the exporter's own families (it is read from the top).
    catalog = copy / "actionscheduler_exporter" / "metrics" / "catalog.py"
    text = catalog.read_text()
    anchor = "# The exporter itself ----"
    catalog.write_text(text.replace(anchor, CATALOG_ENTRY.lstrip() + "\n" + anchor, 1))
    # The docs test sees the new family before the tables are regenerated...
    assert run(copy, "-m", "actionscheduler_exporter.metrics.docs", "--check").returncode == 1
    # ...and not after.
    assert run(copy, "-m", "actionscheduler_exporter.metrics.docs").returncode == 0
    assert run(copy, "-m", "actionscheduler_exporter.metrics.docs", "--check").returncode == 0
    assert (
        "| `actionscheduler_group_rows` | gauge | `recipe` | hot |"
        in (copy / "docs" / "metrics.md").read_text()
    )

    # 2. The collector, and its line in the list.
    (copy / "actionscheduler_exporter" / "collectors" / "group_rows.py").write_text(COLLECTOR)
    listing = copy / "actionscheduler_exporter" / "collectors" / "__init__.py"
    listing.write_text(
        listing.read_text()
        .replace(
            "from actionscheduler_exporter.collectors.status import StatusCollector\n",
            "from actionscheduler_exporter.collectors.status import StatusCollector\n"
            "from actionscheduler_exporter.collectors.group_rows import GroupRowsCollector\n",
        )
        .replace("        TablesCollector(),\n", "        TablesCollector(),\n"
                 "        GroupRowsCollector(),\n")
    )  # fmt: skip

    config = site()
    checked = run(copy, "-c", CHECK, config.host, str(config.port), config.user,
                  config.password, config.database)  # fmt: skip
    assert checked.returncode == 0, checked.stderr
    exposition = checked.stdout
    assert "# HELP actionscheduler_group_rows Rows in the groups table." in exposition
    assert f'actionscheduler_group_rows{{site="shop",recipe="example"}} {groups:.1f}' in exposition
    assert 'actionscheduler_exporter_collector_success{site="shop",collector="group_rows"} 1.0' in (
        exposition
    )
