"""A strict logfmt parser: what Loki's `| logfmt` and Grafana read, and nothing looser.

`key=value` pairs separated by one space; a key of letters, digits, `_` and `.`; a value
bare (no space, `=`, `"`, backslash or control character) or in double quotes with `\\"`
and `\\\\` the only escapes and no control character inside. Anything else raises."""

from __future__ import annotations

import re

_KEY = re.compile(r"[A-Za-z0-9_.]+")
_BARE = re.compile(r'[^\s="\\\x00-\x1f\x7f]+')
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class LogfmtError(ValueError):
    pass


def parse(line: str) -> dict[str, str]:
    if "\n" in line or "\r" in line:
        raise LogfmtError(f"a line break inside one line: {line!r}")
    found: dict[str, str] = {}
    position = 0
    while position < len(line):
        key = _KEY.match(line, position)
        if key is None or line[key.end() : key.end() + 1] != "=":
            raise LogfmtError(f"no key= at {position}: {line!r}")
        position = key.end() + 1
        if line[position : position + 1] == '"':
            value, position = _quoted(line, position + 1)
        else:
            bare = _BARE.match(line, position)
            if bare is None:
                raise LogfmtError(f"an empty or unquoted value at {position}: {line!r}")
            value, position = bare.group(0), bare.end()
        if key.group(0) in found:
            raise LogfmtError(f"key {key.group(0)} twice: {line!r}")
        found[key.group(0)] = value
        if position < len(line):
            if line[position] != " " or position + 1 == len(line):
                raise LogfmtError(f"pairs must be separated by one space: {line!r}")
            position += 1
    return found


def _quoted(line: str, position: int) -> tuple[str, int]:
    out: list[str] = []
    while position < len(line):
        character = line[position]
        if character == '"':
            return "".join(out), position + 1
        if character == "\\":
            escaped = line[position + 1 : position + 2]
            if escaped not in ('"', "\\"):
                raise LogfmtError(f'an escape other than \\" or \\\\: {line!r}')
            out.append(escaped)
            position += 2
            continue
        if _CONTROL.match(character):
            raise LogfmtError(f"a control character inside quotes: {line!r}")
        out.append(character)
        position += 1
    raise LogfmtError(f"an unclosed quote: {line!r}")
