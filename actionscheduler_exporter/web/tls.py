"""The server's TLS: exporter-toolkit's settings (Go's names) applied to an OpenSSL
context, and the check of a client certificate's SANs (`client_allowed_sans`).

Go names cipher suites after the IANA registry (TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256),
OpenSSL has names of its own (ECDHE-RSA-AES128-GCM-SHA256): the table below maps one to
the other. TLS 1.3's three suites cannot be chosen in Go (nor with OpenSSL's cipher
list): they are accepted and always offered, as exporter-toolkit does.
"""

from __future__ import annotations

import ipaddress
import logging
import ssl
from dataclasses import dataclass

log = logging.getLogger(__name__)

TLS_VERSIONS = {
    "TLS10": ssl.TLSVersion.TLSv1,
    "TLS11": ssl.TLSVersion.TLSv1_1,
    "TLS12": ssl.TLSVersion.TLSv1_2,
    "TLS13": ssl.TLSVersion.TLSv1_3,
}
CIPHER_SUITES = {
    "TLS_RSA_WITH_RC4_128_SHA": "RC4-SHA",
    "TLS_RSA_WITH_3DES_EDE_CBC_SHA": "DES-CBC3-SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA": "AES128-SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA": "AES256-SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA256": "AES128-SHA256",
    "TLS_RSA_WITH_AES_128_GCM_SHA256": "AES128-GCM-SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384": "AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA": "ECDHE-ECDSA-RC4-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA": "ECDHE-ECDSA-AES128-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA": "ECDHE-ECDSA-AES256-SHA",
    "TLS_ECDHE_RSA_WITH_RC4_128_SHA": "ECDHE-RSA-RC4-SHA",
    "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA": "ECDHE-RSA-DES-CBC3-SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA": "ECDHE-RSA-AES128-SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA": "ECDHE-RSA-AES256-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256": "ECDHE-ECDSA-AES128-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256": "ECDHE-RSA-AES128-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    # Go's older spellings of the two above
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305": "ECDHE-ECDSA-CHACHA20-POLY1305",
}
TLS13_SUITES = frozenset(
    {"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"}
)
CURVES = {
    "CurveP256": "prime256v1",
    "CurveP384": "secp384r1",
    "CurveP521": "secp521r1",
    "X25519": "X25519",
}


@dataclass(frozen=True)
class TLSSettings:
    """What exporter-toolkit's `tls_server_config` asks for, checked and in OpenSSL's
    terms."""

    cert_file: str
    key_file: str
    client_ca_file: str | None = None
    client_cert_mode: ssl.VerifyMode = ssl.CERT_NONE
    min_version: ssl.TLSVersion = ssl.TLSVersion.TLSv1_2
    max_version: ssl.TLSVersion | None = None
    ciphers: tuple[str, ...] = ()  # OpenSSL names; empty: OpenSSL's defaults
    prefer_server_ciphers: bool = True
    curve: str | None = None  # OpenSSL's name of the one curve used
    allowed_sans: tuple[str, ...] = ()


@dataclass(frozen=True)
class ServerTLS:
    """A context built from settings, and the SANs a client certificate must carry."""

    context: ssl.SSLContext
    allowed_sans: tuple[str, ...] = ()

    @classmethod
    def of(cls, settings: TLSSettings) -> ServerTLS:
        """A new context: nothing of an older one (a CA, a version) carries over."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = settings.min_version
        if settings.max_version is not None:
            context.maximum_version = settings.max_version
        context.load_cert_chain(settings.cert_file, settings.key_file)
        context.verify_mode = settings.client_cert_mode
        if settings.client_ca_file:
            context.load_verify_locations(settings.client_ca_file)
        if settings.ciphers:
            context.set_ciphers(":".join(settings.ciphers))
        if settings.prefer_server_ciphers:
            context.options |= ssl.OP_CIPHER_SERVER_PREFERENCE
        else:
            context.options &= ~ssl.OP_CIPHER_SERVER_PREFERENCE
        if settings.curve is not None:
            context.set_ecdh_curve(settings.curve)
        return cls(context, settings.allowed_sans)

    def allows(self, ssl_object: ssl.SSLObject | None) -> bool:
        """Whether a connection's verified client certificate carries one of the allowed
        SANs (always, without `client_allowed_sans`). A connection without a certificate
        has none, so it is refused when the list is set."""
        if not self.allowed_sans:
            return True
        certificate = ssl_object.getpeercert() if ssl_object is not None else None
        entries = (certificate or {}).get("subjectAltName", ())
        found = {_san(entry[0], entry[1]) for entry in entries if len(entry) == 2}
        return any(_san("", allowed) in found for allowed in self.allowed_sans)


def _san(kind: object, value: object) -> str:
    """A SAN in a form that compares: an IP address in its short form (OpenSSL writes
    2001:DB8:0:0:0:0:0:1, Go and a person write 2001:db8::1), anything else as given."""
    text = str(value).strip()
    if kind in ("", "IP Address"):
        try:
            return str(ipaddress.ip_address(text))
        except ValueError:
            pass
    return text


class TLSHolder:
    """The server's current TLS, read for each new connection: a reload replaces it, and
    connections made before keep the one they were made with."""

    def __init__(self, current: ServerTLS | None) -> None:
        self.current = current
