"""Builds an ExporterConfig from a YAML file (many sites); environment.py builds one site
from the environment with `parse_site`, and dsn.py reads a site's DSN.

Every path turns its input into the same mapping of site keys and validates it in one
place, so a DSN parameter, a YAML key and a `defaults:` entry mean exactly the same.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from actionscheduler_exporter.config import suggest, values
from actionscheduler_exporter.config.dsn import parse_dsn
from actionscheduler_exporter.config.errors import ConfigError
from actionscheduler_exporter.config.model import (
    CONNECTION_FIELDS,
    AlertThresholds,
    ExporterConfig,
    GroupConfig,
    KubernetesConfig,
    ReplicaConfig,
    SiteConfig,
    TLSConfig,
    WorkersConfig,
)

# Where they were first: other modules import them from here.
from actionscheduler_exporter.config.yaml_text import MAX_FILE_BYTES as MAX_FILE_BYTES
from actionscheduler_exporter.config.yaml_text import YamlError as YamlError
from actionscheduler_exporter.config.yaml_text import parse_yaml as parse_yaml
from actionscheduler_exporter.config.yaml_text import read_yaml

# Scalar site keys: how each is checked. DSN query parameters use the same names.
_SCALARS: dict[str, Callable[[Any], Any]] = {
    "host": values.text,
    "port": values.port,
    "user": values.text,
    "database": values.database_name,
    "unix_socket": values.text,
    "table_prefix": values.table_prefix,
    "concurrent_batches_limit": values.positive_int,
    "query_timeout": values.duration,
    "timeout_period": values.duration,
    "top_hooks": values.positive_int,
    "top_groups": values.positive_int,
    "log_rows_per_scrape": values.rows_per_scrape,
    "log_gap_grace": values.duration,
    "heavy_interval": values.duration_or_zero,
    "heavy_query_timeout": values.duration,
    "heavy_chunk_rows": values.chunk_rows,
    "heavy_settled_check_every": values.settled_check_every,
    "due_split_rows": values.due_split_rows,
    "due_split_interval": values.duration_or_zero,
    "anomalies_interval": values.duration_or_zero,
    "database_pattern": values.text,
    "discovery_interval": values.duration,
    "dedicated_workers": values.boolean,
    "classic_histograms": values.boolean,
}
_TLS_KEYS: dict[str, Callable[[Any], Any]] = {
    "ca_file": values.text,
    "verify": values.boolean,
    "cert_file": values.text,
    "key_file": values.text,
}
_ALERT_KEYS: dict[str, Callable[[Any], Any]] = {
    "oldest_due_warning": values.duration,
    "oldest_due_critical": values.duration,
    "drain_target": values.duration,
    "failure_ratio": values.ratio,
    "failure_rate": values.positive_number,
    "restarts": values.positive_number,
}
# A group's own thresholds: the delays that differ per kind of work.
_GROUP_ALERT_KEYS = {
    name: _ALERT_KEYS[name] for name in ("oldest_due_warning", "oldest_due_critical")
}
_WORKER_KEYS: dict[str, Callable[[Any], Any]] = {
    "namespace": values.text,
    "deployment": values.text,
    "container": values.text,
    "horizontalpodautoscaler": values.text,
    "runs": values.text,
}
_KUBERNETES_KEYS: dict[str, Callable[[Any], Any]] = {
    "namespace": values.text,
    "selector": values.text,
    "container": values.text,
    "deployment": values.text,
    "horizontalpodautoscaler": values.text,
    "cache": values.duration,
    "timeout": values.duration,
    "kubeconfig": values.text,
}
# The replica block: where to connect (as a site gives it) and how to use it.
_REPLICA_CONNECTION_KEYS = {"dsn", "host", "port", "user", "password", "password_file"}
_REPLICA_CONNECTION_KEYS |= {"unix_socket", "tls"}
_REPLICA_KEYS: dict[str, Callable[[Any], Any]] = {
    "max_lag": values.duration,
    "fallback": values.fallback,
}
SITE_KEYS = {
    *_SCALARS,
    "name",
    "dsn",
    "password",
    "password_file",
    "tls",
    "labels",
    "alerts",
    "groups",
    "hooks",
    "workers",
    "kubernetes",
    "replica",
}
_TOP_KEYS = {"sites", "defaults", "listen_address", "connections_per_server", "processes"}


def load_file(path: str) -> ExporterConfig:
    source = str(path)
    document = read_yaml(source)
    if not isinstance(document, dict):
        raise ConfigError(source, "", "must be a mapping with a 'sites' list")
    _reject_unknown(source, "", document, _TOP_KEYS)

    defaults = document.get("defaults") or {}
    if not isinstance(defaults, dict):
        raise ConfigError(source, "defaults", "must be a mapping of site keys")
    _reject_unknown(source, "defaults", defaults, SITE_KEYS - {"name"})

    sites_raw = document.get("sites")
    if not isinstance(sites_raw, list) or not sites_raw:
        raise ConfigError(source, "sites", "must be a non-empty list of sites")
    sites = tuple(
        parse_site(source, f"sites[{index}]", _mapping(source, f"sites[{index}]", raw), defaults)
        for index, raw in enumerate(sites_raw)
    )
    _reject_duplicate_names(source, sites)
    _reject_clashes_after_expansion(source, sites)

    config = ExporterConfig(sites=sites, source=source)
    if "listen_address" in document:
        host, port = _checked(
            source, "listen_address", values.listen_address, document["listen_address"]
        )
        config = replace(config, listen_host=host, listen_port=port)
    if "connections_per_server" in document:
        connections = _checked(
            source,
            "connections_per_server",
            values.connections_per_server,
            document["connections_per_server"],
        )
        config = replace(config, connections_per_server=connections)
    if "processes" in document:
        processes = _checked(source, "processes", values.processes, document["processes"])
        config = replace(config, processes=processes)
    return config


def parse_site(
    source: str, key: str, raw: dict[str, Any], defaults: dict[str, Any] | None = None
) -> SiteConfig:
    """Precedence, lowest first: `defaults:`, the site's DSN, the site's own keys."""
    _reject_unknown(source, key, raw, SITE_KEYS)
    fields, tls, raw = _connection(source, key, raw, defaults)
    _check_tls_files(source, f"{key}.tls", tls)
    fields["tls"] = TLSConfig(**tls)
    fields.update(_sections(source, key, raw))
    fields["password"] = _password(source, key, raw, fields.pop("password", ""))
    fields["labels"] = _labels(source, f"{key}.labels", raw.get("labels", {}))
    if "database" not in fields:
        raise ConfigError(source, f"{key}.database", "is missing (the WordPress database name)")
    # (A DSN's database is its path, not checked as a scalar.)
    fields["database"] = _checked(
        source, f"{key}.database", values.database_name, fields["database"]
    )
    name = raw.get("name", fields["database"])
    fields["name"] = _checked(source, f"{key}.name", values.text, name)
    site = SiteConfig(**fields)
    if "replica" in raw:
        site = replace(site, replica=_replica(source, f"{key}.replica", raw["replica"], site))
    return site


def _connection(
    source: str, key: str, raw: dict[str, Any], defaults: dict[str, Any] | None
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """The site's scalar settings and TLS keys from the defaults, its DSN and its own
    keys, and the site's keys merged over the defaults."""
    fields: dict[str, Any] = {}
    tls: dict[str, Any] = {}
    if defaults:
        _scalars_and_tls(source, "defaults", defaults, fields, tls)
        raw = _merge_defaults(defaults, raw)
    if "dsn" in raw:
        clash = sorted({"host", "port", "user", "database", "unix_socket"} & raw.keys())
        if clash:
            raise ConfigError(source, f"{key}.dsn", f"give either dsn or {', '.join(clash)}")
        dsn_fields, dsn_tls = parse_dsn(source, f"{key}.dsn", raw["dsn"], _SCALARS, _TLS_KEYS)
        fields.update(dsn_fields)
        tls.update(dsn_tls)
    _scalars_and_tls(source, key, raw, fields, tls)
    if not fields.get("user"):
        # No default: a silent `root` is a login nobody chose.
        raise ConfigError(
            source,
            f"{key}.user",
            "is not set: name the database user the exporter logs in as "
            "(user:, or user@ in the dsn)",
        )
    return fields, tls, raw


def _sections(source: str, key: str, raw: dict[str, Any]) -> dict[str, Any]:
    """The site's nested settings: alert thresholds, workers, Kubernetes, groups, hooks."""
    found: dict[str, Any] = {
        "alerts": AlertThresholds(
            **_section(source, f"{key}.alerts", raw.get("alerts", {}), _ALERT_KEYS)
        )
    }
    if "workers" in raw:
        found["workers"] = _workers(source, f"{key}.workers", raw["workers"])
    if "kubernetes" in raw:
        found["kubernetes"] = KubernetesConfig(
            **_section(
                source,
                f"{key}.kubernetes",
                raw["kubernetes"],
                _KUBERNETES_KEYS,
                ("namespace", "selector"),
            )
        )
    if "groups" in raw:
        found["groups"] = _groups(source, f"{key}.groups", raw["groups"])
    if "hooks" in raw:
        found["hooks"] = _hooks(source, f"{key}.hooks", raw["hooks"])
    return found


def _replica(source: str, key: str, raw: object, site: SiteConfig) -> ReplicaConfig:
    """The replica's connection, read like a site's (its own DSN or keys, the site's
    database), plus how the heavy tier uses it."""
    section = _mapping(source, key, raw)
    _reject_unknown(source, key, section, _REPLICA_CONNECTION_KEYS | set(_REPLICA_KEYS))
    if site.heavy_interval == 0:
        raise ConfigError(
            source, key, "needs heavy_interval above 0: the replica serves the background refresh"
        )
    connection = {name: value for name, value in section.items() if name not in _REPLICA_KEYS}
    if "dsn" not in connection:  # the site's database and, unless given, its user
        connection.setdefault("database", site.database)
        connection.setdefault("user", site.user)
        if "password_file" not in connection:
            connection.setdefault("password", site.password)
    parsed = parse_site(source, key, {"name": site.name, **connection})
    if parsed.database != site.database:
        raise ConfigError(source, f"{key}.dsn", f"must name the site's database {site.database!r}")
    usage = _section(
        source, key, {k: v for k, v in section.items() if k in _REPLICA_KEYS}, _REPLICA_KEYS
    )
    return ReplicaConfig(**{name: getattr(parsed, name) for name in CONNECTION_FIELDS}, **usage)


def _merge_defaults(defaults: dict[str, Any], raw: dict[str, Any]) -> dict[str, Any]:
    """Non-scalar defaults under the site's keys; `alerts` and `labels` merge key by key."""
    merged = {**{k: v for k, v in defaults.items() if k not in _SCALARS and k != "tls"}, **raw}
    for name in ("alerts", "labels"):
        if isinstance(defaults.get(name), dict) and isinstance(raw.get(name), dict):
            merged[name] = {**defaults[name], **raw[name]}
    return merged


def _section(
    source: str,
    key: str,
    raw: object,
    checks: dict[str, Callable[[Any], Any]],
    required: tuple[str, ...] = (),
) -> dict[str, Any]:
    section = _mapping(source, key, raw)
    _reject_unknown(source, key, section, set(checks))
    for name in required:
        if name not in section:
            raise ConfigError(source, f"{key}.{name}", "is missing")
    return {
        name: _checked(source, f"{key}.{name}", check, section[name])
        for name, check in checks.items()
        if name in section
    }


def _scalars_and_tls(
    source: str, key: str, raw: dict[str, Any], fields: dict[str, Any], tls: dict[str, Any]
) -> None:
    for name, check in _SCALARS.items():
        if name in raw:
            fields[name] = _checked(source, f"{key}.{name}", check, raw[name])
    if "tls" in raw:
        tls.update(_section(source, f"{key}.tls", raw["tls"], _TLS_KEYS))


def _password(source: str, key: str, raw: dict[str, Any], from_dsn: str) -> str:
    if "password" in raw and "password_file" in raw:
        raise ConfigError(source, f"{key}.password", "give either password or password_file")
    if "password" in raw:
        password = raw["password"]
        if not isinstance(password, str):
            raise ConfigError(source, f"{key}.password", "must be a string (quote it in YAML)")
        return password
    if "password_file" in raw:
        path = _checked(source, f"{key}.password_file", values.text, raw["password_file"])
        try:
            password = Path(path).read_text(encoding="utf-8").rstrip("\r\n")
            if not password:
                # An empty file is a mistake (a secret not mounted yet), not "no password".
                raise ConfigError(source, f"{key}.password_file", f"{path} is empty")
            return password
        except OSError as error:
            raise ConfigError(
                source, f"{key}.password_file", f"cannot read {path}: {error.strerror}"
            ) from error
        except UnicodeDecodeError:
            raise ConfigError(source, f"{key}.password_file", f"{path} is not UTF-8 text") from None
    return from_dsn


def _workers(source: str, key: str, raw: object) -> tuple[WorkersConfig, ...]:
    """One Deployment of workers (a mapping), or several (a list: worker pools)."""
    entries = raw if isinstance(raw, list) else [raw]
    return tuple(
        WorkersConfig(
            **_section(
                source,
                f"{key}[{index}]" if isinstance(raw, list) else key,
                entry,
                _WORKER_KEYS,
                ("namespace", "deployment"),
            )
        )
        for index, entry in enumerate(entries)
    )


def _groups(source: str, key: str, raw: object) -> tuple[GroupConfig, ...]:
    """`groups: {slug: {alerts: {oldest_due_warning: 2h}}}`; a group may map to nothing."""
    groups = []
    for slug, section in _mapping(source, key, raw).items():
        where = f"{key}.{slug}"
        name = _checked(source, where, values.text, slug)
        settings = _mapping(source, where, section if section is not None else {})
        _reject_unknown(source, where, settings, {"alerts"})
        alerts = _section(source, f"{where}.alerts", settings.get("alerts", {}), _GROUP_ALERT_KEYS)
        groups.append(GroupConfig(name, **alerts))
    return tuple(groups)


def _hooks(source: str, key: str, raw: object) -> tuple[str, ...]:
    if not isinstance(raw, list):
        raise ConfigError(source, key, "must be a list of hook names")
    return tuple(
        _checked(source, f"{key}[{index}]", values.text, hook) for index, hook in enumerate(raw)
    )


def _labels(source: str, key: str, raw: object) -> tuple[tuple[str, str], ...]:
    labels = _mapping(source, key, raw)
    checked: list[tuple[str, str]] = []
    for name, value in labels.items():
        _checked(source, f"{key}.{name}", values.label_name, str(name))
        if not isinstance(value, str | int | float) or isinstance(value, bool):
            raise ConfigError(source, f"{key}.{name}", "must be a string")
        checked.append((str(name), str(value)))
    return tuple(sorted(checked))


def _check_tls_files(source: str, key: str, tls: dict[str, Any]) -> None:
    for name in ("ca_file", "cert_file", "key_file"):
        if name in tls and not Path(tls[name]).is_file():
            raise ConfigError(source, f"{key}.{name}", f"file {tls[name]} does not exist")
    if ("cert_file" in tls) != ("key_file" in tls):
        raise ConfigError(source, key, "cert_file and key_file go together")


def _reject_clashes_after_expansion(source: str, sites: tuple[SiteConfig, ...]) -> None:
    """A `table_prefix: auto` site labels its subsites `name:prefix`: no other site may be
    named like one of them, or two sites would give the same series."""
    expanding = [site.name for site in sites if site.discovers_prefixes or site.discovers_databases]
    for index, site in enumerate(sites):
        for name in expanding:
            if site.name != name and site.name.startswith(f"{name}:"):
                raise ConfigError(
                    source,
                    f"sites[{index}].name",
                    f"{site.name!r} can clash with the sites {name!r} discovers (it names "
                    f"them {name}:<prefix> or {name}:<database>): choose another name",
                )


def _reject_duplicate_names(source: str, sites: tuple[SiteConfig, ...]) -> None:
    seen: set[str] = set()
    for index, site in enumerate(sites):
        if site.name in seen:
            raise ConfigError(source, f"sites[{index}].name", f"{site.name!r} is used twice")
        seen.add(site.name)


def _mapping(source: str, key: str, raw: object) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise ConfigError(source, key, f"must be a mapping, got {type(raw).__name__}")
    return raw


def _reject_unknown(source: str, key: str, raw: dict[str, Any], known: set[str]) -> None:
    for name in raw:
        if name not in known:
            where = f"{key}.{name}" if key else str(name)
            hint = suggest.unknown(name, known)
            raise ConfigError(source, where, f"is not a known key ({hint})")


def _checked(source: str, key: str, check: Callable[[Any], Any], value: object) -> Any:
    try:
        return check(value)
    except ValueError as error:
        raise ConfigError(source, key, str(error)) from error
