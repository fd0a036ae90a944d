"""The one error type of configuration loading: it names the source, the key and the problem."""

from __future__ import annotations


class ConfigError(Exception):
    def __init__(self, source: str, key: str, problem: str) -> None:
        self.source = source
        self.key = key
        self.problem = problem
        where = f"{source}: {key}" if key else source
        super().__init__(f"{where}: {problem}")
