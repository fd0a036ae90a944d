"""The web server's settings without a server: Accept-Encoding (issue 36, item 10), the
checks of the guard's internals (issue 39, item 6), the command line's exporter-toolkit
flags and a DSN parameter's hint (issue 39, item 3)."""

from __future__ import annotations

import asyncio.sslproto
import os
import ssl

import pytest
from uvicorn.protocols.http import httptools_impl

from actionscheduler_exporter import cli, flags
from actionscheduler_exporter.config import ConfigError, load_environment
from actionscheduler_exporter.web import encoding, guard_support, listeners
from actionscheduler_exporter.web.tls import CIPHER_SUITES, CURVES


@pytest.mark.parametrize(
    ("header", "coding"),
    [
        ("gzip", "gzip"),
        ("gzip, deflate, br", "gzip"),  # what browsers send
        ("GZIP;Q=0.5", "gzip"),
        ("*", "gzip"),
        ("identity;q=0, *", "gzip"),
        # Issue 36, item 10: refused by name after a star, or with a parameter after q.
        ("*;q=1, gzip;q=0", "identity"),
        ("gzip;q=0;level=1", "identity"),
        ("gzip;level=1;q=0", "identity"),
        ("gzip;q=0.000", "identity"),
        ("*;q=0", "identity"),  # nothing acceptable: uncoded all the same
        ("identity", "identity"),
        ("identity, gzip;q=0.5", "identity"),  # identity preferred
        ("gzip;q=0.5, identity;q=0.4", "gzip"),
        ("deflate", "identity"),
        ("", "identity"),  # an empty header: identity only (RFC 9110)
        ("gzip;q=2", "identity"),  # not a weight: the header is not read
        ("gzip;q=abc", "identity"),
        (" , gzip ; q=1 ,", "gzip"),
    ],
)
def test_accept_encoding_is_read_as_rfc_9110_says(header: str, coding: str) -> None:
    assert encoding.chosen(header) == coding


def test_no_accept_encoding_means_no_coding() -> None:
    assert encoding.chosen(None) == "identity"


def test_the_guard_finds_what_it_needs_here() -> None:
    assert guard_support.problem() is None


def test_a_missing_uvicorn_internal_is_named_at_start(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 39, item 6: the guard subclasses uvicorn's HttpToolsProtocol; a uvicorn
    without what it overrides fails at start with a sentence, not at the first
    connection."""
    monkeypatch.delattr(httptools_impl.HttpToolsProtocol, "on_response_complete")
    problem = guard_support.problem()
    assert problem is not None and "HttpToolsProtocol lacks on_response_complete" in problem
    monkeypatch.setenv("AS_EXPORTER_DSN", "mysql://u@h/d")
    assert cli.main(["serve"]) == cli.EXIT_CONFIG
    assert "cannot serve: uvicorn's HttpToolsProtocol lacks on_response_complete" in (
        capsys.readouterr().err
    )


def test_a_missing_asyncio_internal_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(asyncio.sslproto, "SSLProtocol")
    problem = guard_support.problem()
    assert problem is not None and "asyncio.sslproto has no SSLProtocol" in problem


def test_a_changed_asyncio_signature_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    class Changed:
        def __init__(self, loop: object, app_protocol: object, sslcontext: object) -> None:
            pass

    monkeypatch.setattr(asyncio.sslproto, "SSLProtocol", Changed)
    problem = guard_support.problem()
    assert problem is not None and "takes no waiter, server_side" in problem


def test_a_missing_uvicorn_module_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(httptools_impl, "HttpToolsProtocol")
    problem = guard_support.problem()
    assert problem is not None and "uvicorn has no HttpToolsProtocol" in problem


def test_toolkit_spellings_and_the_old_ones() -> None:
    parser = flags.build_parser()
    for flag in ("--config.file", "--config"):
        assert parser.parse_args([flag, "a.yml"]).config == "a.yml"
    for flag in ("--log.level", "--log-level"):
        assert parser.parse_args([flag, "debug"]).log_level == "debug"
    both = parser.parse_args(
        ["--web.listen-address", ":1", "--listen-address", "127.0.0.1:2", "--web.systemd-socket"]
    )
    assert both.listen_address == [":1", "127.0.0.1:2"] and both.systemd_socket


def test_with_systemd_sockets_the_listen_addresses_are_ignored(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """As exporter-toolkit does; here no sockets were passed, which is said too."""
    monkeypatch.setenv("AS_EXPORTER_DSN", "mysql://u@h/d")
    monkeypatch.delenv("LISTEN_FDS", raising=False)
    assert cli.main(["--web.systemd-socket", "--web.listen-address", ":1"]) == 1
    err = capsys.readouterr().err
    assert "--web.systemd-socket: no sockets were passed" in err
    assert "--web.listen-address is ignored with --web.systemd-socket" in err


def test_a_misspelt_dsn_parameter_is_told_its_closest_known_one() -> None:
    """Issue 39, item 3: as a YAML key is."""
    with pytest.raises(ConfigError, match=r"table_prefx: is not a known DSN parameter") as raised:
        load_environment({"AS_EXPORTER_DSN": "mysql://u@h/d?table_prefx=wp_"})
    assert "did you mean table_prefix?" in str(raised.value)
    with pytest.raises(ConfigError, match=r"did you mean ssl_ca\?"):
        load_environment({"AS_EXPORTER_DSN": "mysql://u@h/d?ssl_cq=ca.pem"})
    with pytest.raises(ConfigError, match=r"known: .*table_prefix"):
        load_environment({"AS_EXPORTER_DSN": "mysql://u@h/d?colour=red"})


def test_an_unencoded_special_character_in_a_dsn_password_is_explained() -> None:
    with pytest.raises(ConfigError, match="percent-encode special characters"):
        load_environment({"AS_EXPORTER_DSN": "mysql://u:p#ss@h:3306/d"})
    (site,) = load_environment({"AS_EXPORTER_DSN": "mysql://u:p%23ss@h:3306/d"}).sites
    assert site.password == "p#ss"


def test_every_mapped_cipher_suite_and_curve_is_openssls() -> None:
    """Go's names map to names this OpenSSL knows (or that it dropped as insecure)."""
    insecure = {"RC4-SHA", "DES-CBC3-SHA", "ECDHE-ECDSA-RC4-SHA", "ECDHE-RSA-RC4-SHA"}
    insecure.add("ECDHE-RSA-DES-CBC3-SHA")
    for openssl in set(CIPHER_SUITES.values()) - insecure:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.set_ciphers(openssl)
        names = {c["name"] for c in context.get_ciphers() if c["protocol"] != "TLSv1.3"}
        assert names == {openssl}
    for curve in CURVES.values():
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).set_ecdh_curve(curve)


@pytest.mark.parametrize(
    ("environ", "problem"),
    [
        ({}, "no sockets were passed"),
        ({"LISTEN_PID": "1", "LISTEN_FDS": "1"}, "passed to process 1, not to this one"),
        ({"LISTEN_FDS": "x"}, "LISTEN_FDS must be a number above 0"),
        ({"LISTEN_FDS": "0"}, "LISTEN_FDS must be a number above 0"),
    ],
)
def test_socket_activation_that_cannot_work_is_named(environ: dict[str, str], problem: str) -> None:
    if "LISTEN_PID" not in environ and environ:
        environ = {**environ, "LISTEN_PID": str(os.getpid())}
    with pytest.raises(listeners.ListenError, match=problem):
        listeners.systemd_sockets(environ)


def test_two_addresses_bind_two_sockets_and_a_taken_one_is_named() -> None:
    bound = listeners.bind([("127.0.0.1", 0), ("127.0.0.1", 0)])
    try:
        assert len(bound) == 2
        taken = bound[0].getsockname()[1]
        with pytest.raises(listeners.ListenError, match=f"cannot listen on 127.0.0.1:{taken}"):
            listeners.bind([("127.0.0.1", taken)])
    finally:
        for sock in bound:
            sock.close()
