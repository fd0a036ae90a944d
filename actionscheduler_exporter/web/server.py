"""`serve`: the HTTP server on its sockets, with TLS, reloads on SIGHUP and a clean stop."""

from __future__ import annotations

import logging
import signal
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from actionscheduler_exporter import __version__
from actionscheduler_exporter.config import ExporterConfig
from actionscheduler_exporter.logs import emit
from actionscheduler_exporter.scrape.budget import DEFAULT_SCRAPE_TIMEOUT
from actionscheduler_exporter.scrape.coordinator import Coordinator
from actionscheduler_exporter.scrape.garbage import tune_garbage_collection
from actionscheduler_exporter.split.helpers import Helpers
from actionscheduler_exporter.split.parts import part_config, processes_of
from actionscheduler_exporter.web.webconfig import WebConfig

if TYPE_CHECKING:  # the server's own modules load when it serves, not for `check`
    import socket

    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    from actionscheduler_exporter.web.tls import TLSHolder

log = logging.getLogger("actionscheduler_exporter")
# The exit status when the sockets cannot be had.
EXIT_UNHEALTHY = 1


def serve(
    config: ExporterConfig,
    web: WebConfig,
    protocol: Callable[[TLSHolder], type[HttpToolsProtocol]],
    reload: Callable[[], tuple[ExporterConfig, WebConfig]] | None = None,
    telemetry_path: str = "/metrics",
    addresses: list[tuple[str, int]] | None = None,
    systemd_socket: bool = False,
    helper_arguments: Sequence[str] = (),
) -> int:
    """`protocol`: the HTTP protocol class for the server's TLS (a holder that a reload
    refills; empty: plain HTTP), which does the handshake itself. It listens on every
    address (default: the configuration's), or on systemd's sockets. With `processes`
    above one, helper processes (started with `helper_arguments`: how to log) read the
    other parts of the sites (`split`)."""
    import uvicorn

    from actionscheduler_exporter.web import listeners
    from actionscheduler_exporter.web.app import create_app
    from actionscheduler_exporter.web.reload import Reloader
    from actionscheduler_exporter.web.serving import CurrentServing, ServedWith
    from actionscheduler_exporter.web.tls import ServerTLS, TLSHolder

    # The sockets listen before uvicorn installs its own signal handlers: a stop that
    # arrives in between (a container stopped as soon as its port answers) is kept and
    # handed to the server, not lost.
    early_stops: list[int] = []
    stops = [
        s for s in (signal.SIGTERM, signal.SIGINT) if signal.getsignal(s) is not signal.SIG_IGN
    ]
    for stop in stops:
        signal.signal(stop, lambda number, _frame: early_stops.append(number))
    try:
        sockets: list[socket.socket] = (
            listeners.systemd_sockets()
            if systemd_socket
            else listeners.bind(addresses or [(config.listen_host, config.listen_port)])
        )
    except listeners.ListenError as error:
        print(f"actionscheduler-exporter: {error}", file=sys.stderr)
        return EXIT_UNHEALTHY
    tune_garbage_collection()
    coordinator = Coordinator(part_config(config, 0))
    emit(log, logging.INFO, "starting", version=__version__, sites=len(coordinator.sites),
         shard=str(config.shard), processes=processes_of(config),
         listen=listeners.describe(sockets), tls=web.tls,
         basic_auth=bool(web.users))  # fmt: skip
    helpers = Helpers(config, helper_arguments)
    live = CurrentServing(ServedWith.of(coordinator, web, helpers))
    tls = TLSHolder(ServerTLS.of(web.tls_settings) if web.tls_settings else None)
    if reload is not None:
        reloader = Reloader(
            live,
            reload,
            (config.listen_host, config.listen_port),
            tls,
            lambda config: Helpers(config, helper_arguments),
        )
        signal.signal(signal.SIGHUP, lambda _signal, _frame: reloader.start())
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
    # uvicorn drains, then raises the stop signal again with the handler it found: this
    # one makes that a clean exit 0 (after closing), not a death by SIGTERM; before
    # uvicorn's handlers are in place it asks the server to stop.
    for stop in stops:
        signal.signal(stop, server.handle_exit)
    if early_stops:
        server.should_exit = True
    try:
        server.run(sockets=sockets)
    finally:
        live.current.helpers.close()
        live.current.coordinator.close()
        for sock in sockets:
            sock.close()
    return 0
