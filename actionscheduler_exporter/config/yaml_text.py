"""YAML text to a document, with errors that name the place but never quote the text (a
configuration holds passwords)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from actionscheduler_exporter.config.errors import ConfigError

# A configuration of a thousand sites is a few hundred kilobytes.
MAX_FILE_BYTES = 1024 * 1024


def read_yaml(source: str) -> Any:
    """A YAML document, or a ConfigError that names the file and the place of the problem
    but never quotes the file's text (it may hold a password)."""
    path = Path(source)
    try:
        # Read with a bound, not by the size `stat` gives: a pipe or /dev/zero has none.
        with path.open("rb") as file:
            data = file.read(MAX_FILE_BYTES + 1)
    except OSError as error:
        raise ConfigError(source, "", f"cannot read the file: {error.strerror}") from error
    if len(data) > MAX_FILE_BYTES:
        raise ConfigError(source, "", f"is larger than {MAX_FILE_BYTES} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ConfigError(
            source, "", f"is not UTF-8 text (byte {error.start} cannot be decoded)"
        ) from None
    try:
        return parse_yaml(text)
    except YamlError as problem:
        raise ConfigError(source, "", str(problem)) from None


class YamlError(ValueError):
    """What is wrong with a YAML text, and where; never a word of the text itself."""


def parse_yaml(text: str) -> Any:
    """The document, or a YamlError with the place of the problem and its kind; quoted
    parts of the parser's message (an alias's or a tag's name, a value) left out, since
    they come from the text (`password: *secret` names the password)."""
    try:
        return yaml.load(text, Loader=_SAFE_LOADER)  # noqa: S506 (a safe loader)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = _QUOTED.sub("…", error.problem or "").strip()
        raise YamlError(f"is not valid YAML{where}: {problem}") from None
    except yaml.YAMLError as error:
        raise YamlError(f"is not valid YAML: {type(error).__name__}") from None
    except RecursionError:
        raise YamlError("is not valid here: nested too deeply") from None
    except (ValueError, TypeError, OverflowError):
        # A value that does not fit its tag or type (`!!int word`, the date 2024-13-45).
        raise YamlError("is not valid YAML: a value does not fit its type or tag") from None


# libyaml's parser when PyYAML has it (its wheels do): ten times as fast on a big file.
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")
