"""A store's table statistics, as the server reads them: looked up by each table's name,
never by listing its database (a network of a thousand subsites has four thousand
tables: docs/performance.md)."""

from __future__ import annotations

from actionscheduler_exporter.db.schema import TableNames, in_database
from actionscheduler_exporter.db.tables import table_stats_column, table_stats_rows
from testbed.store import ActionSchedulerStore


def test_a_stores_table_statistics_are_looked_up_by_name_not_by_listing_its_database(
    store: ActionSchedulerStore,
) -> None:
    """MariaDB's plan of an `information_schema.TABLES` read says how many databases it
    lists ("Scanned 1 database" with `TABLE_NAME IN (...)`); each of the four lookups of
    both forms (the hot statement's column and the rows read apart) lists none."""
    with store.connection.cursor() as cursor:
        cursor.execute("SELECT DATABASE()")
        (database,) = cursor.fetchone()
        for form in (table_stats_column, table_stats_rows):
            sql, args = in_database(*form(TableNames(store.prefix)), database)
            cursor.execute(f"EXPLAIN {sql}", args)
            columns = [column[0] for column in cursor.description]
            extras = [row[columns.index("Extra")] or "" for row in cursor.fetchall()]
            lookups = [extra for extra in extras if "Scanned" in extra]
            assert len(lookups) == 4, (form.__name__, extras)
            assert all("Scanned 0 databases" in extra for extra in lookups), extras
            cursor.execute(sql, args)
            answer = cursor.fetchall()
            assert "actionscheduler_logs" in str(answer), answer
