"""The web configuration file of Prometheus' exporter-toolkit: TLS and basic auth.

Every key exporter-toolkit documents is read, so a node_exporter web configuration file
serves here unchanged:

    tls_server_config:
      cert_file: server.crt
      key_file: server.key
      client_auth_type: RequireAndVerifyClientCert   # optional
      client_ca_file: ca.crt                         # with client_auth_type
      client_allowed_sans: [prometheus.example]      # a client certificate must carry one
      min_version: TLS12                             # TLS10 to TLS13 (default TLS12)
      max_version: TLS13                             # default: the newest
      cipher_suites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256]   # Go's names, TLS 1.2
      prefer_server_cipher_suites: true              # default true
      curve_preferences: [X25519]                    # the first is used (see tls.py)
    basic_auth_users:
      prometheus: $2y$10$...                         # bcrypt hashes (htpasswd -nBC 10 "")
    http_server_config:
      headers: {X-Frame-Options: deny}
      http2: true                                    # accepted; HTTP/1.1 is served

Relative paths are relative to the file, as in exporter-toolkit.
"""

from __future__ import annotations

import logging
import re
import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from actionscheduler_exporter.config.errors import ConfigError
from actionscheduler_exporter.config.yaml_text import read_yaml
from actionscheduler_exporter.logs import emit
from actionscheduler_exporter.web.tls import (
    CIPHER_SUITES,
    CURVES,
    TLS13_SUITES,
    TLS_VERSIONS,
    ServerTLS,
    TLSSettings,
)

log = logging.getLogger(__name__)

CLIENT_AUTH_TYPES = {
    "NoClientCert": ssl.CERT_NONE,
    "RequestClientCert": ssl.CERT_OPTIONAL,
    "RequireAnyClientCert": ssl.CERT_REQUIRED,
    "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
    "RequireAndVerifyClientCert": ssl.CERT_REQUIRED,
}
_TOP = {"tls_server_config", "basic_auth_users", "http_server_config"}
_TLS = {
    "cert_file",
    "key_file",
    "client_auth_type",
    "client_ca_file",
    "client_allowed_sans",
    "min_version",
    "max_version",
    "cipher_suites",
    "prefer_server_cipher_suites",
    "curve_preferences",
}
_HTTP = {"headers", "http2"}


@dataclass(frozen=True)
class WebConfig:
    tls_settings: TLSSettings | None = None
    users: dict[str, bytes] = field(default_factory=dict, repr=False)
    headers: dict[str, str] = field(default_factory=dict)
    http2: bool = True  # exporter-toolkit's default; only HTTP/1.1 is served either way

    @property
    def tls(self) -> bool:
        return self.tls_settings is not None


def load_web_config(path: str) -> WebConfig:
    source = str(path)
    base = Path(path).resolve().parent
    document = read_yaml(source) or {}
    top = _mapping(source, "", document, _TOP)
    tls = _mapping(source, "tls_server_config", top.get("tls_server_config") or {}, _TLS)
    users = _mapping(source, "basic_auth_users", top.get("basic_auth_users") or {}, None)
    http = _mapping(source, "http_server_config", top.get("http_server_config") or {}, _HTTP)
    headers = _mapping(source, "http_server_config.headers", http.get("headers") or {}, None)
    return WebConfig(
        tls_settings=_tls_settings(source, base, tls) if tls else None,
        users={
            str(user): _bcrypt_hash(source, f"basic_auth_users.{user}", hashed)
            for user, hashed in users.items()
        },
        headers=_headers(source, headers),
        http2=_boolean(source, "http_server_config.http2", http.get("http2", True)),
    )


def _tls_settings(source: str, base: Path, tls: dict[str, Any]) -> TLSSettings:
    key = "tls_server_config"
    for name in ("cert_file", "key_file"):
        if name not in tls:
            raise ConfigError(source, f"{key}.{name}", "is missing")
    cert_file = _file(source, f"{key}.cert_file", base, tls["cert_file"])
    key_file = _file(source, f"{key}.key_file", base, tls["key_file"])
    auth = tls.get("client_auth_type", "NoClientCert")
    if auth not in CLIENT_AUTH_TYPES:
        raise ConfigError(
            source,
            f"{key}.client_auth_type",
            f"must be one of {', '.join(CLIENT_AUTH_TYPES)}, got {auth!r}",
        )
    client_ca_file = None
    if "client_ca_file" in tls:
        client_ca_file = _file(source, f"{key}.client_ca_file", base, tls["client_ca_file"])
    elif auth != "NoClientCert":
        # Without a CA no client certificate can be accepted: every client would be
        # refused (RequireAnyClientCert) or none checked (the others).
        raise ConfigError(
            source, f"{key}.client_ca_file", f"is needed with client_auth_type {auth}"
        )
    allowed_sans = _names(source, f"{key}.client_allowed_sans", tls.get("client_allowed_sans"))
    if allowed_sans and auth == "NoClientCert":
        raise ConfigError(
            source,
            f"{key}.client_allowed_sans",
            "needs a client_auth_type that asks for a client certificate "
            "(RequireAndVerifyClientCert)",
        )
    min_version = _version(source, f"{key}.min_version", tls.get("min_version", "TLS12"))
    max_version = None
    if tls.get("max_version") is not None:
        max_version = _version(source, f"{key}.max_version", tls["max_version"])
        if max_version < min_version:
            raise ConfigError(source, f"{key}.max_version", "is below min_version")
    settings = TLSSettings(
        cert_file=cert_file,
        key_file=key_file,
        client_ca_file=client_ca_file,
        client_cert_mode=CLIENT_AUTH_TYPES[auth],
        min_version=min_version,
        max_version=max_version,
        ciphers=_ciphers(source, f"{key}.cipher_suites", tls.get("cipher_suites")),
        prefer_server_ciphers=_boolean(
            source,
            f"{key}.prefer_server_cipher_suites",
            tls.get("prefer_server_cipher_suites", True),
        ),
        curve=_curve(source, f"{key}.curve_preferences", tls.get("curve_preferences")),
        allowed_sans=allowed_sans,
    )
    _check_context(source, settings)
    return settings


def _check_context(source: str, settings: TLSSettings) -> None:
    """The context is built once at load: a key that does not go with its certificate,
    or a CA file that is not one, fails here with the key to blame."""
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(
            settings.cert_file, settings.key_file
        )
    except ssl.SSLError as error:
        raise ConfigError(
            source,
            "tls_server_config.key_file",
            f"does not go with cert_file, or one of them is not PEM ({error.reason})",
        ) from None
    if settings.client_ca_file:
        try:
            ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_verify_locations(settings.client_ca_file)
        except ssl.SSLError as error:
            raise ConfigError(
                source,
                "tls_server_config.client_ca_file",
                f"cannot be read as PEM certificates ({error.reason})",
            ) from None
    try:
        ServerTLS.of(settings)
    except (ssl.SSLError, ValueError) as error:
        raise ConfigError(source, "tls_server_config", f"cannot be applied ({error})") from None


def _version(source: str, key: str, value: object) -> ssl.TLSVersion:
    if value not in TLS_VERSIONS:
        raise ConfigError(source, key, f"must be one of {', '.join(TLS_VERSIONS)}, got {value!r}")
    return TLS_VERSIONS[str(value)]


def _ciphers(source: str, key: str, value: object) -> tuple[str, ...]:
    """OpenSSL's names of the TLS 1.2 suites listed (TLS 1.3's are always offered)."""
    names = _names(source, key, value)
    if not names:
        return ()
    chosen: list[str] = []
    for name in names:
        if name in TLS13_SUITES:
            continue
        if name not in CIPHER_SUITES:
            raise ConfigError(source, key, f"{name!r} is not a cipher suite Go knows")
        openssl = CIPHER_SUITES[name]
        if not _available(openssl):
            raise ConfigError(
                source, key, f"{name} ({openssl}) is not offered by this OpenSSL: it is insecure"
            )
        chosen.append(openssl)
    return tuple(dict.fromkeys(chosen))


def _available(openssl_name: str) -> bool:
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).set_ciphers(openssl_name)
    except ssl.SSLError:
        return False
    return True


def _curve(source: str, key: str, value: object) -> str | None:
    """Python's ssl module sets one curve (key exchange group) per context: the first,
    most preferred one of the list."""
    names = _names(source, key, value)
    for name in names:
        if name not in CURVES:
            raise ConfigError(source, key, f"must be among {', '.join(CURVES)}, got {name!r}")
    if len(names) > 1:
        emit(log, logging.INFO, "only the first curve is used", key=key, curve=names[0])
    return CURVES[names[0]] if names else None


def _names(source: str, key: str, value: object) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
        raise ConfigError(source, key, "must be a list of names")
    return tuple(value)


def _boolean(source: str, key: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(source, key, "must be true or false")
    return value


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
