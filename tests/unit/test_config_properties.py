"""Properties of config parsing and validation over every key of the config table
(config_keys.toml through krust.config: broker, topic and group keys), as Kafka's ConfigDef
parses and validates them.

- every key's default passes its own validation;
- a value in range (or one of the choices) is accepted, and reads back the same from its string
  form (the one DescribeConfigs shows), whitespace around it ignored;
- a value out of range, of the wrong type, or other than the default of a key krust refuses to
  vary, is refused with a ConfigError naming the key (a broker's start-up), or Kafka's
  INVALID_CONFIG message naming it (a topic's or a group's config), never another exception;
- any text at all is a value or such an error;
- .properties text written with Java's escapes reads back as the keys and values written.
"""

from __future__ import annotations

import base64
import functools
import math
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from krust.config.broker import load_config
from krust.config.checks import CHECKS
from krust.config.errors import ConfigError
from krust.config.properties import parse_properties
from krust.config.table import BROKER_KEYS, GROUP_KEYS, TOPIC_KEYS, ConfigKey, ConfigType
from krust.controller import group_configs
from krust.controller.broker_configs import config_string
from krust.controller.topic_configs import TopicConfigError, validate_topic_configs

ALL_KEYS = [*BROKER_KEYS, *TOPIC_KEYS, *GROUP_KEYS]
KIND = {
    id(key): kind
    for kind, keys in (("broker", BROKER_KEYS), ("topic", TOPIC_KEYS), ("group", GROUP_KEYS))
    for key in keys
}
TYPE_BOUNDS = {
    ConfigType.SHORT: (-(2**15), 2**15 - 1),
    ConfigType.INT: (-(2**31), 2**31 - 1),
    ConfigType.LONG: (-(2**63), 2**63 - 1),
}
NUMBERS = (*TYPE_BOUNDS, ConfigType.DOUBLE)


def key_id(key: ConfigKey) -> str:
    return f"{KIND[id(key)]}:{key.name}"


def bounds(key: ConfigKey) -> tuple[float, float]:
    low, high = TYPE_BOUNDS.get(key.type, (-1e300, 1e300))
    return (
        low if key.min is None else max(low, key.min),
        high if key.max is None else min(high, key.max),
    )


@functools.cache
def in_range(key: ConfigKey) -> st.SearchStrategy[Any]:
    """Values a key accepts, typed."""
    low, high = bounds(key)
    if key.check == "gzip_level":
        return st.sampled_from([-1, *range(1, 10)])
    if key.type is ConfigType.DOUBLE:
        return st.floats(low, high, allow_nan=False, allow_infinity=False)
    if key.type in TYPE_BOUNDS:
        return st.integers(math.ceil(low), math.floor(high))
    if key.type is ConfigType.BOOLEAN:
        return st.booleans()
    if key.type is ConfigType.LIST:
        return st.lists(st.sampled_from(key.choices), min_size=1, unique=True)
    if key.check == "uuid":
        return st.binary(min_size=16, max_size=16).map(
            lambda raw: base64.urlsafe_b64encode(raw).decode().rstrip("=")
        )
    return st.sampled_from(key.choices)


def varies(key: ConfigKey) -> bool:
    """A key whose valid values can be generated from its row alone."""
    if key.refused is not None or key.check not in (None, "uuid", "gzip_level"):
        return False
    if key.type in NUMBERS or key.type is ConfigType.BOOLEAN:
        return True
    return bool(key.choices) or key.check == "uuid"


def written(value: Any, key: ConfigKey) -> str:
    """A typed value as a user writes it: Kafka's string form, any case for a boolean."""
    if key.type is ConfigType.DOUBLE:
        return repr(value)
    return config_string(value)


# -- defaults and values in range ---------------------------------------------------------------


def test_every_default_passes_its_own_validation() -> None:
    problems = {}
    for key in ALL_KEYS:
        if key.default is not None:
            value, problem = key.problem(key.default)
            if problem is not None or not key.is_default(value):
                problems[key_id(key)] = problem
    assert problems == {}


VARYING = [key for key in ALL_KEYS if varies(key)]


@given(
    st.sampled_from(VARYING).flatmap(lambda key: st.tuples(st.just(key), in_range(key))),
    st.sampled_from(["", " ", "\t", "  \t"]),
    st.booleans(),
)
@settings(max_examples=200)
def test_values_in_range_are_accepted_and_read_back_from_their_string_form(
    key_value: tuple[ConfigKey, Any], padding: str, upper: bool
) -> None:
    key, value = key_value
    if key.check is not None:
        assume(CHECKS[key.check](value) is None)
    raw = padding + written(value, key) + padding
    if key.type is ConfigType.BOOLEAN and upper:
        raw = raw.upper()
    parsed = key.parse(raw)
    assert parsed == value
    assert key.parse(config_string(parsed)) == value


def test_every_number_key_accepts_its_bounds_and_refuses_past_them() -> None:
    """The edges of each key's range (its own bounds, else its type's), for every key."""
    wrong = []
    for key in VARYING:
        if key.type not in TYPE_BOUNDS or key.check is not None:
            continue
        # One past the type's own bounds is refused as not a number of the type.
        low, high = (int(bound) for bound in bounds(key))
        for value, accepted in ((low, True), (high, True), (low - 1, False), (high + 1, False)):
            if (key.problem(str(value))[1] is None) != accepted:
                wrong.append((key_id(key), value))
    assert wrong == []


# -- refused values -----------------------------------------------------------------------------


@functools.cache
def out_of_range(key: ConfigKey) -> st.SearchStrategy[str]:
    """Numbers beyond a key's bounds or its type's, as text."""
    low, high = bounds(key)
    type_low, type_high = TYPE_BOUNDS.get(key.type, (-1e308, 1e308))
    candidates = []
    if key.type is ConfigType.DOUBLE:
        if low > -1e300:
            candidates.append(st.floats(max_value=low, exclude_max=True, allow_nan=False))
        if high < 1e300:
            candidates.append(st.floats(min_value=high, exclude_min=True, allow_nan=False))
        return st.one_of(candidates).map(repr) if candidates else st.nothing()
    candidates.append(st.integers(max_value=math.ceil(low) - 1))
    candidates.append(st.integers(min_value=math.floor(high) + 1))
    del type_low, type_high
    return st.one_of(candidates).map(str)


WRONG_TYPE = {
    ConfigType.BOOLEAN: ["yes", "1", "", "truee", "t"],
    ConfigType.SHORT: ["abc", "", "1.5", "1e3", "0x10", "1_000", "--1", "+"],
    ConfigType.INT: ["abc", "", "1.5", "1e3", "0x10", "1_000", "--1", "+"],
    ConfigType.LONG: ["abc", "", "1.5", "1e3", "0x10", "1_000", "--1", "+"],
    # What Java's Double.parseDouble refuses: Python's float() reads some of these.
    ConfigType.DOUBLE: ["abc", "", "1.5.2", "1_000", "inf", "nan", "infinity", "0x1p3"],
}


def refused_by_the_broker(key: ConfigKey, raw: str) -> None:
    """A broker started with `key=raw` does not start, and says which key is wrong."""
    with pytest.raises(ConfigError) as refused:
        load_config(None, {}, [f"{key.name}={raw}", "log.dirs=/nonexistent"])
    assert refused.value.key == key.name
    assert str(refused.value).startswith(f"{key.name}: ")


def refused_for_a_topic(key: ConfigKey, raw: str) -> None:
    with pytest.raises(TopicConfigError, match=f"for configuration {key.name}:"):
        validate_topic_configs({key.name: raw}, {})


REFUSE = {"broker": refused_by_the_broker, "topic": refused_for_a_topic}


def bounded(key: ConfigKey) -> bool:
    """A number of a broker or topic key with bounds of its own or its type's."""
    if key.type not in NUMBERS or KIND[id(key)] not in REFUSE or key.check is not None:
        return False
    return key.type is not ConfigType.DOUBLE or key.min is not None or key.max is not None


BOUNDED = [key for key in ALL_KEYS if bounded(key)]


@given(st.sampled_from(BOUNDED).flatmap(lambda key: st.tuples(st.just(key), out_of_range(key))))
@settings(max_examples=150)
def test_values_out_of_range_are_refused_naming_the_key(key_raw: tuple[ConfigKey, str]) -> None:
    key, raw = key_raw
    REFUSE[KIND[id(key)]](key, raw)


TYPED = [key for key in ALL_KEYS if KIND[id(key)] in REFUSE and key.type in WRONG_TYPE]


@given(
    st.sampled_from(TYPED).flatmap(
        lambda key: st.tuples(st.just(key), st.sampled_from(WRONG_TYPE[key.type]))
    )
)
@settings(max_examples=150)
def test_values_of_the_wrong_type_are_refused_naming_the_key(
    key_raw: tuple[ConfigKey, str],
) -> None:
    key, raw = key_raw
    REFUSE[KIND[id(key)]](key, raw)


_HOST = st.sampled_from(["h", "localhost", "10.0.0.1", "::1", "", "a.b"])
_PORT = st.integers(-2, 70000).map(str)
ANY_TEXT = st.one_of(
    st.text(max_size=20),
    st.text("0123456789-+.,:@*eE_ xX", max_size=12),
    # Near misses of the structured values: voters (id@host:port), IP overrides (host:count).
    st.lists(st.builds("{}@{}:{}".format, st.integers(-1, 9), _HOST, _PORT), max_size=3).map(
        ",".join
    ),
    st.lists(st.builds("{}:{}".format, _HOST, _PORT), max_size=3).map(",".join),
)


@given(st.sampled_from(ALL_KEYS), ANY_TEXT)
@settings(max_examples=200)
def test_any_text_is_a_value_or_an_error_naming_the_key(key: ConfigKey, raw: str) -> None:
    """...and a key krust does not let vary accepts nothing but its default."""
    try:
        value = key.parse(raw)
    except ConfigError as refused:
        assert refused.key == key.name
        return
    if key.refused is not None:
        assert key.is_default(value)


# -- group configs (Kafka's GroupConfig) --------------------------------------------------------

BROKER_DEFAULTS = {key.name: key.parse(key.default) for key in BROKER_KEYS}


@given(
    st.dictionaries(
        st.sampled_from(sorted(group_configs.BROKER_KEYS)),
        st.one_of(
            st.integers(-10, 10**6).map(str),
            st.sampled_from(["45_000", "4_5000", " 45000 ", "+45000", "45000.0"]),
            ANY_TEXT,
        ),
    )
)
def test_group_configs_are_refused_or_valid_values_of_their_keys(configs: dict[str, str]) -> None:
    """What group_configs.validate accepts, the table's key accepts too (Kafka parses a group
    config as its ConfigDef type first); what it refuses, it refuses with Kafka's message."""
    try:
        group_configs.validate(configs, BROKER_DEFAULTS)
    except group_configs.GroupConfigError as refused:
        assert any(name in str(refused) for name in configs)
        return
    keys = {key.name: key for key in GROUP_KEYS}
    for name, raw in configs.items():
        assert keys[name].problem(raw)[1] is None, (name, raw)


# -- .properties files --------------------------------------------------------------------------


def _escaped(text: str, is_key: bool) -> str:
    """`text` as java.util.Properties.store writes it (saveConvert)."""
    out = []
    for index, char in enumerate(text):
        if char == " " and (is_key or index == 0):
            out.append("\\ ")
        elif char in "\\=:#!":
            out.append("\\" + char)
        elif char in "\t\n\r\f":
            out.append({"\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f"}[char])
        elif ord(char) < 0x20 or ord(char) > 0x7E:
            out.extend(f"\\u{unit:04X}" for unit in _utf16_units(char))
        else:
            out.append(char)
    return "".join(out)


def _utf16_units(char: str) -> list[int]:
    encoded = char.encode("utf-16-be", "surrogatepass")
    return [int.from_bytes(encoded[i : i + 2], "big") for i in range(0, len(encoded), 2)]


@given(
    st.dictionaries(
        st.text(min_size=1, max_size=8),
        st.text(max_size=12),
        max_size=5,
    ),
    st.sampled_from(["\n", "\r\n", "\r"]),
)
def test_properties_written_with_javas_escapes_read_back(
    entries: dict[str, str], newline: str
) -> None:
    text = "# a comment\n" + "".join(
        f"{_escaped(key, True)}={_escaped(value, False)}{newline}" for key, value in entries.items()
    )
    assert parse_properties(text) == entries
