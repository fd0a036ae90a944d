"""Command line: serve the metrics (default) or check the sites once."""

from __future__ import annotations

import argparse
import gc
import logging
import math
import os
import signal
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from actionscheduler_exporter import __version__, check
from actionscheduler_exporter.config import ConfigError, ExporterConfig, load_default, load_file
from actionscheduler_exporter.config.model import DEFAULT_PORT
from actionscheduler_exporter.config.values import listen_address
from actionscheduler_exporter.healthcheck import unhealthy
from actionscheduler_exporter.logs import configure as configure_logging
from actionscheduler_exporter.rounds.budget import DEFAULT_SCRAPE_TIMEOUT, MAX_SCRAPE_TIMEOUT
from actionscheduler_exporter.rounds.coordinator import Coordinator
from actionscheduler_exporter.sharding import ENV_POD_NAME, FROM_POD_NAME, parse_shard
from actionscheduler_exporter.web import guard_support
from actionscheduler_exporter.web.guard_support import (
    DEFAULT_HEADER_TIMEOUT,
    DEFAULT_MAX_CONNECTIONS,
)
from actionscheduler_exporter.web.webconfig import WebConfig, load_web_config

if TYPE_CHECKING:
    import socket

    from uvicorn.protocols.http.h11_impl import H11Protocol

    from actionscheduler_exporter.web.tls import TLSHolder

EXIT_CONFIG = 2
# The listen address for the server and the healthcheck alike, where a container's
# HEALTHCHECK cannot see the server's command line.
ENV_LISTEN_ADDRESS = "AS_EXPORTER_LISTEN_ADDRESS"
EXIT_UNHEALTHY = 1

log = logging.getLogger("actionscheduler_exporter")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="actionscheduler-exporter",
        description="Prometheus exporter for Action Scheduler queues (WooCommerce, WordPress).",
        epilog="Without --config.file: the file $AS_EXPORTER_CONFIG names, when it exists (the "
        "image sets /etc/actionscheduler-exporter/exporter.yml); else one site from "
        "AS_EXPORTER_DSN (mysql://user:password@host:3306/database?table_prefix=wp_), "
        "AS_EXPORTER_SITE and AS_EXPORTER_PASSWORD_FILE.",
    )
    parser.add_argument(
        "command",
        nargs="?",
        choices=("serve", "check", "healthcheck"),
        default="serve",
        help="serve: the HTTP exporter (default); check: print each site's "
        "queue health once and exit non-zero when a site is down; healthcheck: exit 0 when "
        "the exporter on this host answers /healthz (for a container's HEALTHCHECK)",
    )
    parser.add_argument(
        "--config.file",
        "--config",
        dest="config",
        metavar="FILE",
        help="YAML file listing the sites; --config is the same",
    )
    _web_flags(parser)
    _log_flags(parser)
    _check_and_shard_flags(parser)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    return parser


def _web_flags(parser: argparse.ArgumentParser) -> None:
    """exporter-toolkit's flags, with its spellings."""
    parser.add_argument(
        "--web.listen-address",
        "--listen-address",
        dest="listen_address",
        action="append",
        metavar="[HOST]:PORT",
        help=f"where to serve HTTP, repeated for several addresses (default: "
        f"${ENV_LISTEN_ADDRESS}, else :{DEFAULT_PORT}); --listen-address is the same",
    )
    parser.add_argument(
        "--web.systemd-socket",
        dest="systemd_socket",
        action="store_true",
        help="serve on the sockets systemd passes (socket activation) instead of "
        "--web.listen-address",
    )
    parser.add_argument(
        "--web.telemetry-path",
        dest="telemetry_path",
        default="/metrics",
        metavar="PATH",
        help="the path of the metrics (default /metrics)",
    )
    parser.add_argument(
        "--web.config.file",
        dest="web_config_file",
        metavar="FILE",
        help="exporter-toolkit web configuration: TLS and basic auth",
    )
    parser.add_argument(
        "--web.header-timeout",
        dest="header_timeout",
        type=float,
        default=DEFAULT_HEADER_TIMEOUT,
        metavar="SECONDS",
        help="close a connection whose request line and headers take longer "
        f"(default {DEFAULT_HEADER_TIMEOUT:.0f})",
    )
    parser.add_argument(
        "--web.max-connections",
        dest="max_connections",
        type=int,
        default=DEFAULT_MAX_CONNECTIONS,
        metavar="N",
        help=f"close new connections beyond this many (default {DEFAULT_MAX_CONNECTIONS})",
    )


def _log_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--log.level",
        "--log-level",
        dest="log_level",
        default="info",
        choices=("debug", "info", "warn", "warning", "error"),
        help="the least level logged (default info); --log-level is the same",
    )
    parser.add_argument(
        "--log.format",
        dest="log_format",
        default="logfmt",
        choices=("logfmt", "json"),
        help="logfmt (default) or json, one object a line",
    )


def _check_and_shard_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--timeout",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="check: how long to wait for every site (default 10)",
    )
    parser.add_argument(
        "--shard",
        metavar="N",
        help="serve only the sites whose hash falls on shard N of --total-shards (0-based), "
        f"or {FROM_POD_NAME}: the ordinal of ${ENV_POD_NAME} (a StatefulSet pod)",
    )
    parser.add_argument(
        "--total-shards",
        type=int,
        default=1,
        metavar="N",
        help="how many exporters share the sites (default 1: this one serves all)",
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    configure_logging(args.log_level, args.log_format)
    problem = _flag_problem(args)
    if problem:
        return _refuse(problem)
    from_env = os.environ.get(ENV_LISTEN_ADDRESS)
    listen: list[str] = args.listen_address or ([from_env] if from_env else [])
    if args.command == "healthcheck":
        return _healthcheck(listen)
    if args.command == "serve":
        missing = guard_support.problem()  # before the guard is imported
        if missing:
            print(f"actionscheduler-exporter: cannot serve: {missing}", file=sys.stderr)
            return EXIT_CONFIG
    try:
        config, web = _load(args, listen)
        addresses = _addresses(listen)
    except ConfigError as error:
        return _refuse(str(error))
    if args.command == "check":
        return run_check(config, args.timeout)

    from actionscheduler_exporter.web.guarded_http import guarded_protocol

    if args.systemd_socket and args.listen_address:
        # As exporter-toolkit does: systemd's sockets replace the addresses.
        log.warning("--web.listen-address is ignored with --web.systemd-socket")

    return serve(
        config,
        web,
        lambda tls: guarded_protocol(args.header_timeout, args.max_connections, tls),
        reload=lambda: _load(args, listen),
        telemetry_path=args.telemetry_path,
        addresses=addresses or [(config.listen_host, config.listen_port)],
        systemd_socket=args.systemd_socket,
    )


def _refuse(problem: str) -> int:
    print(f"actionscheduler-exporter: invalid configuration: {problem}", file=sys.stderr)
    return EXIT_CONFIG


def _flag_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with the flags alone, before any file is read."""
    path = args.telemetry_path
    if not path.startswith("/") or path in ("/", "/healthz"):
        return (
            "--web.telemetry-path must be a path starting with / other than / and /healthz, "
            f"got {path!r}"
        )
    if args.command == "check" and not (
        math.isfinite(args.timeout) and 0 < args.timeout <= MAX_SCRAPE_TIMEOUT
    ):
        return f"--timeout must be a number of seconds above 0 and at most {MAX_SCRAPE_TIMEOUT:.0f}"
    if args.command == "serve" and not (args.header_timeout > 0 and args.max_connections >= 1):
        return "--web.header-timeout must be positive and --web.max-connections at least 1"
    return None


def _healthcheck(listen: list[str]) -> int:
    """Asks the first listen address (where the container's own server listens)."""
    try:
        host, port = listen_address(listen[0]) if listen else ("", DEFAULT_PORT)
    except ValueError as error:
        print(f"actionscheduler-exporter: --listen-address: {error}", file=sys.stderr)
        return EXIT_CONFIG
    problem = unhealthy(host, port)
    if problem:
        print(f"actionscheduler-exporter: unhealthy: {problem}", file=sys.stderr)
        return EXIT_UNHEALTHY
    return 0


def _addresses(listen: list[str]) -> list[tuple[str, int]]:
    addresses = []
    for address in listen:
        try:
            addresses.append(listen_address(address))
        except ValueError as error:
            raise ConfigError("command line", "--web.listen-address", str(error)) from None
    return list(dict.fromkeys(addresses))


def _load(args: argparse.Namespace, listen: list[str]) -> tuple[ExporterConfig, WebConfig]:
    """The configuration and the web configuration, from the files (or the environment)
    and the command line: at start, and again at every SIGHUP."""
    config = load_file(args.config) if args.config else load_default()
    addresses = _addresses(listen)
    if addresses:
        host, port = addresses[0]
        config = replace(config, listen_host=host, listen_port=port)
    try:
        config = replace(config, shard=parse_shard(args.shard, args.total_shards))
    except ValueError as error:
        raise ConfigError("command line", "--shard", str(error)) from None
    web = load_web_config(args.web_config_file) if args.web_config_file else WebConfig()
    return config, web


def _tune_garbage_collection() -> None:
    """A scrape of a thousand sites allocates a few hundred thousand short-lived objects;
    with the default thresholds the collector walks every long-lived one (the imported
    modules, the caches, the counts) many times per scrape. What exists at start is
    frozen out of its walks, and the young generation is collected less often: about a
    tenth of such a scrape's time (docs/performance.md). Reference counting still frees
    everything that is not in a cycle at once."""
    gc.freeze()
    gc.set_threshold(50_000, 20, 100)


def run_check(config: ExporterConfig, timeout: float) -> int:
    coordinator = Coordinator(config)
    try:
        results = coordinator.scrape(timeout)
    finally:
        coordinator.close()
    sys.stdout.write(check.report(results))
    return 0 if check.healthy(results) else EXIT_UNHEALTHY


def serve(
    config: ExporterConfig,
    web: WebConfig,
    protocol: Callable[[TLSHolder], type[H11Protocol]],
    reload: Callable[[], tuple[ExporterConfig, WebConfig]] | None = None,
    telemetry_path: str = "/metrics",
    addresses: list[tuple[str, int]] | None = None,
    systemd_socket: bool = False,
) -> int:
    """`protocol`: the HTTP protocol class for the server's TLS (a holder that a reload
    refills; empty: plain HTTP), which does the handshake itself. It listens on every
    address (default: the configuration's), or on systemd's sockets."""
    import uvicorn

    from actionscheduler_exporter.web import listeners
    from actionscheduler_exporter.web.app import create_app
    from actionscheduler_exporter.web.reload import Reloader
    from actionscheduler_exporter.web.serving import Live, Serving
    from actionscheduler_exporter.web.tls import ServerTLS, TLSHolder

    try:
        sockets: list[socket.socket] = (
            listeners.systemd_sockets()
            if systemd_socket
            else listeners.bind(addresses or [(config.listen_host, config.listen_port)])
        )
    except listeners.ListenError as error:
        print(f"actionscheduler-exporter: {error}", file=sys.stderr)
        return EXIT_UNHEALTHY
    _tune_garbage_collection()
    coordinator = Coordinator(config)
    log.info(
        "starting version=%s sites=%d shard=%s listen=%s tls=%s basic_auth=%s",
        __version__,
        len(coordinator.sites),
        config.shard,
        listeners.describe(sockets),
        web.tls,
        bool(web.users),
    )
    live = Live(Serving.of(coordinator, web))
    tls = TLSHolder(ServerTLS.of(web.tls_settings) if web.tls_settings else None)
    if reload is not None:
        reloader = Reloader(live, reload, (config.listen_host, config.listen_port), tls)
        signal.signal(signal.SIGHUP, lambda _signal, _frame: reloader.start())
    # uvicorn drains, then raises the stop signal again with the handler it found: a
    # handler of ours makes that a clean exit 0 (after closing), not a death by SIGTERM.
    for stop in (signal.SIGTERM, signal.SIGINT):
        if signal.getsignal(stop) is not signal.SIG_IGN:
            signal.signal(stop, lambda _signal, _frame: None)
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(coordinator, web, live, telemetry_path=telemetry_path),
            log_config=None,
            access_log=False,
            # A scrape in flight at SIGTERM is answered, not cut: its budget at most.
            timeout_graceful_shutdown=int(DEFAULT_SCRAPE_TIMEOUT),
            http=protocol(tls),
        )
    )
    try:
        server.run(sockets=sockets)
    finally:
        live.current.coordinator.close()
        for sock in sockets:
            sock.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
