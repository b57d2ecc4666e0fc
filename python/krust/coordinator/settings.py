"""A coordinator's settings from the broker config: each int field of a settings dataclass is
the Kafka key of the same name with dots (`offsets_topic_num_partitions` is
`offsets.topic.num.partitions`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import Any


def int_settings(settings_class: type, config: Mapping[str, Any]) -> dict[str, int]:
    """The fields of `settings_class` whose Kafka keys `config` has; absent keys are left to
    the class's defaults (Kafka's)."""
    values: dict[str, int] = {}
    for field in fields(settings_class):
        if field.type not in (int, "int"):
            continue
        name = field.name.replace("_", ".")
        if name in config:
            values[field.name] = int(config[name])
    return values
