"""Log lines in logfmt, the format Prometheus' own components write."""

from __future__ import annotations

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


def configure(level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(LogfmtFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
