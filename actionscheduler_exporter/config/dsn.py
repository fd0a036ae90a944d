"""A site's DSN: mysql://user:password@host:3306/database?table_prefix=wp_&ssl_ca=ca.pem.

Its query parameters are the site's scalar keys (under the same names, checked the same
way) and the TLS keys in the spelling MySQL clients use (`ssl_ca`...). The user and the
password are percent-decoded: a `#`, `:`, `/`, `?` or `@` in them must be written
percent-encoded (`%23`...), as in any URL.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from actionscheduler_exporter.config import suggest
from actionscheduler_exporter.config.errors import ConfigError

Check = Callable[[Any], Any]

# DSN parameters that configure TLS, in the spelling MySQL clients use.
DSN_TLS_PARAMS = {
    "ssl_ca": "ca_file",
    "ssl_verify": "verify",
    "ssl_cert": "cert_file",
    "ssl_key": "key_file",
}
# Given in the URL itself, not as parameters.
_IN_THE_URL = frozenset({"host", "port", "user", "database"})
_ENCODE = "percent-encode special characters of the user and password (# is %23, : is %3A)"


def parse_dsn(
    source: str,
    key: str,
    dsn: object,
    scalars: Mapping[str, Check],
    tls_keys: Mapping[str, Check],
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The site's fields and TLS keys a DSN gives; `scalars` and `tls_keys` check the
    parameters as the same YAML keys are checked."""
    if not isinstance(dsn, str):
        raise ConfigError(source, key, "must be a string such as mysql://user@host:3306/db")
    try:
        parts = urlsplit(dsn)
        port = parts.port  # parses the port: raises for a bad one
    except ValueError as error:
        problem = (
            f"has a port that is not a number from 1 to 65535 (or, if the port is right: {_ENCODE})"
            if "Port" in str(error) or "port" in str(error)
            else f"is not a valid URL (check the brackets of an IPv6 address, and {_ENCODE})"
        )
        raise ConfigError(source, key, problem) from None
    if parts.scheme not in {"mysql", "mariadb"}:
        raise ConfigError(source, key, "must start with mysql:// or mariadb://")
    fields: dict[str, Any] = {}
    tls: dict[str, Any] = {}
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
    parameters = {*DSN_TLS_PARAMS, *(name for name in scalars if name not in _IN_THE_URL)}
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        where = f"{key}?{name}"
        if name in DSN_TLS_PARAMS:
            tls_key = DSN_TLS_PARAMS[name]
            tls[tls_key] = _checked(source, where, tls_keys[tls_key], value)
        elif name in parameters:
            fields[name] = _checked(source, where, scalars[name], value)
        else:
            hint = suggest.unknown(name, parameters)
            raise ConfigError(source, where, f"is not a known DSN parameter ({hint})")
    return fields, tls


def _checked(source: str, key: str, check: Check, value: object) -> Any:
    try:
        return check(value)
    except ValueError as error:
        raise ConfigError(source, key, str(error)) from error
