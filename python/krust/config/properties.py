"""Java .properties text (`--config FILE`, Kafka's server.properties syntax) parsed like
java.util.Properties.load."""

from __future__ import annotations

import re
from collections.abc import Iterator


class PropertiesError(ValueError):
    """A malformed .properties file."""


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java .properties text like java.util.Properties.load: `#`/`!` comments,
    `key=value`, `key: value` and `key value`, backslash line continuations, escapes
    (\\t \\n \\r \\f \\uXXXX, backslash before any other character keeps that character)."""
    entries: dict[str, str] = {}
    for number, line in _logical_lines(text):
        key_end = _find_key_end(line)
        rest = line[key_end:].lstrip(" \t\f")
        if rest[:1] in ("=", ":"):
            rest = rest[1:].lstrip(" \t\f")
        try:
            entries[_unescape(line[:key_end])] = _unescape(rest)
        except PropertiesError as error:
            raise PropertiesError(f"line {number}: {error}") from None
    return entries


def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """Logical lines (continuations joined, comments and blank lines dropped) with the number
    of the line each starts on."""
    pending: list[str] = []
    start = 0
    for number, natural in enumerate(re.split(r"\r\n|\r|\n", text), start=1):
        stripped = natural.lstrip(" \t\f")
        if not pending:
            if not stripped or stripped[0] in "#!":
                continue
            start = number
        trailing = len(stripped) - len(stripped.rstrip("\\"))
        if trailing % 2:
            pending.append(stripped[:-1])
            continue
        pending.append(stripped)
        yield start, "".join(pending)
        pending = []
    if pending:
        yield start, "".join(pending)


def _find_key_end(line: str) -> int:
    index = 0
    while index < len(line):
        char = line[index]
        if char == "\\":
            index += 2
            continue
        if char in "=: \t\f":
            return index
        index += 1
    return len(line)


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    out = []
    index = 0
    while index < len(text):
        char = text[index]
        index += 1
        if char != "\\" or index == len(text):
            out.append(char)
            continue
        code = text[index]
        index += 1
        if code == "u":
            digits = text[index : index + 4]
            if not re.fullmatch(r"[0-9a-fA-F]{4}", digits):
                raise PropertiesError("malformed \\uxxxx escape")
            out.append(chr(int(digits, 16)))
            index += 4
        else:
            out.append(_ESCAPES.get(code, code))
    # Java writes a character beyond the BMP as two \u escapes, its UTF-16 surrogate pair.
    return "".join(out).encode("utf-16", "surrogatepass").decode("utf-16", "surrogatepass")
