"""The connection pool's handling of idle connections and of its slots, without a server."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from actionscheduler_exporter.config.model import SiteConfig
from actionscheduler_exporter.db.pool import MAX_IDLE_SECONDS, Pooled, ServerPool, login_of
from actionscheduler_exporter.db.query_error import QueryError
from actionscheduler_exporter.db.slots import FairSlots


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


# The connection slots: handed out in the order they were asked for. ------------------


def _until(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    """Waits for `condition` (another thread's progress), failing after `timeout`."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the condition did not come true"
        time.sleep(0.001)


def _ask_in_thread(slots: FairSlots, got: list[str], name: str) -> threading.Thread:
    """A thread that takes a slot (noting its name), and gives it back at once."""

    def take() -> None:
        if slots.acquire(30.0):
            got.append(name)
            slots.release()

    thread = threading.Thread(target=take, daemon=True)
    thread.start()
    return thread


def test_a_slot_given_back_goes_to_the_one_waiting_not_to_the_one_giving_it() -> None:
    """The giver asking again at once does not take it first: with a semaphore, the
    server's round threads kept their slots while a round that had asked before them
    waited until its query timeout, and its site was reported down."""
    slots = FairSlots(1)
    assert slots.acquire(0.0)
    waiter_has_it = threading.Event()
    done = threading.Event()

    def wait_for_slot() -> None:
        assert slots.acquire(30.0)
        waiter_has_it.set()
        done.wait(30.0)
        slots.release()

    waiter = threading.Thread(target=wait_for_slot, daemon=True)
    waiter.start()
    _until(lambda: slots.waiting == 1)
    slots.release()
    assert not slots.acquire(0.0)  # it is the waiter's now, whether it has run or not
    assert waiter_has_it.wait(30.0)
    done.set()
    waiter.join(30.0)
    assert slots.acquire(0.0)


def test_waiting_ones_get_their_slots_in_the_order_they_asked() -> None:
    slots = FairSlots(1)
    assert slots.acquire(0.0)
    got: list[str] = []
    threads = []
    for number, name in enumerate(("first", "second", "third"), start=1):
        threads.append(_ask_in_thread(slots, got, name))
        _until(lambda number=number: slots.waiting == number)  # type: ignore[misc]
    slots.release()
    for thread in threads:
        thread.join(30.0)
    assert got == ["first", "second", "third"]
    assert slots.acquire(0.0)  # the last one gave it back to the free ones


def test_a_wait_that_runs_out_leaves_the_line() -> None:
    slots = FairSlots(1)
    assert slots.acquire(0.0)
    assert not slots.acquire(0.01)
    assert slots.waiting == 0
    slots.release()  # nobody waits: the slot is free again
    assert slots.acquire(0.0)


def test_more_slots_than_taken_cannot_be_given_back() -> None:
    slots = FairSlots(2)
    assert slots.acquire(0.0)
    slots.release()
    with pytest.raises(ValueError, match="not taken"):
        slots.release()


def test_the_pool_hands_a_connection_to_the_site_that_waited_longest() -> None:
    """Through the pool: a site whose round waits is not overtaken by the one that gives
    a connection back and asks again."""
    site = SiteConfig(name="shop", database="wp")
    pool = ServerPool("db:3306", 1)
    holder = pool.acquire(site, 1.0, lambda: pooled(site))
    taken: list[Pooled] = []
    waiter = threading.Thread(
        target=lambda: taken.append(pool.acquire(site, 30.0, lambda: pooled(site))), daemon=True
    )
    waiter.start()
    _until(lambda: pool._slots.waiting == 1)
    pool.release(holder)
    with pytest.raises(QueryError, match="stayed busy"):
        pool.acquire(site, 0.0, lambda: pooled(site))
    waiter.join(30.0)
    assert taken and taken[0] is holder  # the connection given back, reused


def _wait_in_thread(slots: FairSlots, got: list[str], name: str, background: bool) -> None:
    """A thread that waits for a slot and notes its name, keeping the slot; returns once
    it waits (or has it)."""
    before = slots.waiting

    def take() -> None:
        if slots.acquire(30.0, background=background):
            got.append(name)

    threading.Thread(target=take, daemon=True).start()
    _until(lambda: slots.waiting > before or got[-1:] == [name])


def test_a_slot_given_back_goes_to_a_waiting_round_before_a_refresh_that_asked_first() -> None:
    slots = FairSlots(2, patience=3600.0)
    assert slots.acquire(0.0) and slots.acquire(0.0)
    got: list[str] = []
    _wait_in_thread(slots, got, "refresh", background=True)
    _wait_in_thread(slots, got, "round", background=False)
    slots.release()
    _until(lambda: got == ["round"])
    slots.release()  # the rounds hold one of two now: none to spare
    _until(lambda: slots.waiting == 1)
    assert got == ["round"]


def test_a_refresh_waits_while_the_rounds_spare_no_slot() -> None:
    """Three slots, the rounds holding two: the third is free, but a refresh taking it
    would leave the rounds none to turn over on; it has it once a round gives one back."""
    slots = FairSlots(3, patience=3600.0)
    assert slots.acquire(0.0) and slots.acquire(0.0)
    assert not slots.acquire(0.0, background=True)
    got: list[str] = []
    _wait_in_thread(slots, got, "refresh", background=True)
    assert got == []
    slots.release()
    _until(lambda: got == ["refresh"])
    assert slots.acquire(0.0)  # the free one, still the rounds'
    slots.release(background=True)


def test_a_refresh_that_waited_its_patience_takes_the_next_slot_given_back() -> None:
    """Scrapes back to back keep the rounds on every slot: a refresh that has waited its
    patience takes the next slot given back that no round waits for."""
    slots = FairSlots(2, patience=0.0)
    assert slots.acquire(0.0) and slots.acquire(0.0)
    got: list[str] = []
    _wait_in_thread(slots, got, "refresh", background=True)
    slots.release()
    _until(lambda: got == ["refresh"])
    assert not slots.acquire(0.0)  # the round that gave it back asks again: it waits


def test_a_refresh_takes_a_slot_when_the_rounds_hold_none() -> None:
    slots = FairSlots(1)
    assert slots.acquire(0.0, background=True)
    assert not slots.acquire(0.0)  # taken
    slots.release(background=True)
    assert slots.acquire(0.0)


def test_the_pool_gives_a_refreshs_slot_back_as_a_refreshs() -> None:
    """A round's slot given back that no round took would fail (`ValueError`)."""
    site = SiteConfig(name="shop", database="wp")
    pool = ServerPool("db:3306", 1)
    refresh = pool.acquire(site, 1.0, lambda: pooled(site), background=True)
    assert refresh.background
    pool.release(refresh)
    taken = pool.acquire(site, 1.0, lambda: pooled(site))
    assert taken is refresh and not taken.background
    pool.discard(taken)
    refresh = pool.acquire(site, 1.0, lambda: pooled(site), background=True)
    pool.discard(refresh)
    assert pool.acquire(site, 0.0, lambda: pooled(site))
