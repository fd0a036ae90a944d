"""SIGHUP: the configuration and the web configuration read again while serving."""

from __future__ import annotations

import logging
import ssl
import threading
from collections.abc import Callable

from actionscheduler_exporter.config import ConfigError, ExporterConfig
from actionscheduler_exporter.logs import emit
from actionscheduler_exporter.scrape.budget import after_scrapes_in_flight
from actionscheduler_exporter.scrape.coordinator import Coordinator
from actionscheduler_exporter.split.helpers import NO_HELPERS, Helpers
from actionscheduler_exporter.split.parts import part_config
from actionscheduler_exporter.web.serving import CurrentServing, ServedWith
from actionscheduler_exporter.web.tls import ServerTLS, TLSHolder
from actionscheduler_exporter.web.webconfig import WebConfig

log = logging.getLogger(__name__)


class Reloader:
    """SIGHUP: the configuration and the web configuration read again, on a thread of
    their own. All of a new configuration applies, or none of it: the sites, basic auth
    and headers from the next request on (sites whose settings did not change keep their
    counters, log cursors and totals; a changed one starts again; a new connection budget
    or shard needs a new coordinator, the old one closed once the scrapes that use it are
    answered), every TLS setting (certificate, client certificates and their CA, allowed
    SANs, versions, ciphers, curve) from the next connection on, in a context built
    afresh. One that does not load, or cannot apply, is logged with the reason and the
    running one kept; `CurrentServing.reloads` tells the metrics. The listen addresses and TLS on
    or off need a restart."""

    def __init__(
        self,
        live: CurrentServing,
        load: Callable[[], tuple[ExporterConfig, WebConfig]],
        listen: tuple[str, int],
        tls: TLSHolder,
        helpers_for: Callable[[ExporterConfig], Helpers] = lambda _config: NO_HELPERS,
    ) -> None:
        """`helpers_for`: starts the helper processes of a configuration that needs
        another number of them."""
        self._live = live
        self._load = load
        self._listen = listen
        self._tls = tls
        self._helpers_for = helpers_for
        self._lock = threading.Lock()

    def start(self) -> None:
        threading.Thread(target=self.reload, name="reload", daemon=True).start()

    def reload(self) -> None:
        with self._lock:
            try:
                config, web = self._load()
                if (self._tls.current is not None) != web.tls:
                    raise ConfigError(
                        "web configuration",
                        "tls_server_config",
                        "turning TLS on or off needs a restart",
                    )
                # Built whole before anything is replaced: a failure keeps the old one.
                server_tls = ServerTLS.of(web.tls_settings) if web.tls_settings else None
                old = self._live.current.coordinator
                # Unchanged sites keep what they counted (log cursors, counters, totals);
                # only a new connection budget, shard or number of processes needs a
                # coordinator of its own.
                own = part_config(config, 0)
                kept = old.reconfigure(own)
                coordinator = old if kept else Coordinator(own)
            except (ConfigError, OSError, ssl.SSLError, ValueError) as error:
                self._live.reloads.failed()
                emit(log, logging.ERROR, "reload failed, the running configuration is kept",
                     error=str(error))  # fmt: skip
                return
            if (config.listen_host, config.listen_port) != self._listen:
                emit(log, logging.WARNING, "the listen address changes at the next restart")
            # The helpers take their parts of the sites as the coordinator takes its own.
            old_helpers = self._live.current.helpers
            helpers_kept = old_helpers.reconfigure(config)
            helpers = old_helpers if helpers_kept else self._helpers_for(config)
            self._tls.current = server_tls
            self._live.current = ServedWith.of(coordinator, web, helpers)
            self._live.reloads.succeeded()
            # Scrapes that took the old coordinator or helpers finish with them first.
            if not kept:
                after_scrapes_in_flight(old.close)
            if not helpers_kept:
                after_scrapes_in_flight(old_helpers.close)
            emit(log, logging.INFO, "configuration reloaded", sites=len(config.sites),
                 tls=web.tls, state="kept for unchanged sites" if kept else "new")  # fmt: skip
