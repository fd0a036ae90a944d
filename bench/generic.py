"""The comparison: a generic SQL exporter (query-exporter, from PyPI) running the obvious
queries a deployment guide gives for Action Scheduler, on every scrape.

It gets a virtualenv of its own under .bench/ (its dependencies are not the exporter's).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

QUERY_EXPORTER_VERSION = "5.0.2"

# The guide's queries: counts by status, failures by hook, the due backlog and the age of
# its oldest action. No interval: run at every scrape. (Counts by status and group, which
# cost ten times more at 10M actions, are left out, as the guide leaves them out.)
GUIDE_QUERIES = {
    "actions_by_status": (
        ["as_actions"],
        "SELECT status, COUNT(*) AS as_actions FROM wp_actionscheduler_actions GROUP BY status",
    ),
    "failed_by_hook": (
        ["as_failed_actions"],
        "SELECT hook, COUNT(*) AS as_failed_actions FROM wp_actionscheduler_actions"
        " WHERE status = 'failed' GROUP BY hook",
    ),
    "due": (
        ["as_due_actions", "as_oldest_due_age_seconds"],
        "SELECT COUNT(*) AS as_due_actions,"
        " COALESCE(TIMESTAMPDIFF(SECOND, MIN(scheduled_date_gmt), UTC_TIMESTAMP()), 0)"
        " AS as_oldest_due_age_seconds FROM wp_actionscheduler_actions"
        " WHERE status = 'pending' AND scheduled_date_gmt <= UTC_TIMESTAMP()",
    ),
}
_METRICS = {
    "as_actions": ["status"],
    "as_failed_actions": ["hook"],
    "as_due_actions": [],
    "as_oldest_due_age_seconds": [],
}


def install(folder: Path) -> Path:
    """query-exporter's command, installed once into its own virtualenv."""
    command = folder / "bin" / "query-exporter"
    if not command.exists():
        subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
        subprocess.run(
            [
                str(folder / "bin" / "pip"),
                "install",
                "--quiet",
                "--disable-pip-version-check",
                f"query-exporter=={QUERY_EXPORTER_VERSION}",
                "pymysql",
            ],
            check=True,
        )
    return command


def write_config(path: Path, host: str, port: int, user: str, database: str) -> None:
    metrics: dict[str, dict[str, object]] = {}
    for name, labels in _METRICS.items():
        metrics[name] = {"type": "gauge", **({"labels": labels} if labels else {})}
    config = {
        "databases": {"store": {"dsn": f"mysql+pymysql://{user}@{host}:{port}/{database}"}},
        "metrics": metrics,
        "queries": {
            name: {"databases": ["store"], "metrics": names, "sql": sql}
            for name, (names, sql) in GUIDE_QUERIES.items()
        },
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")


def command_line(command: Path, config: Path, port: int) -> list[str]:
    return [str(command), "--config", str(config), "-H", "127.0.0.1", "-p", str(port)]
