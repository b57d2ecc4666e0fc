"""Client quotas in the metadata image: entities, their validation and how ClientQuotaRecords
replay, as Kafka's ClientQuotaControlManager and ClientQuotasImage define them (KIP-546).

An entity is a set of (entity type, name) pairs: `user`, `client-id`, both, or `ip`; a None
name is the entity type's default (`<default>` in kafka-configs). See docs/quotas.md.
"""

from __future__ import annotations

import ipaddress
import math
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from krust.controller.records import ClientQuotaRecord, QuotaEntityData

if TYPE_CHECKING:
    from kio.schema.errors import ErrorCode

USER = "user"
CLIENT_ID = "client-id"
IP = "ip"
ENTITY_TYPES = (USER, CLIENT_ID, IP)

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1
# Kafka's QuotaConfig: the keys of user / client-id entities and of ip entities, with the
# largest value of each key's type (None: a DOUBLE).
USER_CLIENT_KEYS: Mapping[str, int | None] = {
    PRODUCER_BYTE_RATE: LONG_MAX,
    CONSUMER_BYTE_RATE: LONG_MAX,
    REQUEST_PERCENTAGE: None,
    CONTROLLER_MUTATION_RATE: None,
}
IP_KEYS: Mapping[str, int | None] = {CONNECTION_CREATION_RATE: INT_MAX}

QuotaEntity = tuple[tuple[str, str | None], ...]
"""(entity type, name) pairs sorted by type; a None name is the type's default."""

ClientQuotas = Mapping[QuotaEntity, Mapping[str, float]]
"""Every entity's quotas, as the image holds them."""


class ClientQuotaError(Exception):
    """An entity's alteration or a filter that Kafka refuses, with its error code."""

    def __init__(self, error: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


def _invalid(message: str) -> ClientQuotaError:
    # kio's error codes load on the first error, not with the image replay before the port.
    from kio.schema.errors import ErrorCode

    return ClientQuotaError(ErrorCode.invalid_request, message)


def entity_of(pairs: Sequence[tuple[str, str | None]]) -> QuotaEntity:
    """The entity of (type, name) pairs; a type given twice is INVALID_REQUEST."""
    types = [entity_type for entity_type, _ in pairs]
    for entity_type in types:
        if types.count(entity_type) > 1:
            raise _invalid(f"Invalid client quota entity, duplicate entity entry {entity_type}")
    return tuple(sorted(pairs))


def describe_entity(entity: QuotaEntity) -> str:
    """Kafka's ClientQuotaEntity(entries={...}) text, for error messages."""
    entries = ", ".join(f"{t}={n}" for t, n in entity)
    return f"ClientQuotaEntity(entries={{{entries}}})"


def _valid_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        pass
    try:
        socket.getaddrinfo(name, None)
        return True
    except (OSError, UnicodeError):
        return False


def quota_keys(entity: QuotaEntity) -> Mapping[str, int | None]:
    """The quota keys the entity may have (Kafka's validateEntity and configKeysForEntityType)."""
    if not entity:
        raise _invalid("Invalid empty client quota entity")
    names = dict(entity)
    for entity_type, name in entity:
        if entity_type not in ENTITY_TYPES:
            raise _invalid(f"Unhandled client quota entity type: {entity_type}")
        if name is not None and not name:
            raise _invalid(f"Empty {entity_type} not supported")
    if IP in names:
        if len(names) > 1:
            raise _invalid(
                "Invalid quota entity combination, IP entity should not be combined with "
                "User or ClientId"
            )
        ip = names[IP]
        if ip is not None and not _valid_ip(ip):
            raise _invalid(f"{ip} is not a valid IP or resolvable host.")
        return IP_KEYS
    return USER_CLIENT_KEYS


def check_value(keys: Mapping[str, int | None], key: str, value: float) -> None:
    """Kafka's validateQuotaKeyValue: a known key, a positive value, integral where the key's
    type is."""
    if key not in keys:
        raise _invalid(f"Invalid configuration key {key}")
    if key == CONTROLLER_MUTATION_RATE:
        # Accepted and not enforced would be a setting silently ignored.
        raise _invalid(
            f"{key} is not supported by krust: its controller APIs are not metered (KIP-599)"
        )
    if not value > 0.0:
        raise _invalid(f"Quota {key} must be greater than 0")
    largest = keys[key]
    if largest is None or math.isinf(value):
        return
    if value > largest:
        kind = "a LONG" if largest == LONG_MAX else "an INT"
        raise _invalid(f"Proposed value for {key} is too large for {kind}.")
    if abs(math.fmod(value, 1.0)) > 1e-6:
        raise _invalid(f"{key} cannot be a fractional value.")


@dataclass
class QuotaAlteration:
    """One entity's alteration: key -> new value, None removing it."""

    pairs: Sequence[tuple[str, str | None]]
    ops: Sequence[tuple[str, float | None]]


@dataclass
class AlterPlan:
    records: list[ClientQuotaRecord] = field(default_factory=list)
    results: list[tuple[ClientQuotaError | None, Sequence[tuple[str, str | None]]]] = field(
        default_factory=list
    )


def plan_alter_client_quotas(
    current: ClientQuotas, alterations: Sequence[QuotaAlteration]
) -> AlterPlan:
    """The records of the valid alterations and a result per entity (Kafka's
    ClientQuotaControlManager.alterClientQuotas): an invalid entity changes nothing of its own
    and does not stop the others."""
    plan = AlterPlan()
    seen: set[QuotaEntity] = set()
    for alteration in alterations:
        try:
            plan.records.extend(_alter_one(current, alteration, seen))
            plan.results.append((None, alteration.pairs))
        except ClientQuotaError as error:
            plan.results.append((error, alteration.pairs))
    return plan


def _alter_one(
    current: ClientQuotas, alteration: QuotaAlteration, seen: set[QuotaEntity]
) -> list[ClientQuotaRecord]:
    entity = entity_of(alteration.pairs)
    if entity in seen:
        raise _invalid(f"Ignoring duplicate entity {describe_entity(entity)}")
    seen.add(entity)
    changes: dict[str, float | None] = {}
    for key, value in alteration.ops:
        if key in changes:
            raise _invalid(
                f"Duplicate quota key {key} not updating quota for this entity "
                f"{describe_entity(entity)}"
            )
        changes[key] = value
    keys = quota_keys(entity)
    existing = current.get(entity, {})
    data = tuple(QuotaEntityData(entity_type=t, entity_name=n) for t, n in entity)
    records = []
    for key, value in changes.items():
        if value is None:
            if key in existing:
                records.append(ClientQuotaRecord(entity=data, key=key, value=0.0, remove=True))
            continue
        check_value(keys, key, value)
        if existing.get(key) != value:
            records.append(ClientQuotaRecord(entity=data, key=key, value=value))
    return records


def replay_client_quota(
    quotas: dict[QuotaEntity, dict[str, float]], record: ClientQuotaRecord
) -> None:
    """Apply one ClientQuotaRecord (Kafka's ClientQuotaControlManager.replay)."""
    entity: QuotaEntity = tuple(sorted((e.entity_type, e.entity_name) for e in record.entity))
    values = quotas.setdefault(entity, {})
    if record.remove:
        values.pop(record.key, None)
        if not values:
            del quotas[entity]
    else:
        values[record.key] = record.value


def client_quota_records(quotas: ClientQuotas) -> list[ClientQuotaRecord]:
    """Records that replay into `quotas` (for snapshots)."""
    return [
        ClientQuotaRecord(
            entity=tuple(QuotaEntityData(entity_type=t, entity_name=n) for t, n in entity),
            key=key,
            value=value,
        )
        for entity, values in sorted(quotas.items(), key=lambda item: repr(item[0]))
        for key, value in sorted(values.items())
    ]


MATCH_EXACT = 0
MATCH_DEFAULT = 1
MATCH_SPECIFIED = 2


@dataclass(frozen=True)
class FilterComponent:
    entity_type: str
    match_type: int
    match: str | None


def describe_client_quotas(
    quotas: ClientQuotas, components: Sequence[FilterComponent], strict: bool
) -> list[tuple[QuotaEntity, Mapping[str, float]]]:
    """The entities a DescribeClientQuotas filter matches (Kafka's ClientQuotasImage.describe);
    raises ClientQuotaError for a bad filter."""
    exact: dict[str, str | None] = {}
    specified: set[str] = set()
    for component in components:
        entity_type = component.entity_type
        if not entity_type:
            raise _invalid("Invalid empty entity type.")
        if entity_type in exact or entity_type in specified:
            raise _invalid(f"Entity type {entity_type} cannot appear more than once in the filter.")
        if entity_type not in ENTITY_TYPES:
            from kio.schema.errors import ErrorCode

            raise ClientQuotaError(
                ErrorCode.unsupported_version, f"Unsupported entity type {entity_type}"
            )
        if component.match_type == MATCH_EXACT:
            if component.match is None:
                raise _invalid("Request specified MATCH_TYPE_EXACT, but set match string to null.")
            exact[entity_type] = component.match
        elif component.match_type == MATCH_DEFAULT:
            if component.match is not None:
                raise _invalid(
                    "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."
                )
            exact[entity_type] = None
        elif component.match_type == MATCH_SPECIFIED:
            if component.match is not None:
                raise _invalid(
                    "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."
                )
            specified.add(entity_type)
        else:
            raise _invalid(f"Unknown match type {component.match_type}")
    named = exact.keys() | specified
    if IP in named and named & {USER, CLIENT_ID}:
        raise _invalid(
            "Invalid entity filter component combination. IP filter component should not be "
            "used with user or clientId filter component."
        )
    return [
        (entity, values)
        for entity, values in quotas.items()
        if _matches(dict(entity), exact, specified, strict)
    ]


def _matches(
    entity: Mapping[str, str | None],
    exact: Mapping[str, str | None],
    specified: set[str],
    strict: bool,
) -> bool:
    if strict and len(entity) != len(exact) + len(specified):
        return False
    if any(t not in entity or entity[t] != name for t, name in exact.items()):
        return False
    return all(t in entity for t in specified)


def core_client_quotas(
    quotas: ClientQuotas,
) -> list[tuple[list[tuple[str, str | None]], dict[str, float]]]:
    """The quotas in the shape `krust._core.Core.set_client_quotas` takes."""
    return [(list(entity), dict(values)) for entity, values in quotas.items()]
