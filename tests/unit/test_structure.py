"""Reading a translated action log by the place of each row
(actionscheduler_exporter/collectors/log_events/structure.py)."""

from __future__ import annotations

from actionscheduler_exporter.collectors.log_events.classify import Event, Kind
from actionscheduler_exporter.collectors.log_events.structure import (
    LoggedRow,
    RunnerContexts,
    events_by_place,
)

CREATED = "Aktion erstellt"


def log(*messages: str) -> list[LoggedRow]:
    return [LoggedRow(index, message) for index, message in enumerate(messages, start=1)]


def test_start_end_and_stop_of_a_recurring_action() -> None:
    rows = log(
        CREATED,
        "Aktion gestartet über WP CLI",
        "Aktion fehlgeschlagen über WP CLI: Lieferant nicht erreichbar",
        "Diese Aktion scheint dauerhaft fehlzuschlagen.",
    )
    events, learned = events_by_place(rows, "failed", True, RunnerContexts())
    assert learned
    assert events == {
        2: Event(Kind.STARTED, runner="WP CLI"),
        3: Event(Kind.FAILED, "unknown"),
        4: Event(Kind.STOPPED, "unknown"),
    }


def test_a_single_action_has_no_stop_and_a_completion_ends_with_its_runner() -> None:
    rows = log(CREATED, "Aktion gestartet über WP Cron", "Aktion abgeschlossen über WP Cron")
    events, _ = events_by_place(rows, "complete", False, RunnerContexts())
    assert events == {2: Event(Kind.STARTED, runner="WP Cron"), 3: Event(Kind.COMPLETED)}


def test_an_ignored_run_of_a_canceled_action_is_not_a_start() -> None:
    rows = log(CREATED, "Aktion abgebrochen", "Aktion ignoriert über WP CLI")
    events, _ = events_by_place(rows, "canceled", False, RunnerContexts())
    # one cancellation, counted on the latest row (its status tells it), and no start
    assert list(events.values()) == [Event(Kind.CANCELED)]
    events, _ = events_by_place(rows[:2], "canceled", False, RunnerContexts())
    assert events == {2: Event(Kind.CANCELED)}


def test_a_plugins_own_runner_is_known_by_the_learned_start_words() -> None:
    contexts = RunnerContexts()
    custom = log(
        CREATED,
        "Aktion gestartet über Queue Worker Plus",
        "Aktion abgeschlossen über Queue Worker Plus",
    )
    events, _ = events_by_place(custom, "complete", False, contexts)
    assert events == {3: Event(Kind.COMPLETED)}  # not known yet: only the end, by status
    events_by_place(log(CREATED, "Aktion gestartet über WP CLI"), "in-progress", False, contexts)
    events, _ = events_by_place(custom, "complete", False, contexts)
    assert events[2] == Event(Kind.STARTED, runner="Queue Worker Plus")


def test_a_context_must_follow_a_space() -> None:
    assert RunnerContexts().known("Aktion gestartet überWP CLI") is None
    assert RunnerContexts().known("Aktion gestartet über WP CLI") == "WP CLI"


def test_resets_before_the_start_are_passed_over() -> None:
    rows = log(CREATED, "Aktion zurückgesetzt", "Aktion gestartet über Async Request")
    events, _ = events_by_place(rows, "in-progress", False, RunnerContexts())
    assert events == {3: Event(Kind.STARTED, runner="Async Request")}
