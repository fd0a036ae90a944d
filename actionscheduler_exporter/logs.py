"""Log lines in logfmt, the format Prometheus' own components write, or JSON (one object a
line), as exporter-toolkit's `--log.format` offers. The message is a short constant and
every detail is a field of its own (`site`, `kind`, `problem`, counts, durations), so that
Loki, Elastic or `grep site=shop` filter on it.

Code logs with `emit(log, level, "site down", site=..., kind=...)`; records of other
libraries (uvicorn) keep their message and get no fields. stdlib logging and these two
formatters are all it takes: a structured-logging library would add a dependency for the
same two lines of output.
"""

from __future__ import annotations

import json
import logging
import math
import re
import sys
import time
from collections.abc import Mapping

# The attribute of a LogRecord that holds its fields.
FIELDS = "as_fields"
_RESERVED = ("ts", "level", "logger", "msg")
_KEY = re.compile(r"[^A-Za-z0-9_.]")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_NEEDS_QUOTES = re.compile(r'[\s="\\]|^$')


def emit(logger: logging.Logger, level: int, message: str, **fields: object) -> None:
    """One line: a constant `message` and its fields."""
    if logger.isEnabledFor(level):
        logger.log(level, message, extra={FIELDS: fields})


def fields_of(record: logging.LogRecord) -> Mapping[str, object]:
    found = getattr(record, FIELDS, None)
    return found if isinstance(found, Mapping) else {}


def printable(text: str) -> str:
    """The text with control characters (newlines, ANSI escapes) written as escapes: a
    name from a database can never start a line of its own or colour a terminal."""
    return _CONTROL.sub(lambda m: m.group(0).encode("unicode_escape").decode("ascii"), text)


def logfmt_value(value: object) -> str:
    """A value as logfmt writes it: bare when it can be, else quoted with `\\` and `"`
    escaped; control characters escaped either way."""
    text = value if isinstance(value, str) else _text(value)
    text = printable(text)
    if not _NEEDS_QUOTES.search(text):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, list | tuple | set | frozenset):
        return ",".join(str(item) for item in value)
    return str(value)


def _key(name: str) -> str:
    key = _KEY.sub("_", name) or "_"
    return f"field_{key}" if key in _RESERVED else key


def _stamp(record: logging.LogRecord) -> str:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
    return f"{stamp}.{int(record.msecs):03d}Z"


class LogfmtFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        pairs = [
            ("ts", _stamp(record)),
            ("level", record.levelname.lower()),
            ("logger", record.name),
            ("msg", record.getMessage()),
            *((_key(name), value) for name, value in fields_of(record).items()),
        ]
        if record.exc_info:
            pairs.append(("exc", self.formatException(record.exc_info)))
        return " ".join(f"{key}={logfmt_value(value)}" for key, value in pairs)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "ts": _stamp(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for name, value in fields_of(record).items():
            keeps_type = isinstance(value, bool | int) or (
                isinstance(value, float) and math.isfinite(value)
            )
            entry[_key(name)] = value if keeps_type else _text(value)
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        # JSON escapes every control character (a newline, an ANSI escape) itself.
        return json.dumps(entry, ensure_ascii=False)


def configure(level: str, log_format: str = "logfmt") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else LogfmtFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel("WARNING" if level == "warn" else level.upper())
