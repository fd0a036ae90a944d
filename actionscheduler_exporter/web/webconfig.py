"""The web configuration file of Prometheus' exporter-toolkit: TLS and basic auth.

    tls_server_config:
      cert_file: server.crt
      key_file: server.key
      client_auth_type: RequireAndVerifyClientCert   # optional
      client_ca_file: ca.crt                         # with client_auth_type
      min_version: TLS12                             # TLS12 (default) or TLS13
    basic_auth_users:
      prometheus: $2y$10$...                         # bcrypt hashes (htpasswd -nBC 10 "")
    http_server_config:
      headers: {X-Frame-Options: deny}

Relative paths are relative to the file, as in exporter-toolkit.
"""

from __future__ import annotations

import re
import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from actionscheduler_exporter.config.errors import ConfigError
from actionscheduler_exporter.config.loader import read_yaml

CLIENT_AUTH_TYPES = {
    "NoClientCert": ssl.CERT_NONE,
    "RequestClientCert": ssl.CERT_OPTIONAL,
    "RequireAnyClientCert": ssl.CERT_REQUIRED,
    "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
    "RequireAndVerifyClientCert": ssl.CERT_REQUIRED,
}
TLS_VERSIONS = {"TLS12": ssl.TLSVersion.TLSv1_2, "TLS13": ssl.TLSVersion.TLSv1_3}
_TOP = {"tls_server_config", "basic_auth_users", "http_server_config"}
_TLS = {"cert_file", "key_file", "client_auth_type", "client_ca_file", "min_version"}


@dataclass(frozen=True)
class WebConfig:
    cert_file: str | None = None
    key_file: str | None = None
    client_ca_file: str | None = None
    client_cert_mode: ssl.VerifyMode = ssl.CERT_NONE
    min_version: ssl.TLSVersion = ssl.TLSVersion.TLSv1_2
    users: dict[str, bytes] = field(default_factory=dict, repr=False)
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def tls(self) -> bool:
        return self.cert_file is not None


def load_web_config(path: str) -> WebConfig:
    source = str(path)
    base = Path(path).resolve().parent
    document = read_yaml(source) or {}
    top = _mapping(source, "", document, _TOP)
    tls = _mapping(source, "tls_server_config", top.get("tls_server_config") or {}, _TLS)
    fields: dict[str, Any] = {}
    if tls:
        for name in ("cert_file", "key_file"):
            if name not in tls:
                raise ConfigError(source, f"tls_server_config.{name}", "is missing")
        for name in ("cert_file", "key_file"):
            fields[name] = _file(source, f"tls_server_config.{name}", base, tls[name])
        auth = tls.get("client_auth_type", "NoClientCert")
        if auth not in CLIENT_AUTH_TYPES:
            raise ConfigError(
                source,
                "tls_server_config.client_auth_type",
                f"must be one of {', '.join(CLIENT_AUTH_TYPES)}, got {auth!r}",
            )
        fields["client_cert_mode"] = CLIENT_AUTH_TYPES[auth]
        if "client_ca_file" in tls:
            fields["client_ca_file"] = _file(
                source, "tls_server_config.client_ca_file", base, tls["client_ca_file"]
            )
        elif auth != "NoClientCert":
            # Without a CA no client certificate can be accepted: every client would be
            # refused (RequireAnyClientCert) or none checked (the others).
            raise ConfigError(
                source,
                "tls_server_config.client_ca_file",
                f"is needed with client_auth_type {auth}",
            )
        version = tls.get("min_version", "TLS12")
        if version not in TLS_VERSIONS:
            raise ConfigError(
                source, "tls_server_config.min_version", f"must be TLS12 or TLS13, got {version!r}"
            )
        fields["min_version"] = TLS_VERSIONS[version]
        _check_key_pair(source, fields["cert_file"], fields["key_file"])
    users = _mapping(source, "basic_auth_users", top.get("basic_auth_users") or {}, None)
    fields["users"] = {
        str(user): _bcrypt_hash(source, f"basic_auth_users.{user}", hashed)
        for user, hashed in users.items()
    }
    http = _mapping(source, "http_server_config", top.get("http_server_config") or {}, {"headers"})
    headers = _mapping(source, "http_server_config.headers", http.get("headers") or {}, None)
    fields["headers"] = _headers(source, headers)
    return WebConfig(**fields)


def server_ssl_context(config: WebConfig) -> ssl.SSLContext:
    if config.cert_file is None or config.key_file is None:
        raise ValueError("the web configuration has no TLS certificate")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = config.min_version
    context.load_cert_chain(config.cert_file, config.key_file)
    context.verify_mode = config.client_cert_mode
    if config.client_ca_file:
        context.load_verify_locations(config.client_ca_file)
    return context


def _check_key_pair(source: str, cert_file: str, key_file: str) -> None:
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(cert_file, key_file)
    except ssl.SSLError as error:
        raise ConfigError(
            source,
            "tls_server_config.key_file",
            f"does not go with cert_file, or one of them is not PEM ({error.reason})",
        ) from None


# $2y$, a cost of 04 to 31 (what bcrypt accepts), 53 characters of salt and hash.
_BCRYPT = re.compile(r"\$2[aby]\$(0[4-9]|[12][0-9]|3[01])\$[./A-Za-z0-9]{53}")
# A header's name is a token (RFC 9110); its value visible ASCII, spaces and tabs.
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_HEADER_VALUE = re.compile(r"[\x20-\x7e\t]*")


def _bcrypt_hash(source: str, key: str, value: object) -> bytes:
    text = str(value) if value is not None else ""
    if not _BCRYPT.fullmatch(text):
        raise ConfigError(
            source,
            key,
            "must be a bcrypt hash ($2y$, a cost of 04 to 31, 60 characters in all), as "
            "htpasswd -nBC 10 prints it",
        )
    return text.encode()


def _headers(source: str, raw: dict[str, Any]) -> dict[str, str]:
    """Response headers that can be sent as they are: a bad one fails at load, not on
    every request."""
    headers: dict[str, str] = {}
    for name, value in raw.items():
        key = f"http_server_config.headers.{name!r}"
        if not _HEADER_NAME.fullmatch(str(name)):
            raise ConfigError(source, key, "is not a valid header name (letters, digits, -)")
        if not isinstance(value, str | int | float) or not _HEADER_VALUE.fullmatch(str(value)):
            raise ConfigError(
                source, key, "must be a value of visible ASCII characters (no line breaks)"
            )
        headers[str(name)] = str(value)
    return headers


def _file(source: str, key: str, base: Path, value: object) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigError(source, key, "must be a file path")
    path = Path(value) if Path(value).is_absolute() else base / value
    if not path.is_file():
        raise ConfigError(source, key, f"file {path} does not exist")
    return str(path)


def _mapping(source: str, key: str, raw: object, known: set[str] | None) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise ConfigError(source, key or "(top level)", "must be a mapping")
    if known is not None:
        for name in raw:
            if name not in known:
                where = f"{key}.{name}" if key else str(name)
                raise ConfigError(
                    source, where, f"is not a known key (known: {', '.join(sorted(known))})"
                )
    return raw
