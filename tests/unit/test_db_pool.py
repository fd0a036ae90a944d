"""The connection pool's handling of idle connections, without a server."""

from __future__ import annotations

import time
from typing import Any

from actionscheduler_exporter.config.model import SiteConfig
from actionscheduler_exporter.db.pool import MAX_IDLE_SECONDS, Pooled, ServerPool, login_of


class Connection:
    """Stands in for a PyMySQL connection object: the pool only closes it here."""

    def __init__(self) -> None:
        self.closed = False

    def close(self) -> None:
        self.closed = True


def pooled(site: SiteConfig) -> Pooled:
    connection: Any = Connection()
    return Pooled(connection, login_of(site), site.query_timeout)


def closed(connection: Pooled) -> bool:
    stand_in: Any = connection.connection
    return bool(stand_in.closed)


def test_an_idle_connection_is_reused_until_it_has_idled_too_long() -> None:
    site = SiteConfig(name="shop", database="wp")
    pool = ServerPool("db:3306", 2)
    first = pooled(site)
    pool.release(pool.acquire(site, 1.0, lambda: first))
    again = pool.acquire(site, 1.0, lambda: pooled(site))
    assert again is first and again.reused  # taken from the idle ones
    pool.release(again)
    first.idle_since = time.monotonic() - MAX_IDLE_SECONDS - 1  # a load balancer forgot it
    fresh = pool.acquire(site, 1.0, lambda: pooled(site))
    assert fresh is not first and not fresh.reused
    assert closed(first)


def test_close_idle_closes_every_idle_connection() -> None:
    site = SiteConfig(name="shop", database="wp")
    pool = ServerPool("db:3306", 3)
    held = [pool.acquire(site, 1.0, lambda: pooled(site)) for _ in range(3)]
    for connection in held:
        pool.release(connection)
    pool.close_idle()
    assert all(closed(connection) for connection in held)
    assert pool.open_connections() == 0


def test_a_connection_handed_back_after_the_pool_closed_is_closed() -> None:
    """A heavy refresh still running when the exporter stops hands its connection back
    after the pool closed: it is closed, not kept open for no one."""
    site = SiteConfig(name="shop", database="wp")
    pool = ServerPool("db:3306", 2)
    running = pool.acquire(site, 1.0, lambda: pooled(site))
    pool.close()
    pool.release(running)
    assert closed(running)
    assert pool.open_connections() == 0


def test_the_most_recently_returned_connection_of_the_login_is_taken() -> None:
    """Of the idle connections, the last one handed back with the site's login is taken
    (the others stay idle, in their order); another login's is left alone."""
    site = SiteConfig(name="shop", database="wp")
    other = SiteConfig(name="other", database="wp", user="someone-else")
    pool = ServerPool("db:3306", 4)
    older = pool.acquire(site, 1.0, lambda: pooled(site))
    newer = pool.acquire(site, 1.0, lambda: pooled(site))
    stranger = pool.acquire(other, 1.0, lambda: pooled(other))
    for connection in (older, newer, stranger):
        pool.release(connection)
    assert pool.acquire(site, 1.0, lambda: pooled(site)) is newer
    assert pool.acquire(site, 1.0, lambda: pooled(site)) is older
    assert pool.idle_connections() == [stranger] and not closed(stranger)
    fresh = pool.acquire(site, 1.0, lambda: pooled(site))
    assert fresh not in (older, newer, stranger) and not fresh.reused


def test_a_full_pool_lends_a_connection_of_the_login_whatever_its_bound() -> None:
    """The heavy tier's refreshes (a longer query timeout) borrow the rounds' idle
    connections when the pool is full, and set their own bound, instead of closing one
    to open their own (which the next round did the other way round: hundreds of
    connections opened a minute); of the login's idle ones, one already bound as the
    site needs is taken first."""
    rounds = SiteConfig(name="shop", database="wp", query_timeout=5.0)
    heavy = SiteConfig(name="shop", database="wp", query_timeout=60.0)
    pool = ServerPool("db:3306", 2)
    bound_for_heavy = pool.acquire(heavy, 1.0, lambda: pooled(heavy))
    bound_for_rounds = pool.acquire(rounds, 1.0, lambda: pooled(rounds))
    pool.release(bound_for_heavy)
    pool.release(bound_for_rounds)
    assert pool.acquire(heavy, 1.0, lambda: pooled(heavy)) is bound_for_heavy
    other = pool.acquire(heavy, 1.0, lambda: pooled(heavy))
    assert other is bound_for_rounds and other.reused  # to be bound again, not replaced
    assert not closed(bound_for_rounds) and pool.open_connections() == 2


def test_a_pool_with_room_opens_a_connection_of_the_bound_the_site_needs() -> None:
    """While the pool has room, each tier keeps connections of its own bound: a round
    sends no statement to set its timeout again after a refresh."""
    rounds = SiteConfig(name="shop", database="wp", query_timeout=5.0)
    heavy = SiteConfig(name="shop", database="wp", query_timeout=60.0)
    pool = ServerPool("db:3306", 2)
    round_connection = pool.acquire(rounds, 1.0, lambda: pooled(rounds))
    pool.release(round_connection)
    refresh_connection = pool.acquire(heavy, 1.0, lambda: pooled(heavy))
    assert refresh_connection is not round_connection and not refresh_connection.reused
    assert pool.idle_connections() == [round_connection] and not closed(round_connection)
    pool.release(refresh_connection)
    assert pool.acquire(rounds, 1.0, lambda: pooled(rounds)) is round_connection
