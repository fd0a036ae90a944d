"""`make demo`: a simulated store with a live queue, and the exporter serving its metrics.

Two sites in one database (a WooCommerce shop `wp_` and a network site `wp_2_`), found
by `table_prefix: auto`. Producers enqueue webhooks, e-mails and renewals; workers claim,
run, complete and sometimes fail them exactly as Action Scheduler writes its rows; now
and then a worker is killed mid-batch. The second site has too few workers, so its
backlog grows.

It uses the MariaDB that `--dsn` names, else one on 127.0.0.1:3306 that root may log
into without a password, else a private server it starts in `.demo/` (Debian's
mariadb-server, installed when missing). It creates a database of its own, with a
name no one else uses, and drops that one at exit: never another. Ctrl-C (or SIGTERM)
stops everything it started.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import random
import secrets
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pymysql
import uvicorn

from actionscheduler_exporter.config import ExporterConfig, SiteConfig
from actionscheduler_exporter.logs import configure as configure_logging
from actionscheduler_exporter.scrape.coordinator import Coordinator
from actionscheduler_exporter.web.app import create_app
from testbed.mariadb import MariaDBUnavailableError, Server, ensure_server, from_dsn
from testbed.store import ActionSchedulerStore

# A database of the demo's own: created at start, dropped at exit.
DATABASE = f"as_demo_{secrets.token_hex(4)}"
HOOKS = (
    ("woocommerce_deliver_webhook_async", "woocommerce-webhooks", 0.02),
    ("woocommerce_scheduled_subscription_payment", "woocommerce-subscriptions", 0.05),
    ("woocommerce_send_queued_transactional_email", "woocommerce-emails", 0.01),
    ("wc_admin_import_orders", "wc-admin-data", 0.1),
    ("mailchimp_woocommerce_sync_order", "mailchimp", 0.3),
)
log = logging.getLogger("demo")


def quietly(work: Callable[..., None]) -> Callable[..., None]:
    """A demo thread that ends quietly when the database goes away at exit."""

    def run(*args: object) -> None:
        with contextlib.suppress(pymysql.err.Error, OSError):
            work(*args)

    return run


def producer(server: Server, prefix: str, per_second: float, stop: threading.Event) -> None:
    store = ActionSchedulerStore(server.connect(DATABASE), prefix)
    rng = random.Random(prefix)
    while not stop.is_set():
        hook, group, _ = rng.choice(HOOKS)
        store.create(hook, group=group, args=[rng.randrange(10_000)])
        stop.wait(rng.expovariate(per_second))


def worker(server: Server, prefix: str, batch_size: int, stop: threading.Event) -> None:
    store = ActionSchedulerStore(server.connect(DATABASE), prefix)
    rng = random.Random()
    failure_rates = {hook: rate for hook, _, rate in HOOKS}
    while not stop.is_set():
        store.cleaner_reset()
        store.cleaner_mark_failed()
        if rng.random() < 0.02:
            log.info("killing a worker mid-batch on %s", prefix)
            store.kill_worker_mid_batch(batch_size, finished=rng.randrange(batch_size))
            continue
        claim = store.stake_claim(batch_size)
        for action_id in claim.action_ids:
            store.start(action_id)
            stop.wait(rng.uniform(0.05, 0.4))
            hook = store.hook_of(action_id)
            if rng.random() < failure_rates.get(hook, 0.05):
                store.fail(action_id, "Supplier API unreachable (HTTP 503)")
            else:
                store.complete(action_id)
        store.release_claim(claim.claim_id)
        if not claim.action_ids:
            stop.wait(2)


def prepare(server: Server) -> None:
    admin = server.connect()
    with admin.cursor() as cursor:
        cursor.execute(f"CREATE DATABASE {DATABASE} CHARACTER SET utf8mb4")
    admin.close()
    for prefix in ("wp_", "wp_2_"):
        store = ActionSchedulerStore(server.connect(DATABASE), prefix)
        store.create_tables()
        with store.seconds_ago(3 * 86400):  # some history, so every panel has data
            for hook, group, _ in HOOKS:
                store.run_action(store.create(hook, group=group))


def drop(server: Server) -> None:
    """The demo's own database, and only it."""
    with contextlib.suppress(pymysql.err.Error, OSError):
        admin = server.connect()
        with admin.cursor() as cursor:
            cursor.execute(f"DROP DATABASE IF EXISTS {DATABASE}")
        admin.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=9966)
    parser.add_argument("--dsn", help="mysql://user:password@host:port of a server to use")
    args = parser.parse_args()
    configure_logging("info")
    # A stop by SIGTERM (`timeout`, a service manager) ends as Ctrl-C does, its database
    # dropped: uvicorn drains, then raises the signal again with the handler it found,
    # and SIGTERM's default ended the process before the `finally` below.
    signal.signal(signal.SIGTERM, signal.default_int_handler)

    try:
        server = (
            from_dsn(args.dsn) if args.dsn else ensure_server(Path(".demo").resolve() / "mariadb")
        )
        prepare(server)
    except (MariaDBUnavailableError, pymysql.err.Error, OSError) as error:
        print(f"demo: no MariaDB to run on: {error}", file=sys.stderr)
        return 1
    stop = threading.Event()
    threads = [
        threading.Thread(target=quietly(producer), args=(server, "wp_", 4.0, stop)),
        threading.Thread(target=quietly(worker), args=(server, "wp_", 10, stop)),
        threading.Thread(target=quietly(worker), args=(server, "wp_", 10, stop)),
        threading.Thread(target=quietly(producer), args=(server, "wp_2_", 3.0, stop)),
        threading.Thread(target=quietly(worker), args=(server, "wp_2_", 5, stop)),
    ]
    for thread in threads:
        thread.daemon = True
        thread.start()

    site = SiteConfig(
        name="demo",
        host=server.host,
        port=server.port,
        user=server.user,
        password=server.password,
        database=DATABASE,
        table_prefix="auto",
        # A small store: its totals can be refreshed often, in the background.
        concurrent_batches_limit=2,
        heavy_interval=15.0,
    )
    coordinator = Coordinator(ExporterConfig(sites=(site,)))
    log.info("the demo's database is %s on %s:%d", DATABASE, server.host, server.port)
    print(
        f"\nThe exporter serves http://127.0.0.1:{args.port}/metrics "
        f"(landing page http://127.0.0.1:{args.port}/). Ctrl-C stops the demo.\n",
        flush=True,
    )
    try:
        uvicorn.run(
            create_app(coordinator),
            host="127.0.0.1",
            port=args.port,
            log_config=None,
            access_log=False,
        )
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=5)
        coordinator.close()
        drop(server)
        if server.process is not None:  # a private server of the demo's own
            server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
