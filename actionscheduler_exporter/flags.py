"""The command line: every flag and subcommand, grouped as exporter-toolkit groups them."""

from __future__ import annotations

import argparse

from actionscheduler_exporter import __version__
from actionscheduler_exporter.config.model import DEFAULT_PORT
from actionscheduler_exporter.sharding import ENV_POD_NAME, FROM_POD_NAME
from actionscheduler_exporter.web.guard_support import (
    DEFAULT_HEADER_TIMEOUT,
    DEFAULT_MAX_CONNECTIONS,
)

# The listen address for the server and the healthcheck alike, where a container's
# HEALTHCHECK cannot see the server's command line.
ENV_LISTEN_ADDRESS = "AS_EXPORTER_LISTEN_ADDRESS"


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
