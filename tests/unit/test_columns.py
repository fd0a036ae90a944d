"""A collector's columns: a subquery of several values (`values_together`) reads them as
one text, and `Columns.values` turns that text back into the values the subqueries one
by one would have given, or refuses it whole; every other column is passed as it is.
The real server's side: tests/test_packed_answers.py and tests/test_query_plans.py."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actionscheduler_exporter.collectors import site_sources
from actionscheduler_exporter.config.model import SiteConfig
from actionscheduler_exporter.db.schema import TableNames
from actionscheduler_exporter.sources.database import Columns, DatabaseContext, values_together
from actionscheduler_exporter.sources.statement_parts import statement_of
from tests.support.fake_session import FakeSession, Script

SEVERAL = Columns(("SELECT 1", "SELECT 2", "SELECT 3"), widths=(1, 2, 1), nullable=frozenset({2}))
whole = st.none() | st.integers(min_value=-(2**63), max_value=2**64 - 1)


def as_the_server_sends(values: list[int | None]) -> str:
    """CONCAT of COALESCE(value, '') joined by spaces, as MariaDB and MySQL write it."""
    return " ".join("" if value is None else str(value) for value in values)


@given(st.lists(whole, min_size=2, max_size=5), st.integers(), st.integers())
def test_the_values_of_a_text_are_the_ones_it_was_made_of(
    together: list[int | None], before: int, after: int
) -> None:
    columns = Columns(("a", "b", "c"), widths=(1, len(together), 1))
    answer = (before, as_the_server_sends(together), after)
    assert columns.values(answer) == (before, *together, after)
    assert columns.values((before, as_the_server_sends(together).encode(), after)) == (
        before,
        *together,
        after,
    )


def test_a_subquery_of_several_values_is_one_select_of_each_over_one_source() -> None:
    sql = values_together("FROM t WHERE s = 'p'", "COUNT(*)", "MIN(x)")
    assert (
        sql
        == "SELECT CONCAT(COALESCE(COUNT(*), ''), ' ', COALESCE(MIN(x), '')) FROM t WHERE s = 'p'"
    )


def test_columns_of_one_value_each_pass_their_answer_as_it_is() -> None:
    columns = Columns(("a", "b"), widths=(1, 1))
    assert columns.widths == ()  # the fast path: nothing to read
    answer = (3, "text")
    assert columns.values(answer) is answer
    assert columns.width == 2


@pytest.mark.parametrize(
    "text",
    [
        "1",
        "1 2 3",
        "1.5 2",
        "2026-12-06 2",
        "1 -",
        "- 1",
        "1e3 2",
        "\u0661 2",
        "1_000 2",
        "+1 2",
        "a b",
        "1" * 5000 + " 2",  # past Python's digits for an int
    ],
)
def test_a_text_that_is_not_its_whole_numbers_is_refused_whole(text: str) -> None:
    assert SEVERAL.values((7, text, 9)) is None


@pytest.mark.parametrize("value", [7, 7.5, b"\xff\xfe", ["1", "2"]])
def test_a_column_of_several_values_that_is_not_a_text_is_refused(value: object) -> None:
    assert SEVERAL.values((7, value, 9)) is None


def test_a_null_where_several_values_were_asked_is_a_null_for_each() -> None:
    # A killed statement's row of NULLs: `problem` names the counts that cannot be NULL.
    values = SEVERAL.values((None, None, None))
    assert values == (None, None, None, None)
    assert "NULL in column(s) [1, 2, 4]" in SEVERAL.problem(values)


def test_an_age_of_nothing_may_be_null_inside_the_text() -> None:
    values = SEVERAL.values((4, "5 ", 6))
    assert values == (4, 5, None, 6)
    assert SEVERAL.problem(values) == ""


def test_an_answer_of_another_number_of_columns_is_named_by_problem() -> None:
    answer = (1, "2 3")
    assert SEVERAL.values(answer) is answer
    assert SEVERAL.problem(answer) == "2 values for 4 columns"


@pytest.mark.parametrize(("widths", "message"), [((1,), "1 widths for 2"), ((1, 0), "at least")])
def test_widths_that_do_not_fit_the_subqueries_are_refused(
    widths: tuple[int, ...], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        Columns(("a", "b"), widths=widths)


def _source(subquery: str) -> str | None:
    """A subquery's FROM and WHERE: the rows it reads (white space folded); None for one
    that reads no table (a server variable)."""
    depth = 0
    for place, character in enumerate(subquery):
        depth += {"(": 1, ")": -1}.get(character, 0)
        if depth == 0 and subquery.startswith(" FROM ", place):
            return " ".join(subquery[place:].split())
    return None


@pytest.mark.parametrize("prefix", ["wp_", "auto"])
def test_no_two_subqueries_of_the_round_statement_read_the_same_rows(prefix: str) -> None:
    """The server's work per store is a cost per subquery (docs/performance.md, "Values of
    the same rows in one pass"): what one pass over the same rows gives is one subquery
    (`values_together`), sent once when two collectors read it (`collectors.claimed`), for
    every in-round collector a site has. The same rows: the same FROM and WHERE (two
    ranges of one index that overlap are not found here: the claimed due actions and the
    active claims were two such, which `tests/test_packed_answers.py` reads as one)."""
    site = SiteConfig(name="shop", database="wp", table_prefix=prefix)
    context = DatabaseContext(
        FakeSession(site, Script()), TableNames("wp_" if prefix == "auto" else prefix), site, {}
    )
    every = [columns for c in site_sources(site).in_round if (columns := c.columns(context))]
    sources: set[str] = set()
    for subquery in statement_of(every).subqueries:
        source = _source(subquery)
        if source is None:
            continue
        assert source not in sources, source
        sources.add(source)
    assert len(sources) >= 5
