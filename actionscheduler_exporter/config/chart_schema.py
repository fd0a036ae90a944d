"""The Helm chart's schema for `config.sites`, `config.defaults` and
`config.connectionsPerServer`, from the exporter's own configuration keys and bounds: one
source, so that a key or a value the exporter does not take fails `helm install` with its
name, instead of a pod that crash-loops on exit 2.

    # rewrites the chart's values.schema.json:
    python -m actionscheduler_exporter.config.chart_schema
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from actionscheduler_exporter.config.loader import SITE_KEYS
from actionscheduler_exporter.config.values import MAX_CONNECTIONS_PER_SERVER, MAX_PROCESSES

CHART_SCHEMA = (
    Path(__file__).resolve().parents[2] / "helm" / "actionscheduler-exporter" / "values.schema.json"
)
# Keys the chart writes for the user, or that never belong in values.
_SPECIAL: dict[str, dict[str, Any]] = {
    "name": {"type": "string", "minLength": 1, "description": "becomes the site label"},
    # Allowed by the schema so that the chart can refuse it with a sentence of its own
    # (a schema's `not` prints only "'not' failed").
    "password": {"description": "never in values: use databasePasswords.existingSecret"},
    "password_file": {"description": "written by the chart from databasePasswords"},
    "dsn": {
        "type": "string",
        "not": {"pattern": "^[a-z]+://[^/@]*:[^/@]*@"},
        "description": "a DSN without a password",
    },
}


def site_schema(*, defaults: bool = False) -> dict[str, Any]:
    """A site entry (or `defaults:`, which takes every key but the name)."""
    keys = sorted(SITE_KEYS - {"name"} if defaults else SITE_KEYS)
    schema: dict[str, Any] = {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            key: _SPECIAL.get(key, {"description": "see the exporter's configuration"})
            for key in keys
        },
    }
    if not defaults:
        schema["required"] = ["name"]
    return schema


def updated(document: dict[str, Any]) -> dict[str, Any]:
    config = document["properties"]["config"]["properties"]
    config["sites"]["items"] = site_schema()
    config["defaults"] = site_schema(defaults=True)
    config["connectionsPerServer"] = {
        "type": ["integer", "null"],
        "minimum": 1,
        "maximum": MAX_CONNECTIONS_PER_SERVER,
        "description": "the exporter's connections_per_server (null: its default)",
    }
    config["processes"] = {
        "type": ["integer", "null"],
        "minimum": 1,
        "maximum": MAX_PROCESSES,
        "description": "the exporter's processes (null: its default)",
    }
    return document


def main() -> int:
    document = json.loads(CHART_SCHEMA.read_text(encoding="utf-8"))
    CHART_SCHEMA.write_text(json.dumps(updated(document), indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
