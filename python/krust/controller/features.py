"""Feature flags (KIP-584, KIP-778): the levels krust supports and how UpdateFeatures changes the
finalized ones, with the checks and messages of Kafka's FeatureControlManager for a cluster of
one node (the local controller is the only controller and broker).

A supported range is what krust implements, not what Kafka does: transaction.version 1-2 are
KIP-890's transaction protocol versions, which krust does not serve, so their maximum is 0.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING

from krust.controller.records import (
    METADATA_VERSION,
    METADATA_VERSION_FEATURE,
    FeatureLevelRecord,
    MetadataRecord,
    NoOpRecord,
)

if TYPE_CHECKING:
    from kio.schema.errors import ErrorCode

KRAFT_VERSION_FEATURE = "kraft.version"
# krust's quorum is one static voter: kraft.version 1 (KIP-853 dynamic voters) is not served.
KRAFT_VERSION = 0
GROUP_VERSION_FEATURE = "group.version"
# group.version 1 is KIP-848's consumer group protocol (ConsumerGroupHeartbeat).
GROUP_VERSION = 1


@dataclass(frozen=True)
class VersionRange:
    min: int
    max: int

    def __contains__(self, level: object) -> bool:
        return isinstance(level, int) and self.min <= level <= self.max

    def __str__(self) -> str:
        return str(self.min) if self.min == self.max else f"{self.min}-{self.max}"


SUPPORTED_FEATURES: Mapping[str, VersionRange] = MappingProxyType(
    {
        # 3.6-IV0 (12) to 3.6-IV2 (14): the levels whose records are the versions krust writes
        # and reads, and that no longer bump the leader epoch on an ISR shrink (krust does not).
        # 3.7-IV0 (15) needs controller registration (KIP-919).
        METADATA_VERSION_FEATURE: VersionRange(12, METADATA_VERSION),
        KRAFT_VERSION_FEATURE: VersionRange(0, KRAFT_VERSION),
        "group.version": VersionRange(0, GROUP_VERSION),
        "transaction.version": VersionRange(0, 0),  # 1-2: KIP-890's transaction protocol
        "eligible.leader.replicas.version": VersionRange(0, 0),  # 1: KIP-966's ELR
        "share.version": VersionRange(0, 0),  # 1: KIP-932's share groups
        "streams.version": VersionRange(0, 0),  # 1: KIP-1071's streams groups
    }
)
# metadata.version levels that changed the metadata records (Kafka's didMetadataChange): a
# downgrade across one of them could lose metadata, so Kafka refuses it.
METADATA_CHANGING_LEVELS = frozenset({13, 14})


class UpgradeType(enum.IntEnum):
    """FeatureUpdate.UpgradeType; codes other than 1-3 are UNKNOWN."""

    UNKNOWN = 0
    UPGRADE = 1
    SAFE_DOWNGRADE = 2
    UNSAFE_DOWNGRADE = 3

    @staticmethod
    def from_code(code: int) -> UpgradeType:
        return UpgradeType(code) if code in (1, 2, 3) else UpgradeType.UNKNOWN


@dataclass(frozen=True)
class FeatureUpdate:
    feature: str
    level: int
    upgrade_type: UpgradeType


@dataclass(frozen=True)
class FeaturesPlan:
    """UpdateFeatures' outcome: one error for the whole request, or the records to append."""

    error: ErrorCode
    message: str | None
    records: tuple[MetadataRecord, ...]


class _Refused(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def plan_update_features(
    finalized: Mapping[str, int], updates: Iterable[FeatureUpdate], node_id: int
) -> FeaturesPlan:
    """The records that apply every update, or the first update's error (nothing applied)."""
    # kio's error codes are imported here, not before the port opens (UpdateFeatures only).
    from kio.schema.errors import ErrorCode

    records: list[MetadataRecord] = []
    try:
        for update in updates:
            records.extend(_update_feature(finalized, update, node_id))
    except _Refused as refused:
        return FeaturesPlan(ErrorCode.invalid_update_version, refused.message, ())
    return FeaturesPlan(ErrorCode.none, None, tuple(records))


class UnsupportedFeatureLevelError(Exception):
    """The metadata log finalized a feature level this broker does not implement."""


def check_finalized_levels(finalized: Mapping[str, int]) -> None:
    """Refuse to start on a metadata log whose finalized levels this broker cannot serve, as
    a Kafka broker does; level 0 (disabled) is always fine."""
    for name, level in sorted(finalized.items()):
        supported = SUPPORTED_FEATURES.get(name, VersionRange(0, 0))
        if level != 0 and level not in supported:
            raise UnsupportedFeatureLevelError(
                f"the metadata log finalized {name} at level {level}, but this broker "
                f"supports {name} {supported} only"
            )


def _invalid(update: FeatureUpdate, reason: str) -> _Refused:
    return _Refused(f"Invalid update version {update.level} for feature {update.feature}. {reason}")


def _update_feature(
    finalized: Mapping[str, int], update: FeatureUpdate, node_id: int
) -> list[MetadataRecord]:
    name, level, kind = update.feature, update.level, update.upgrade_type
    if kind is UpgradeType.UNKNOWN:
        raise _invalid(update, "The controller does not support the given upgrade type.")
    current = KRAFT_VERSION if name == KRAFT_VERSION_FEATURE else finalized.get(name, 0)
    if level < 0:
        raise _invalid(update, "A feature version cannot be less than 0.")
    supported = SUPPORTED_FEATURES.get(name, VersionRange(0, 0))
    if level not in supported:
        what = f"Local controller {node_id}"
        if supported.max == 0:
            raise _invalid(update, f"{what} does not support this feature.")
        raise _invalid(update, f"{what} only supports versions {supported}")
    if level < current and kind is UpgradeType.UPGRADE:
        raise _invalid(
            update,
            "Can't downgrade the version of this feature without setting the upgrade type "
            "to either safe or unsafe downgrade.",
        )
    if level > current and kind is not UpgradeType.UPGRADE:
        raise _invalid(update, "Can't downgrade to a newer version.")
    if name == METADATA_VERSION_FEATURE:
        _check_metadata_downgrade(current, level, kind)
    elif name == KRAFT_VERSION_FEATURE:
        # Kafka upgrades kraft.version through the Raft layer and appends a NoOpRecord.
        return [NoOpRecord()] if kind is UpgradeType.UPGRADE else []
    elif name not in SUPPORTED_FEATURES:
        raise _invalid(update, f"Feature {name} not found.")
    return [FeatureLevelRecord(name=name, feature_level=level)]


def _check_metadata_downgrade(current: int, level: int, kind: UpgradeType) -> None:
    if level >= current or not any(
        level < changed <= current for changed in METADATA_CHANGING_LEVELS
    ):
        return
    reason = (
        "Unsafe metadata downgrade is not supported in this version."
        if kind is UpgradeType.UNSAFE_DOWNGRADE
        else "Refusing to perform the requested downgrade because it might delete metadata "
        "information."
    )
    raise _Refused(f"Unsupported metadata.version downgrade from {current} to {level}. {reason}")
