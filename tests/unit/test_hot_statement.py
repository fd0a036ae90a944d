"""The round's one statement per table prefix (`rounds.hot_statement`, made of its
collectors' parts by `sources.statement_parts`): a subquery that several collectors
declare (the same text with the same arguments: `collectors.claimed`) is sent once, its
arguments once, and each collector gets the values of its own subqueries from it, in its
own order. An express read's plan splits any answer as a normal read's splitting does:
the same values of every part, or None for both. The real server's side:
tests/test_packed_answers.py."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from actionscheduler_exporter.collectors import site_sources
from actionscheduler_exporter.collectors.claims import ClaimsCollector
from actionscheduler_exporter.collectors.due import DueCollector
from actionscheduler_exporter.config.model import SiteConfig
from actionscheduler_exporter.db.schema import TABLES, TableNames
from actionscheduler_exporter.db.session import Row
from actionscheduler_exporter.db.tables import TableStats
from actionscheduler_exporter.metrics import catalog
from actionscheduler_exporter.metrics.samples import Sample
from actionscheduler_exporter.rounds.hot_statement import read_hot_statement
from actionscheduler_exporter.sources.database import (
    Collector,
    Columns,
    DatabaseContext,
    values_together,
)
from actionscheduler_exporter.sources.statement_parts import (
    NO_STATS,
    StatementPlan,
    columns_at,
    made_of,
    split,
    statement_of,
)
from tests.support.fake_session import TABLE_STATS, FakeSession, Script

SITE = SiteConfig(name="shop", database="wp")


def _declaring(name: str, declared: Columns) -> Collector:
    """A hot collector of the given columns."""

    class Declares(Collector):
        metrics = (catalog.DUE_ACTIONS,)

        def columns(self, context: DatabaseContext) -> Columns:
            return declared

        def read(self, context: DatabaseContext) -> tuple[Sample, ...]:
            return ()

    Declares.name = name
    return Declares()


def _value_of(number: int) -> Callable[[Sequence[object] | None], list[Row]]:
    """1000 times `number` plus the subquery's argument, if any: a value that tells which
    subquery, with which argument, gave it."""

    def answer(args: Sequence[object] | None) -> list[Row]:
        return [(1000 * number + sum(int(str(a)) for a in args or ()),)]

    return answer


def _answering(texts: list[str]) -> Script:
    """Each subquery (`SELECT v<k> ...`) answered by `_value_of(k)`."""
    script = Script()
    for text in texts:
        script.answer(text.split(" %s")[0], _value_of(int(text.split()[1].removeprefix("v"))))
    return script


def _read(
    script: Script, parts: dict[str, Columns], known_stats: dict[str, TableStats] | None = None
) -> dict[str, tuple[object, ...]]:
    """Each part's values as the round reads them; the tables' statistics read first in
    the same statement unless `known_stats` (then none)."""
    session = FakeSession(SITE, script)
    context = DatabaseContext(session, TableNames("wp_"), SITE, {})
    collectors = [_declaring(name, columns) for name, columns in parts.items()]
    statement = read_hot_statement(context, collectors, {} if known_stats is None else None)
    assert len(session.sent) == 1  # one statement for every part
    if known_stats is not None:
        assert statement.stats is not None and statement.stats.keys() == set(TABLES)
    return {name: tuple(values) for name, values in statement.prefetched.items()}


def test_a_subquery_two_collectors_declare_is_sent_once_and_read_by_both() -> None:
    shared = "SELECT v2 FROM t WHERE y = %s"
    first = Columns(("SELECT v1 FROM t WHERE x > %s", shared), (1, 2))
    second = Columns((shared, "SELECT v3 FROM t WHERE z = %s"), (2, 3))
    statement = statement_of([first, second])
    assert statement.subqueries == ("SELECT v1 FROM t WHERE x > %s", shared, second.subqueries[1])
    assert statement.args == (1, 2, 3)
    script = _answering([*first.subqueries, second.subqueries[1]])
    assert _read(script, {"first": first, "second": second}) == {
        "first": (1001, 2002),
        "second": (2002, 3003),
    }


def test_a_shared_subquery_of_several_values_after_the_tables_statistics() -> None:
    """The statistics at the statement's first place, then a subquery of two values
    (`values_together`) that both parts declare: each reads both values of its text."""
    # Its argument in a value's expression: the scripted session reads each value of such
    # a subquery as a subquery of its own, which would repeat a placeholder of its WHERE.
    shared = values_together("FROM t WHERE y = 0", "v7 + %s", "v8")
    first = Columns(("SELECT v1 FROM t WHERE x > %s", shared), (1, 2), widths=(1, 2))
    second = Columns((shared, "SELECT v3 FROM t WHERE z = %s"), (2, 3), widths=(2, 1))
    script = _answering(["SELECT v1 FROM t WHERE x > %s", "SELECT v3 FROM t WHERE z = %s"])
    for number in (7, 8):
        script.answer(f"SELECT v{number} ", _value_of(number))
    packed = ",".join(f"{name} {rows} {size}" for name, rows, size in TABLE_STATS)
    script.answer("CONCAT_WS(','", [(packed,)])
    assert _read(script, {"first": first, "second": second}, known_stats={}) == {
        "first": (1001, 7002, 8000),
        "second": (7002, 8000, 3003),
    }


def test_the_same_text_with_other_arguments_is_sent_for_each() -> None:
    shared = "SELECT v2 FROM t WHERE y = %s"
    first = Columns((shared,), (2,))
    second = Columns((shared,), (5,))
    statement = statement_of([first, second])
    assert statement.subqueries == (shared, shared)
    assert statement.args == (2, 5)
    assert _read(_answering([shared]), {"first": first, "second": second}) == {
        "first": (2002,),
        "second": (2005,),
    }


def test_a_literal_per_cent_sign_is_not_a_placeholder() -> None:
    shared = "SELECT v2 FROM t WHERE y LIKE '1%%' AND x = %s"
    statement = statement_of([Columns((shared, "SELECT v1"), (4,)), Columns((shared,), (4,))])
    assert statement.subqueries == (shared, "SELECT v1")
    assert statement.args == (4,)


def test_a_part_whose_placeholders_do_not_take_its_arguments_shares_nothing() -> None:
    """Its subqueries are sent as they are, its arguments after the earlier parts'."""
    shared = "SELECT v2 FROM t WHERE y = %s"
    statement = statement_of([Columns((shared,), (2, 9)), Columns((shared,), (2,))])
    assert statement.subqueries == (shared, shared)
    assert statement.args == (2, 9, 2)


# Subqueries with no argument or one: a part declares some of them, in any order.
POOL = [f"SELECT v{n} FROM t" + (" WHERE y = %s" if n % 2 else "") for n in range(1, 7)]


@st.composite
def _parts(draw: st.DrawFn) -> dict[str, Columns]:
    parts: dict[str, Columns] = {}
    for index in range(draw(st.integers(min_value=1, max_value=4))):
        queries = draw(st.lists(st.sampled_from(POOL), min_size=1, max_size=4, unique=True))
        args = tuple(draw(st.integers(0, 2)) for query in queries if "%s" in query)
        parts[f"p{index}"] = Columns(tuple(queries), args)
    return parts


@given(_parts())
def test_each_collector_gets_the_values_of_its_own_subqueries(parts: dict[str, Columns]) -> None:
    """Whatever subqueries the parts share, in whatever order: each gets its own values,
    and the statement sends each subquery with its arguments once."""
    read = _read(_answering(POOL), parts)
    distinct: set[tuple[str, int | None]] = set()
    for name, columns in parts.items():
        remaining = list(columns.args)
        expected = []
        for query in columns.subqueries:
            argument = int(str(remaining.pop(0))) if "%s" in query else None
            distinct.add((query, argument))
            expected.append(1000 * int(query.split()[1].removeprefix("v")) + (argument or 0))
        assert read[name] == tuple(expected), name
    assert statement_of(list(parts.values())).width == len(distinct)


def test_the_due_and_claims_collectors_share_the_claimed_open_actions() -> None:
    """Their statement: one subquery fewer than they declare (`collectors.claimed`)."""
    context = DatabaseContext(FakeSession(SITE, Script()), TableNames("wp_"), SITE, {})
    due, claims = DueCollector().columns(context), ClaimsCollector().columns(context)
    declared = len(due.subqueries) + len(claims.subqueries)
    assert statement_of([due, claims]).width == declared - 1


# The columns of a store's real in-round collectors (texts of several values, a subquery
# that two of them share), and made-up ones of texts of one, two and three values.
_TABLES = TableNames("wp_")
_CONTEXT = DatabaseContext(FakeSession(SITE, Script()), _TABLES, SITE, {})
_REAL = {
    collector.name: columns
    for collector in site_sources(SITE).in_round
    if (columns := collector.columns(_CONTEXT)) is not None
}
_MADE_UP = {
    "texts": Columns(
        (values_together("FROM t", "a", "b"), "SELECT c", values_together("FROM u", "d", "e", "f")),
        (),
        widths=(2, 1, 3),
        nullable=frozenset({0, 2}),
    ),
    "one": Columns(("SELECT c",), ()),
}


@st.composite
def _answers(draw: st.DrawFn) -> tuple[dict[str, Columns], tuple[object, ...], bool]:
    """Parts of a statement, an answer of it, and whether the answer is as the server
    gives it: mostly (whole numbers, empty for a NULL, of up to 40 digits), at times a
    NULL, bytes, a text of other values, a separator inside a text, or a row of another
    width."""
    names = draw(st.lists(st.sampled_from([*_REAL, *_MADE_UP]), min_size=1, unique=True))
    parts = {name: _REAL.get(name) or _MADE_UP[name] for name in names}
    statement, places = made_of(list(parts.values()))
    widths = [1] * statement.width
    for columns, place in zip(parts.values(), places, strict=True):
        for column, width in zip(columns_at(place, statement.width), columns.widths, strict=False):
            widths[column] = width
    number = st.integers(-5, 10**40).map(str) | st.just("")
    row: list[object] = []
    odd_any = False
    for width in widths:
        text = " ".join(draw(st.lists(number, min_size=width, max_size=width)))
        odd = draw(st.integers(0, 12))
        odd_any |= odd < 3
        if width == 1:
            row.append(None if odd == 0 else draw(st.integers(0, 10**6)))
        elif odd == 0:
            row.append(None)
        elif odd == 1:
            row.append(text.encode())
        elif odd == 2:
            row.append(draw(st.sampled_from(["1.5 2", "1,2 3", "x", " ", "1 2 3 4", "-"])))
        else:
            row.append(text)
    if draw(st.integers(0, 30)) == 0:
        row.append(1)
        odd_any = True
    return parts, tuple(row), not odd_any


@settings(max_examples=400, deadline=None)
@given(_answers())
def test_an_express_plan_splits_an_answer_as_a_normal_read_does(
    answer: tuple[dict[str, Columns], tuple[object, ...], bool],
) -> None:
    parts, row, as_given = answer
    statement, places = made_of(list(parts.values()))
    named = tuple(parts.items())
    plan = StatementPlan(statement, named, places)
    normal = split([row], statement.width, named, places, _TABLES, NO_STATS)
    assert plan.values(row, _TABLES) == (None if normal is None else normal[1])
    if as_given:  # read in one match, not part by part
        assert plan.expansion is not None
        assert plan.expansion.expanded(row) is not None


def _plan_and_split(parts: dict[str, Columns], row: tuple[object, ...]) -> tuple[object, object]:
    statement, places = made_of(list(parts.values()))
    named = tuple(parts.items())
    normal = split([row], statement.width, named, places, _TABLES, NO_STATS)
    plan = StatementPlan(statement, named, places)
    return plan.values(row, _TABLES), None if normal is None else normal[1]


def test_parts_that_disagree_on_a_subquerys_values_each_read_their_own() -> None:
    """One text that one part reads as two values and another as one: sent once, read
    by each as it declares, as a normal read does (no plan's match for the row)."""
    shared = values_together("FROM t", "a", "b")
    parts = {
        "one": Columns((shared,), ()),
        "two": Columns((shared, "SELECT c"), (), widths=(2, 1)),
    }
    statement, places = made_of(list(parts.values()))
    assert StatementPlan(statement, tuple(parts.items()), places).expansion is None
    made, normal = _plan_and_split(parts, ("1 2", 5))
    assert made == normal == {"one": ("1 2",), "two": (1, 2, 5)}


def test_an_odd_text_is_read_as_a_normal_read_reads_it() -> None:
    """A text of a `str` subclass, and a number past Python's digits for a text's int
    after a part that fails: the normal read's outcome, not the match's."""

    class Text(str):
        pass

    parts = {"texts": _MADE_UP["texts"]}
    made, normal = _plan_and_split(parts, (Text("1 2"), 3, "4 5 6"))
    assert made == normal is None
    parts = {"one": Columns(("SELECT a",), ()), "texts": _MADE_UP["texts"]}
    made, normal = _plan_and_split(parts, (None, "1" * 5000 + " 1", 3, "4 5 6"))
    assert made == normal is None
