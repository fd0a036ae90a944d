"""A throw-away certificate authority for TLS tests, made with the openssl command."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Certificates:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def make_certificates(folder: Path, name: str = "test") -> Certificates:
    """A CA, a server certificate for 127.0.0.1 and localhost, and a client certificate."""
    folder.mkdir(parents=True, exist_ok=True)
    ca_key, ca = folder / f"{name}-ca.key", folder / f"{name}-ca.crt"
    # The extensions strict verifiers ask for (Python 3.13's default VERIFY_X509_STRICT).
    server_ext = folder / f"{name}-server.ext"
    server_ext.write_text(
        "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
        "keyUsage=critical,digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=serverAuth\nauthorityKeyIdentifier=keyid\n"
    )
    client_ext = folder / f"{name}-client.ext"
    client_ext.write_text(
        "keyUsage=critical,digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=clientAuth\nauthorityKeyIdentifier=keyid\n"
    )
    _run(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        ca_key,
        "-out",
        ca,
        "-days",
        "2",
        "-subj",
        f"/CN={name} test CA",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
        "-addext",
        "subjectKeyIdentifier=hash",
    )
    server_cert, server_key = _signed(folder, f"{name}-server", "127.0.0.1", ca, ca_key, server_ext)
    client_cert, client_key = _signed(
        folder, f"{name}-client", "prometheus", ca, ca_key, client_ext
    )
    return Certificates(ca, server_cert, server_key, client_cert, client_key)


def _signed(
    folder: Path, stem: str, common_name: str, ca: Path, ca_key: Path, extensions: Path | None
) -> tuple[Path, Path]:
    key, request, cert = folder / f"{stem}.key", folder / f"{stem}.csr", folder / f"{stem}.crt"
    _run(
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        key,
        "-out",
        request,
        "-subj",
        f"/CN={common_name}",
    )
    extra = ["-extfile", extensions] if extensions else []
    _run(
        "x509",
        "-req",
        "-in",
        request,
        "-CA",
        ca,
        "-CAkey",
        ca_key,
        "-CAcreateserial",
        "-out",
        cert,
        "-days",
        "2",
        *extra,
    )
    key.chmod(0o644)  # a server started as another user must read it
    return cert, key


def _run(*arguments: object) -> None:
    subprocess.run(["openssl", *map(str, arguments)], check=True, capture_output=True)
