"""Log lines in logfmt, the format Prometheus' own components write, or JSON (one object a
line), as exporter-toolkit's `--log.format` offers."""

from __future__ import annotations

import json
import logging
import sys
import time


class LogfmtFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        millis = int(record.msecs)
        message = record.getMessage().replace('"', "'").replace("\n", " ")
        line = (
            f"ts={stamp}.{millis:03d}Z level={record.levelname.lower()} "
            f'logger={record.name} msg="{message}"'
        )
        if record.exc_info:
            line += ' exc="' + self.formatException(record.exc_info).replace("\n", " | ") + '"'
        return line


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        entry = {
            "ts": f"{stamp}.{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def configure(level: str, log_format: str = "logfmt") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else LogfmtFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel("WARNING" if level == "warn" else level.upper())
