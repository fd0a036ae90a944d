"""SIGHUP: the configuration and the web configuration read again while serving."""

from __future__ import annotations

import logging
import ssl
import threading
from collections.abc import Callable

from actionscheduler_exporter.config import ConfigError, ExporterConfig
from actionscheduler_exporter.scrape.budget import DEFAULT_SCRAPE_TIMEOUT
from actionscheduler_exporter.scrape.coordinator import Coordinator
from actionscheduler_exporter.web.app import Live, Serving
from actionscheduler_exporter.web.webconfig import WebConfig

log = logging.getLogger(__name__)


class Reloader:
    """SIGHUP: the configuration and the web configuration read again, on a thread of
    their own. A new configuration is served from the next request on (the old
    coordinator closed once the scrapes that use it are answered); one that does not load
    is logged and the running one kept. The listen address and TLS on or off need a
    restart; the certificate and key are read again into the running TLS context."""

    def __init__(
        self,
        live: Live,
        load: Callable[[], tuple[ExporterConfig, WebConfig]],
        listen: tuple[str, int],
        context: ssl.SSLContext | None,
    ) -> None:
        self._live = live
        self._load = load
        self._listen = listen
        self._context = context
        self._lock = threading.Lock()

    def start(self) -> None:
        threading.Thread(target=self.reload, name="reload", daemon=True).start()

    def reload(self) -> None:
        with self._lock:
            try:
                config, web = self._load()
                if (self._context is not None) != web.tls:
                    raise ConfigError(
                        "web configuration",
                        "tls_server_config",
                        "turning TLS on or off needs a restart",
                    )
                if self._context is not None and web.cert_file and web.key_file:
                    self._context.load_cert_chain(web.cert_file, web.key_file)
            except (ConfigError, OSError, ssl.SSLError) as error:
                log.error("reload failed, the running configuration is kept: %s", error)
                return
            if (config.listen_host, config.listen_port) != self._listen:
                log.warning("the listen address changes at the next restart, not on reload")
            old = self._live.current.coordinator
            self._live.current = Serving.of(Coordinator(config), web)
            # Scrapes that took the old coordinator finish with it first.
            timer = threading.Timer(2 * DEFAULT_SCRAPE_TIMEOUT, old.close)
            timer.daemon = True
            timer.start()
            log.info("configuration reloaded sites=%d", len(config.sites))
