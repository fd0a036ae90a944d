"""Builds an ExporterConfig from a YAML file (many sites) or the environment (one site).

Both paths turn their input into the same mapping of site keys and validate it in one
place, so a DSN parameter, a YAML key and a `defaults:` entry mean exactly the same.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import yaml

from actionscheduler_exporter.config import values
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

ENV_DSN = "AS_EXPORTER_DSN"
# A configuration file read when there is one at that path (the image sets it), else the
# environment's site.
ENV_CONFIG = "AS_EXPORTER_CONFIG"
ENV_SITE = "AS_EXPORTER_SITE"
ENV_PASSWORD_FILE = "AS_EXPORTER_PASSWORD_FILE"  # noqa: S105 - a variable name

# Scalar site keys: how each is checked. DSN query parameters use the same names.
_SCALARS: dict[str, Callable[[Any], Any]] = {
    "host": values.text,
    "port": values.port,
    "user": values.text,
    "database": values.text,
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
# DSN parameters that configure TLS, in the spelling MySQL clients use.
_DSN_TLS_PARAMS = {
    "ssl_ca": "ca_file",
    "ssl_verify": "verify",
    "ssl_cert": "cert_file",
    "ssl_key": "key_file",
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
_TOP_KEYS = {"sites", "defaults", "listen_address", "connections_per_server"}
# A configuration of a thousand sites is a few hundred kilobytes.
MAX_FILE_BYTES = 1024 * 1024


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
        _site(source, f"sites[{index}]", _mapping(source, f"sites[{index}]", raw), defaults)
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
    return config


def read_yaml(source: str) -> Any:
    """A YAML document, or a ConfigError that names the file and the place of the problem
    but never quotes the file's text (it may hold a password)."""
    path = Path(source)
    try:
        # Read with a bound, not by the size `stat` gives: a pipe or /dev/zero has none.
        with path.open("rb") as file:
            data = file.read(MAX_FILE_BYTES + 1)
    except OSError as error:
        raise ConfigError(source, "", f"cannot read the file: {error.strerror}") from error
    if len(data) > MAX_FILE_BYTES:
        raise ConfigError(source, "", f"is larger than {MAX_FILE_BYTES} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ConfigError(
            source, "", f"is not UTF-8 text (byte {error.start} cannot be decoded)"
        ) from None
    try:
        return parse_yaml(text)
    except YamlError as problem:
        raise ConfigError(source, "", str(problem)) from None


class YamlError(ValueError):
    """What is wrong with a YAML text, and where; never a word of the text itself."""


def parse_yaml(text: str) -> Any:
    """The document, or a YamlError with the place of the problem and its kind; quoted
    parts of the parser's message (an alias's or a tag's name, a value) left out, since
    they come from the text (`password: *secret` names the password)."""
    try:
        return yaml.load(text, Loader=_SAFE_LOADER)  # noqa: S506 (a safe loader)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = _QUOTED.sub("…", error.problem or "").strip()
        raise YamlError(f"is not valid YAML{where}: {problem}") from None
    except yaml.YAMLError as error:
        raise YamlError(f"is not valid YAML: {type(error).__name__}") from None
    except RecursionError:
        raise YamlError("is not valid here: nested too deeply") from None
    except (ValueError, TypeError, OverflowError):
        # A value that does not fit its tag or type (`!!int word`, the date 2024-13-45).
        raise YamlError("is not valid YAML: a value does not fit its type or tag") from None


# libyaml's parser when PyYAML has it (its wheels do): ten times as fast on a big file.
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")


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
    site = _site("environment", ENV_DSN, raw)
    return ExporterConfig(sites=(site,), source="environment")


def _site(
    source: str, key: str, raw: dict[str, Any], defaults: dict[str, Any] | None = None
) -> SiteConfig:
    """Precedence, lowest first: `defaults:`, the site's DSN, the site's own keys."""
    _reject_unknown(source, key, raw, SITE_KEYS)
    fields: dict[str, Any] = {}
    tls: dict[str, Any] = {}
    if defaults:
        _scalars_and_tls(source, "defaults", defaults, fields, tls)
        raw = _merge_defaults(defaults, raw)
    if "dsn" in raw:
        clash = sorted({"host", "port", "user", "database", "unix_socket"} & raw.keys())
        if clash:
            raise ConfigError(source, f"{key}.dsn", f"give either dsn or {', '.join(clash)}")
        dsn_fields, dsn_tls = _parse_dsn(source, f"{key}.dsn", raw["dsn"])
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
    _check_tls_files(source, f"{key}.tls", tls)
    fields["tls"] = TLSConfig(**tls)

    fields["alerts"] = AlertThresholds(
        **_section(source, f"{key}.alerts", raw.get("alerts", {}), _ALERT_KEYS)
    )
    if "workers" in raw:
        fields["workers"] = _workers(source, f"{key}.workers", raw["workers"])
    if "kubernetes" in raw:
        fields["kubernetes"] = KubernetesConfig(
            **_section(
                source,
                f"{key}.kubernetes",
                raw["kubernetes"],
                _KUBERNETES_KEYS,
                ("namespace", "selector"),
            )
        )
    if "groups" in raw:
        fields["groups"] = _groups(source, f"{key}.groups", raw["groups"])
    if "hooks" in raw:
        fields["hooks"] = _hooks(source, f"{key}.hooks", raw["hooks"])
    fields["password"] = _password(source, key, raw, fields.pop("password", ""))
    fields["labels"] = _labels(source, f"{key}.labels", raw.get("labels", {}))

    if "database" not in fields:
        raise ConfigError(source, f"{key}.database", "is missing (the WordPress database name)")
    name = raw.get("name", fields["database"])
    fields["name"] = _checked(source, f"{key}.name", values.text, name)
    site = SiteConfig(**fields)
    if "replica" in raw:
        site = replace(site, replica=_replica(source, f"{key}.replica", raw["replica"], site))
    return site


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
    parsed = _site(source, key, {"name": site.name, **connection})
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


def _parse_dsn(source: str, key: str, dsn: object) -> tuple[dict[str, Any], dict[str, Any]]:
    if not isinstance(dsn, str):
        raise ConfigError(source, key, "must be a string such as mysql://user@host:3306/db")
    try:
        parts = urlsplit(dsn)
        parts.port  # noqa: B018 - parses the port: raises for a bad one
    except ValueError as error:
        problem = (
            "has a port that is not a number from 1 to 65535"
            if "Port" in str(error)
            else ("is not a valid URL (check the brackets of an IPv6 address)")
        )
        raise ConfigError(source, key, problem) from None
    if parts.scheme not in {"mysql", "mariadb"}:
        raise ConfigError(source, key, "must start with mysql:// or mariadb://")
    fields: dict[str, Any] = {}
    tls: dict[str, Any] = {}
    try:
        port = parts.port
    except ValueError as error:
        raise ConfigError(source, key, "has a port that is not a number from 1 to 65535") from error
    if parts.hostname:
        fields["host"] = parts.hostname
    if port is not None:
        fields["port"] = port
    if parts.username:
        fields["user"] = unquote(parts.username)
    if parts.password is not None:
        fields["password"] = unquote(parts.password)
    database = unquote(parts.path.lstrip("/"))
    if database:
        fields["database"] = database
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if name in _DSN_TLS_PARAMS:
            tls_key = _DSN_TLS_PARAMS[name]
            tls[tls_key] = _checked(source, f"{key}?{name}", _TLS_KEYS[tls_key], value)
        elif name in _SCALARS and name not in {"host", "port", "user", "database"}:
            fields[name] = _checked(source, f"{key}?{name}", _SCALARS[name], value)
        else:
            raise ConfigError(source, f"{key}?{name}", "is not a known DSN parameter")
    return fields, tls


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
            closest = difflib.get_close_matches(str(name), sorted(known), n=1, cutoff=0.6)
            hint = (
                f"did you mean {closest[0]}?" if closest else f"known: {', '.join(sorted(known))}"
            )
            raise ConfigError(source, where, f"is not a known key ({hint})")


def _checked(source: str, key: str, check: Callable[[Any], Any], value: object) -> Any:
    try:
        return check(value)
    except ValueError as error:
        raise ConfigError(source, key, str(error)) from error
