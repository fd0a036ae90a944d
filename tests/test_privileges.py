"""Least privilege: SELECT on the four tables is all the exporter needs, and its session
refuses to write even when the user could."""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from actionscheduler_exporter.config import SiteConfig
from actionscheduler_exporter.db.query_error import QueryError
from actionscheduler_exporter.db.session import Session
from testbed.mariadb import Server
from testbed.store import ActionSchedulerStore
from tests.conftest import Scrape
from tests.support.scenarios import assert_matches, killed_worker
from tests.support.truth import compute

README = Path(__file__).resolve().parent.parent / "README.md"
USER = f"as_exporter_test_{secrets.token_hex(3)}"  # another test run may share the server


@pytest.fixture
def select_only_user(mariadb: Server, database: str, store: ActionSchedulerStore) -> Iterator[str]:
    """The exact GRANT statements the README gives, run against the test database."""
    grants = re.findall(r"^GRANT SELECT ON [^\n]+;$", README.read_text(), flags=re.MULTILINE)
    assert len(grants) == 4, grants
    admin = mariadb.connect()
    with admin.cursor() as cursor:
        cursor.execute(f"CREATE USER '{USER}'@'%' IDENTIFIED BY 'exporter-pw'")
        for grant in grants:
            statement = (
                grant.rstrip(";")
                .replace("wordpress.", f"{database}.")
                .replace("'exporter'@'%'", f"'{USER}'@'%'")
            )
            cursor.execute(statement)
    try:
        yield USER
    finally:
        with admin.cursor() as cursor:
            cursor.execute(f"DROP USER IF EXISTS '{USER}'@'%'")
        admin.close()


def test_select_on_the_four_tables_is_enough(
    select_only_user: str,
    store: ActionSchedulerStore,
    scrape: Scrape,
    site: Callable[..., SiteConfig],
) -> None:
    killed_worker(store)
    (result,) = scrape(site(user=select_only_user, password="exporter-pw"))
    assert_matches(result, compute(store.connection))
    (auto,) = scrape(
        site(user=select_only_user, password="exporter-pw", table_prefix="auto", name="net")
    )
    assert auto.label == "net:wp_" and auto.up


def test_the_session_is_read_only_even_for_root(
    store: ActionSchedulerStore, site: Callable[..., SiteConfig]
) -> None:
    session = Session(site())
    try:
        with pytest.raises(QueryError) as raised:
            session.query(
                "INSERT INTO wp_actionscheduler_claims (date_created_gmt) VALUES (UTC_TIMESTAMP())"
            )
        assert "READ ONLY" in raised.value.message.upper()
        (row,) = session.query("SELECT COUNT(*) FROM wp_actionscheduler_claims")
        assert row[0] == 0
    finally:
        session.close()


def test_action_arguments_never_reach_the_metrics(
    store: ActionSchedulerStore, scrape: Scrape
) -> None:
    secret_args = ["customer@example.com", "phone:+44-7700-900123"]
    store.create("woocommerce_send_email", args=secret_args)
    action = store.create("woocommerce_send_email", args=secret_args)
    store.run_action(action, outcome=lambda hook: "SMTP refused")
    (result,) = scrape()
    text = repr(result.samples) + repr(result.problems)
    assert "customer@example.com" not in text
    assert "phone:" not in text
