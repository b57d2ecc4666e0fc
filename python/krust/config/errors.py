"""The one error of configuration: a problem that stops start-up or refuses a config change."""

from __future__ import annotations


class ConfigError(Exception):
    """A configuration problem that stops start-up; `str()` is one line naming the key."""

    def __init__(self, key: str | None, problem: str) -> None:
        super().__init__(f"{key}: {problem}" if key else problem)
        self.key = key
        self.problem = problem
