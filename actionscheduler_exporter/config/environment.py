"""One site from the environment (AS_EXPORTER_DSN...), or the file AS_EXPORTER_CONFIG
names: the configuration without --config.file."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from actionscheduler_exporter.config.errors import ConfigError
from actionscheduler_exporter.config.loader import load_file, parse_site
from actionscheduler_exporter.config.model import ExporterConfig

ENV_DSN = "AS_EXPORTER_DSN"
# A configuration file read when there is one at that path (the image sets it), else the
# environment's site.
ENV_CONFIG = "AS_EXPORTER_CONFIG"
ENV_SITE = "AS_EXPORTER_SITE"
ENV_PASSWORD_FILE = "AS_EXPORTER_PASSWORD_FILE"  # noqa: S105 - a variable name


def load_default(environ: Mapping[str, str] | None = None) -> ExporterConfig:
    """Without --config: the file `AS_EXPORTER_CONFIG` names when it exists (a container
    with its configuration mounted), else the site of the environment. A named file that
    does not exist is an error unless the environment has a DSN instead."""
    env = os.environ if environ is None else environ
    path = env.get(ENV_CONFIG)
    if path and (Path(path).exists() or not env.get(ENV_DSN)):
        return load_file(path)
    return load_environment(env)


def load_environment(environ: Mapping[str, str] | None = None) -> ExporterConfig:
    env = os.environ if environ is None else environ
    dsn = env.get(ENV_DSN)
    if not dsn:
        raise ConfigError(
            "environment",
            ENV_DSN,
            "is not set; give a DSN such as mysql://user@host:3306/db "
            "or a configuration file with --config",
        )
    raw: dict[str, Any] = {"dsn": dsn}
    if env.get(ENV_SITE):
        raw["name"] = env[ENV_SITE]
    if env.get(ENV_PASSWORD_FILE):
        raw["password_file"] = env[ENV_PASSWORD_FILE]
    site = parse_site("environment", ENV_DSN, raw)
    return ExporterConfig(sites=(site,), source="environment")
