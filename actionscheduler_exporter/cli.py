"""Command line: serve the metrics (default) or check the sites once."""

from __future__ import annotations

import argparse
import logging
import math
import os
import sys
from collections.abc import Sequence
from dataclasses import replace

from actionscheduler_exporter import check
from actionscheduler_exporter.config import ConfigError, ExporterConfig, load_default, load_file
from actionscheduler_exporter.config.model import DEFAULT_PORT
from actionscheduler_exporter.config.values import listen_address
from actionscheduler_exporter.flags import ENV_LISTEN_ADDRESS, build_parser
from actionscheduler_exporter.healthcheck import unhealthy
from actionscheduler_exporter.logs import configure as configure_logging
from actionscheduler_exporter.logs import emit
from actionscheduler_exporter.scrape.budget import MAX_SCRAPE_TIMEOUT
from actionscheduler_exporter.sharding import parse_shard
from actionscheduler_exporter.web import guard_support, server
from actionscheduler_exporter.web.webconfig import WebConfig, load_web_config

EXIT_CONFIG = 2
EXIT_UNHEALTHY = server.EXIT_UNHEALTHY

log = logging.getLogger("actionscheduler_exporter")


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
        return check.run(config, args.timeout)

    from actionscheduler_exporter.web.guarded_http import guarded_protocol

    if args.systemd_socket and args.listen_address:
        # As exporter-toolkit does: systemd's sockets replace the addresses.
        emit(log, logging.WARNING, "--web.listen-address is ignored with --web.systemd-socket")

    return server.serve(
        config,
        web,
        lambda tls: guarded_protocol(args.header_timeout, args.max_connections, tls),
        reload=lambda: _load(args, listen),
        telemetry_path=args.telemetry_path,
        addresses=addresses or [(config.listen_host, config.listen_port)],
        systemd_socket=args.systemd_socket,
        helper_arguments=["--log-level", args.log_level, "--log-format", args.log_format],
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


if __name__ == "__main__":
    sys.exit(main())
