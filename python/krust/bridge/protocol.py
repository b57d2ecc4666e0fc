"""Kafka protocol entities from plain Python values: `make_response` and the kio glue under it.

kio generates one frozen dataclass per api key, version and nested struct; their field
annotations say which fields are nested structs, arrays, nullable, error codes or durations,
so one recursive builder covers every API and version.
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import types
import uuid
from collections.abc import Mapping
from functools import cache
from typing import Any, Union, get_args, get_origin

from kio.schema.errors import ErrorCode
from kio.serial import entity_writer
from kio.static.primitive import TZAware, i32Timedelta, i64Timedelta


def make_response(api_key: int, version: int, fields: Mapping[str, Any]) -> Any:
    """The kio response entity of that api key and version, built from a plain dict.

    Nested structs are dicts, arrays of structs are lists of dicts. Keys the version does not
    have are dropped; fields missing from the dict take the schema default (0 / "" / () /
    None for nullable). Error codes may be given as ints, durations as milliseconds, uuids as
    16 bytes."""
    return build_entity(response_schema(api_key, version), fields)


def request_schema(api_key: int, version: int) -> type[Any]:
    """kio's request entity class of that api key and version."""
    # kio's index of every schema takes ~17 ms to import; nothing before the port needs it.
    from kio.index import load_request_schema

    return load_request_schema(api_key, version)


def response_schema(api_key: int, version: int) -> type[Any]:
    """kio's response entity class of that api key and version."""
    from kio.index import load_response_schema

    return load_response_schema(api_key, version)


def encode_entity(entity: Any) -> bytes:
    """The wire bytes of a kio entity (no header)."""
    buffer = io.BytesIO()
    entity_writer(type(entity))(buffer, entity)
    return buffer.getvalue()


@dataclasses.dataclass(frozen=True)
class _FieldPlan:
    name: str
    type: Any
    has_default: bool


@cache
def _plan(entity_type: type) -> tuple[_FieldPlan, ...]:
    return tuple(
        _FieldPlan(
            field.name,
            field.type,
            field.default is not dataclasses.MISSING
            or field.default_factory is not dataclasses.MISSING,
        )
        for field in dataclasses.fields(entity_type)
    )


def build_entity(entity_type: type, values: Mapping[str, Any]) -> Any:
    """An instance of a kio entity class from a dict (see `make_response`)."""
    kwargs = {}
    for plan in _plan(entity_type):
        if plan.name in values:
            kwargs[plan.name] = _convert(plan.type, values[plan.name], plan.name)
        elif not plan.has_default:
            kwargs[plan.name] = _implicit_default(plan.type)
    return entity_type(**kwargs)


def _optional_inner(annotation: Any) -> tuple[bool, Any]:
    """(nullable, the type inside `X | None`)."""
    if get_origin(annotation) in (types.UnionType, Union):
        inner = [arg for arg in get_args(annotation) if arg is not type(None)]
        return True, inner[0]
    return False, annotation


def _convert(annotation: Any, value: Any, name: str) -> Any:
    nullable, inner = _optional_inner(annotation)
    if value is None:
        if not nullable:
            raise TypeError(f"field {name!r} is not nullable")
        return None
    if get_origin(inner) is tuple:
        item_type = get_args(inner)[0]
        return tuple(_convert(item_type, item, name) for item in value)
    if isinstance(inner, type) and dataclasses.is_dataclass(inner):
        return value if isinstance(value, inner) else build_entity(inner, value)
    if inner is ErrorCode:
        return ErrorCode(int(value))
    if isinstance(inner, type) and issubclass(inner, i32Timedelta | i64Timedelta):
        delta = value if isinstance(value, datetime.timedelta) else _millis(value)
        return inner.parse(delta)
    if inner is TZAware and isinstance(value, int):
        return datetime.datetime.fromtimestamp(value / 1000, tz=datetime.UTC)
    if inner is uuid.UUID and isinstance(value, bytes | str):
        return uuid.UUID(bytes=value) if isinstance(value, bytes) else uuid.UUID(value)
    return value


def _millis(value: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=value)


def _implicit_default(annotation: Any) -> Any:
    nullable, inner = _optional_inner(annotation)
    if nullable:
        return None
    if get_origin(inner) is tuple:
        return ()
    if isinstance(inner, type) and dataclasses.is_dataclass(inner):
        return build_entity(inner, {})
    if inner is ErrorCode:
        return ErrorCode.none
    if inner is uuid.UUID:
        return uuid.UUID(int=0)
    if isinstance(inner, type) and issubclass(inner, i32Timedelta | i64Timedelta):
        return inner.parse(datetime.timedelta(0))
    if inner is TZAware:
        return datetime.datetime.fromtimestamp(0, tz=datetime.UTC)
    for base, zero in ((bool, False), (int, 0), (float, 0.0), (str, ""), (bytes, b"")):
        if isinstance(inner, type) and issubclass(inner, base):
            return zero
    raise TypeError(f"no implicit default for {annotation!r}")
