"""What a real store's database can throw at the exporter (issue 13): huge log messages,
statuses in another case, passwords outside latin-1, a user allowed one connection."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator

import pytest

from actionscheduler_exporter import check
from actionscheduler_exporter.config import ExporterConfig, SiteConfig
from actionscheduler_exporter.metrics import catalog
from actionscheduler_exporter.scrape.coordinator import Coordinator
from testbed.mariadb import Server
from testbed.proxy import SlowProxy
from testbed.store import ActionSchedulerStore
from tests.conftest import Scrape

# A message as long as the log column holds (TEXT: 64 KB), as a PHP exception can log.
HUGE_MESSAGE = "action failed via WP CLI: " + "x" * 65_000


@pytest.fixture
def make_user(mariadb: Server, database: str) -> Iterator[Callable[..., str]]:
    """A database user of the test's own with SELECT on the test database."""
    admin = mariadb.connect()
    made: list[str] = []

    def make(password: str, *options: str) -> str:
        user = f"as_{secrets.token_hex(4)}"
        with admin.cursor() as cursor:
            cursor.execute(f"CREATE USER '{user}'@'%%' IDENTIFIED BY %s {' '.join(options)}",
                           (password,))  # fmt: skip
            cursor.execute(f"GRANT SELECT ON {database}.* TO '{user}'@'%'")
        made.append(user)
        return user

    yield make
    with admin.cursor() as cursor:
        for user in made:
            cursor.execute(f"DROP USER IF EXISTS '{user}'@'%'")
    admin.close()


def test_log_message_size_does_not_drive_what_a_scrape_reads(
    store: ActionSchedulerStore, mariadb: Server, site: Callable[..., SiteConfig]
) -> None:
    """Item 2: the follower read every message whole (65 KB each) to match its first words."""
    proxy = SlowProxy(mariadb.host, mariadb.port, delay=0.0)
    coordinator = Coordinator(ExporterConfig(sites=(site(host="127.0.0.1", port=proxy.port),)))
    try:
        coordinator.scrape()  # the cursor starts at the newest row
        for index in range(300):
            action = store.create("import_products", args=[index])
            store.log(action, HUGE_MESSAGE)
        before = proxy.bytes_to_client
        (result,) = coordinator.scrape()
        read = proxy.bytes_to_client - before
    finally:
        coordinator.close()
        proxy.close()
    assert result.up
    failed = result.value(catalog.FAILED.name, hook="import_products", group="",
                          reason="exception")  # fmt: skip
    assert failed == 300
    assert read < 2_000_000, read  # the messages alone are 19.5 MB


def test_a_status_in_another_case_is_counted_as_action_scheduler_counts_it(
    store: ActionSchedulerStore, scrape: Scrape, site: Callable[..., SiteConfig]
) -> None:
    """Item 10: GROUP BY returned 'PENDING' for the case-insensitive group, so the five
    real pending actions were reported as unknown."""
    store.create("woocommerce_deliver_webhook_async", status="PENDING")
    for index in range(5):
        store.create("woocommerce_deliver_webhook_async", args=[index])
    (result,) = scrape(site(heavy_interval=0))
    assert result.value(catalog.ACTIONS.name, status="pending") == 6
    assert result.value(catalog.ACTIONS.name, status="unknown") is None


@pytest.mark.parametrize("first", [True, False])
def test_a_status_with_a_trailing_space_is_the_status_action_scheduler_sees(
    store: ActionSchedulerStore, scrape: Scrape, site: Callable[..., SiteConfig], first: bool
) -> None:
    """Issue 25, item 6: 'pending ' equals 'pending' under MariaDB's PAD SPACE collations,
    and Action Scheduler claims it; one such row among 14 pending ones gave pending 2 and
    unknown 12 (the group's representative value decided). First in its chunk or not."""
    if first:
        store.create("woocommerce_deliver_webhook_async", status="pending ")
    for index in range(13):
        store.create("woocommerce_deliver_webhook_async", args=[index])
    if not first:
        store.create("woocommerce_deliver_webhook_async", status="pending ")
    (result,) = scrape(site(heavy_interval=0))
    assert result.value(catalog.ACTIONS.name, status="pending") == 14
    assert result.value(catalog.ACTIONS.name, status="unknown") is None


@pytest.mark.parametrize("password", ["Zq7p€ss", "Zq7pässwörd"])
def test_a_password_outside_latin1_connects(
    store: ActionSchedulerStore,
    scrape: Scrape,
    site: Callable[..., SiteConfig],
    make_user: Callable[..., str],
    password: str,
) -> None:
    """Item 7: PyMySQL sent a str password as latin-1: '€' failed every scrape, and 'ä'
    was sent as another byte than the mariadb client sends."""
    user = make_user(password)
    (result,) = scrape(site(user=user, password=password))
    assert result.up, result.problems


def test_a_user_allowed_one_connection_is_told_why_the_heavy_tier_fails(
    store: ActionSchedulerStore,
    site: Callable[..., SiteConfig],
    make_user: Callable[..., str],
) -> None:
    """Item 13 (also): with MAX_USER_CONNECTIONS 1 the heavy tier's second connection is
    refused at every refresh while up stays 1: the metrics and `check` say so."""
    user = make_user("one-connection", "WITH MAX_USER_CONNECTIONS 1")
    coordinator = Coordinator(ExporterConfig(sites=(site(user=user, password="one-connection"),)))
    try:
        (result,) = coordinator.scrape()
    finally:
        coordinator.close()
    assert result.up
    assert result.value(catalog.COLLECTOR_SUCCESS.name, collector="status") == 0
    assert (result.value(catalog.ERRORS.name, kind="connect") or 0) >= 1
    report = check.report([result])
    assert "MAX_USER_CONNECTIONS" in report and "heavy_interval: 0" in report
