"""Command line: serve the metrics (default) or check the sites once."""

from __future__ import annotations

import argparse
import gc
import logging
import math
import os
import signal
import ssl
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
from actionscheduler_exporter.scrape.budget import DEFAULT_SCRAPE_TIMEOUT, MAX_SCRAPE_TIMEOUT
from actionscheduler_exporter.scrape.coordinator import Coordinator
from actionscheduler_exporter.sharding import ENV_POD_NAME, FROM_POD_NAME, parse_shard
from actionscheduler_exporter.web.guarded_http import (
    DEFAULT_HEADER_TIMEOUT,
    DEFAULT_MAX_CONNECTIONS,
    guarded_protocol,
)
from actionscheduler_exporter.web.webconfig import WebConfig, load_web_config, server_ssl_context

if TYPE_CHECKING:
    from uvicorn.protocols.http.h11_impl import H11Protocol

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
        epilog="Without --config: the file $AS_EXPORTER_CONFIG names, when it exists (the "
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
    parser.add_argument("--config", metavar="FILE", help="YAML file listing the sites")
    parser.add_argument(
        "--web.listen-address",
        "--listen-address",
        dest="listen_address",
        metavar="[HOST]:PORT",
        help=f"where to serve HTTP (default: ${ENV_LISTEN_ADDRESS}, else :{DEFAULT_PORT}); "
        "--listen-address is the same",
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
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    configure_logging(args.log_level, args.log_format)
    if not args.telemetry_path.startswith("/") or args.telemetry_path in ("/", "/healthz"):
        print(
            "actionscheduler-exporter: invalid configuration: --web.telemetry-path must be a "
            f"path starting with / other than / and /healthz, got {args.telemetry_path!r}",
            file=sys.stderr,
        )
        return EXIT_CONFIG
    listen = args.listen_address or os.environ.get(ENV_LISTEN_ADDRESS)
    if args.command == "healthcheck":
        try:
            host, port = listen_address(listen) if listen else ("", DEFAULT_PORT)
        except ValueError as error:
            print(f"actionscheduler-exporter: --listen-address: {error}", file=sys.stderr)
            return EXIT_CONFIG
        problem = unhealthy(host, port)
        if problem:
            print(f"actionscheduler-exporter: unhealthy: {problem}", file=sys.stderr)
            return EXIT_UNHEALTHY
        return 0
    try:
        config, web = _load(args, listen)
    except ConfigError as error:
        print(f"actionscheduler-exporter: invalid configuration: {error}", file=sys.stderr)
        return EXIT_CONFIG

    if args.command == "check":
        if not (math.isfinite(args.timeout) and 0 < args.timeout <= MAX_SCRAPE_TIMEOUT):
            print(
                "actionscheduler-exporter: invalid configuration: --timeout must be a number "
                f"of seconds above 0 and at most {MAX_SCRAPE_TIMEOUT:.0f}",
                file=sys.stderr,
            )
            return EXIT_CONFIG
        return run_check(config, args.timeout)
    if not args.header_timeout > 0 or args.max_connections < 1:
        print(
            "actionscheduler-exporter: invalid configuration: --web.header-timeout must be "
            "positive and --web.max-connections at least 1",
            file=sys.stderr,
        )
        return EXIT_CONFIG
    return serve(
        config,
        web,
        lambda tls: guarded_protocol(args.header_timeout, args.max_connections, tls),
        reload=lambda: _load(args, listen),
        telemetry_path=args.telemetry_path,
    )


def _load(args: argparse.Namespace, listen: str | None) -> tuple[ExporterConfig, WebConfig]:
    """The configuration and the web configuration, from the files (or the environment)
    and the command line: at start, and again at every SIGHUP."""
    config = load_file(args.config) if args.config else load_default()
    if listen:
        try:
            host, port = listen_address(listen)
        except ValueError as error:
            raise ConfigError("command line", "--listen-address", str(error)) from None
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
    protocol: Callable[[ssl.SSLContext | None], type[H11Protocol]],
    reload: Callable[[], tuple[ExporterConfig, WebConfig]] | None = None,
    telemetry_path: str = "/metrics",
) -> int:
    """`protocol`: the HTTP protocol class for a TLS context (None: plain HTTP), which
    does the handshake itself."""
    import uvicorn

    from actionscheduler_exporter.web.app import Live, Serving, create_app
    from actionscheduler_exporter.web.reload import Reloader

    _tune_garbage_collection()
    coordinator = Coordinator(config)
    log.info(
        "starting version=%s sites=%d shard=%s listen=%s:%d tls=%s basic_auth=%s",
        __version__,
        len(coordinator.sites),
        config.shard,
        config.listen_host,
        config.listen_port,
        web.tls,
        bool(web.users),
    )
    live = Live(Serving.of(coordinator, web))
    context = server_ssl_context(web) if web.tls else None
    if reload is not None:
        reloader = Reloader(live, reload, (config.listen_host, config.listen_port), context)
        signal.signal(signal.SIGHUP, lambda _signal, _frame: reloader.start())
    # uvicorn drains, then raises the stop signal again with the handler it found: a
    # handler of ours makes that a clean exit 0 (after closing), not a death by SIGTERM.
    for stop in (signal.SIGTERM, signal.SIGINT):
        if signal.getsignal(stop) is not signal.SIG_IGN:
            signal.signal(stop, lambda _signal, _frame: None)
    try:
        uvicorn.run(
            create_app(coordinator, web, live, telemetry_path=telemetry_path),
            host=config.listen_host,
            port=config.listen_port,
            log_config=None,
            access_log=False,
            # A scrape in flight at SIGTERM is answered, not cut: its budget at most.
            timeout_graceful_shutdown=int(DEFAULT_SCRAPE_TIMEOUT),
            http=protocol(context),
        )
    finally:
        live.current.coordinator.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
