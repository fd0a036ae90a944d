"""The same numbers on a server with MySQL 8's defaults (`sql_mode` with ONLY_FULL_GROUP_BY
and the strict modes, `group_concat_max_len` 1,024) as on a default MariaDB, and a server
whose `group_concat_max_len` would cut the packed table statistics short."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pymysql
import pytest

from actionscheduler_exporter.config import ExporterConfig, SiteConfig
from actionscheduler_exporter.scrape.coordinator import Coordinator
from testbed.mariadb import Server
from testbed.store import ActionSchedulerStore
from tests.conftest import Scrape
from tests.mysql8_defaults.conftest import MYSQL8_SQL_MODE
from tests.support.scenarios import assert_matches
from tests.support.truth import compute
from tests.test_queue_states import HISTORIES

# A subsite prefix whose table names are 64 characters, MySQL's longest.
LONG_PREFIX = "wp_" + "n" * (64 - len("wp_") - len("actionscheduler_actions") - 4)


def test_the_server_has_mysql8s_defaults(mariadb: Server) -> None:
    connection = mariadb.connect()
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT @@GLOBAL.sql_mode, @@GLOBAL.group_concat_max_len")
            sql_mode, group_concat = cursor.fetchone()
    finally:
        connection.close()
    assert set(sql_mode.split(",")) == set(MYSQL8_SQL_MODE.split(","))
    assert group_concat == 1024


@pytest.mark.parametrize("history", HISTORIES)
def test_metrics_match_ground_truth_with_mysql8s_defaults(
    history: str, store: ActionSchedulerStore, scrape: Scrape
) -> None:
    HISTORIES[history](store)
    (result,) = scrape()
    assert_matches(result, compute(store.connection))


def test_sixty_subsites_with_64_character_table_names(
    store_factory: Callable[[str], ActionSchedulerStore], scrape: Scrape, site: Any
) -> None:
    stores = {f"{LONG_PREFIX}{index:02d}_": None for index in range(60)}
    for prefix in stores:
        made = store_factory(prefix)
        made.create("woocommerce_deliver_webhook_async", group="webhooks")
    results = {result.label: result for result in scrape(site(table_prefix="auto"))}
    assert len(results) == 60
    for prefix in stores:
        result = results[f"shop:{prefix}"]
        assert result.up, result.problems
        assert result.value("actionscheduler_due_actions", claim="unclaimed") == 1
        assert result.value("actionscheduler_table_exists", table="logs") == 1


def test_a_tiny_group_concat_max_len_cuts_nothing_and_no_site_loses_its_series(
    mariadb: Server,
    connect: Callable[[], pymysql.connections.Connection[Any]],
    store_factory: Callable[[str], ActionSchedulerStore],
    site: Callable[..., SiteConfig],
) -> None:
    """group_concat_max_len 4 cut the packed statistics to "wp_a": /metrics answered 500
    and a second site on the same server lost its series. The session sets what the
    statements rely on."""
    store_factory("wp_").create("woocommerce_send_email")
    store_factory("wp_2_").create("woocommerce_send_email")
    admin = mariadb.connect()
    with admin.cursor() as cursor:
        cursor.execute("SET GLOBAL group_concat_max_len = 4")
    coordinator = Coordinator(
        ExporterConfig(sites=(site(name="one"), site(name="two", table_prefix="wp_2_")))
    )
    try:
        results = coordinator.scrape(10)
    finally:
        coordinator.close()
        with admin.cursor() as cursor:
            cursor.execute("SET GLOBAL group_concat_max_len = 1024")
        admin.close()
    assert [result.label for result in results] == ["one", "two"]
    for result in results:
        assert result.up, result.problems
        assert result.value("actionscheduler_table_exists", table="actions") == 1
        assert result.value("actionscheduler_exporter_collector_success", collector="tables") == 1
        assert result.value("actionscheduler_due_actions", claim="unclaimed") == 1
