"""Feature flags: the levels krust supports and UpdateFeatures' answers, checked against what
Kafka 4.3's FeatureControlManager answers a single node with the same supported ranges."""

from __future__ import annotations

from typing import Any

import pytest
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode
from krust.bridge.protocol import build_entity
from krust.config.broker import BrokerConfig
from krust.controller.apis import ControllerApis
from krust.controller.controller import Controller
from krust.controller.features import (
    SUPPORTED_FEATURES,
    FeatureUpdate,
    UnsupportedFeatureLevelError,
    UpgradeType,
    plan_update_features,
)
from krust.controller.image import to_core_image
from krust.controller.records import FeatureLevelRecord, NoOpRecord, encode_record

from .conftest import FakeCore, LoopRunner
from .test_controller import config, context, controller, log_dirs, metadata_records

__all__ = ["config", "controller", "log_dirs"]  # fixtures shared with test_controller

FINALIZED = {"metadata.version": 14}
UPGRADE, SAFE, UNSAFE = (
    UpgradeType.UPGRADE,
    UpgradeType.SAFE_DOWNGRADE,
    UpgradeType.UNSAFE_DOWNGRADE,
)


def refusal(feature: str, level: int, kind: UpgradeType) -> str | None:
    plan = plan_update_features(FINALIZED, [FeatureUpdate(feature, level, kind)], node_id=1)
    assert (plan.error is ErrorCode.none) == (plan.message is None)
    return plan.message


@pytest.mark.parametrize(
    ("feature", "level", "kind", "message"),
    [
        ("metadata.version", 15, UPGRADE, "Local controller 1 only supports versions 12-14"),
        ("metadata.version", -1, UPGRADE, "A feature version cannot be less than 0."),
        (
            "metadata.version",
            14,
            UpgradeType.UNKNOWN,
            "The controller does not support the given upgrade type.",
        ),
        (
            "metadata.version",
            13,
            UPGRADE,
            "Can't downgrade the version of this feature without setting the upgrade type to "
            "either safe or unsafe downgrade.",
        ),
        ("transaction.version", 1, UPGRADE, "Local controller 1 does not support this feature."),
        ("transaction.version", 2, UPGRADE, "Local controller 1 does not support this feature."),
        ("kraft.version", 1, UPGRADE, "Local controller 1 does not support this feature."),
        ("foo.bar", 1, UPGRADE, "Local controller 1 does not support this feature."),
        ("foo.bar", 0, SAFE, "Feature foo.bar not found."),
    ],
)
def test_updates_kafka_refuses_get_its_message(
    feature: str, level: int, kind: UpgradeType, message: str
) -> None:
    assert refusal(feature, level, kind) == (
        f"Invalid update version {level} for feature {feature}. {message}"
    )


def test_metadata_downgrades_across_changed_levels_are_refused() -> None:
    assert refusal("metadata.version", 13, SAFE) == (
        "Unsupported metadata.version downgrade from 14 to 13. Refusing to perform the "
        "requested downgrade because it might delete metadata information."
    )
    assert refusal("metadata.version", 12, UNSAFE) == (
        "Unsupported metadata.version downgrade from 14 to 12. Unsafe metadata downgrade is "
        "not supported in this version."
    )


def test_updates_within_the_supported_ranges_write_records() -> None:
    updates = [
        FeatureUpdate("metadata.version", 14, UPGRADE),
        FeatureUpdate("group.version", 0, SAFE),
        FeatureUpdate("kraft.version", 0, UPGRADE),
        FeatureUpdate("kraft.version", 0, SAFE),
    ]
    plan = plan_update_features(FINALIZED, updates, node_id=1)
    assert plan.error is ErrorCode.none
    assert plan.records == (
        FeatureLevelRecord(name="metadata.version", feature_level=14),
        FeatureLevelRecord(name="group.version", feature_level=0),
        NoOpRecord(),
    )


def test_one_refused_update_fails_the_whole_request() -> None:
    updates = [
        FeatureUpdate("metadata.version", 14, UPGRADE),
        FeatureUpdate("share.version", 1, UPGRADE),
    ]
    plan = plan_update_features(FINALIZED, updates, node_id=1)
    assert plan.error is ErrorCode.invalid_update_version and plan.records == ()


def test_the_core_gets_supported_and_finalized_features(controller: Controller) -> None:
    image = to_core_image(controller.image)
    assert image["finalized_features"] == {"metadata.version": 14, "group.version": 1}
    assert image["supported_features"]["metadata.version"] == (12, 14)
    assert image["supported_features"]["group.version"] == (0, 1)
    assert image["supported_features"]["transaction.version"] == (0, 0)
    assert set(image["supported_features"]) == set(SUPPORTED_FEATURES)


def update(
    run: LoopRunner,
    controller: Controller,
    version: int,
    *updates: dict[str, Any],
    validate_only: bool = False,
) -> Any:
    request = build_entity(
        load_request_schema(57, version),
        {"feature_updates": list(updates), "timeout": 1000, "validate_only": validate_only},
    )
    return run(ControllerApis(controller).update_features(request, context(57, version)))


def test_an_update_is_appended_applied_and_survives_a_restart(
    run: LoopRunner, controller: Controller, fake_core: FakeCore, config: BrokerConfig
) -> None:
    before = controller.image.metadata_offset
    response = update(run, controller, 2, {"feature": "metadata.version", "max_version_level": 14})
    assert response.error_code is ErrorCode.none and response.error_message is None
    # One record, between the markers of its metadata transaction (KIP-868).
    assert controller.image.metadata_offset == before + 3
    assert fake_core.deltas[-1]["finalized_features"] == {
        "metadata.version": 14,
        "group.version": 1,
    }
    assert fake_core.last_image["metadata_offset"] == before + 3
    assert metadata_records(fake_core)[-2] == FeatureLevelRecord(
        name="metadata.version", feature_level=14
    )

    restarted = Controller.open(config, fake_core.reopen())
    assert restarted.image.features == {"metadata.version": 14, "group.version": 1}


def test_validate_only_writes_nothing(
    run: LoopRunner, controller: Controller, fake_core: FakeCore
) -> None:
    records = len(metadata_records(fake_core))
    response = update(
        run,
        controller,
        1,
        {"feature": "group.version", "max_version_level": 0, "upgrade_type": 2},
        validate_only=True,
    )
    assert response.error_code is ErrorCode.none
    assert [(r.feature, r.error_code, r.error_message) for r in response.results] == [
        ("group.version", ErrorCode.none, "NONE")
    ]
    assert len(metadata_records(fake_core)) == records


def test_a_refusal_names_the_feature_for_all_updates(
    run: LoopRunner, controller: Controller
) -> None:
    response = update(
        run,
        controller,
        0,
        {"feature": "transaction.version", "max_version_level": 1, "allow_downgrade": False},
    )
    assert response.error_code is ErrorCode.invalid_update_version
    assert response.error_message == (
        "The update failed for all features since the following feature had an error: "
        "Invalid update version 1 for feature transaction.version. Local controller 1 does "
        "not support this feature."
    )
    assert response.results == ()
    assert controller.image.features == {"metadata.version": 14, "group.version": 1}


def test_v0_allow_downgrade_is_a_safe_downgrade(run: LoopRunner, controller: Controller) -> None:
    response = update(
        run,
        controller,
        0,
        {"feature": "metadata.version", "max_version_level": 13, "allow_downgrade": True},
    )
    assert response.error_code is ErrorCode.invalid_update_version
    assert "Refusing to perform the requested downgrade" in response.error_message


@pytest.mark.parametrize(("feature", "level"), [("metadata.version", 27), ("group.version", 2)])
def test_a_finalized_level_this_broker_does_not_support_stops_start_up(
    controller: Controller, config: BrokerConfig, fake_core: FakeCore, feature: str, level: int
) -> None:
    # As written by a newer broker (or Kafka) on the same log dirs.
    fake_core.internal_append(
        "__cluster_metadata",
        0,
        [(None, encode_record(FeatureLevelRecord(name=feature, feature_level=level)))],
    )
    with pytest.raises(UnsupportedFeatureLevelError, match=f"{feature} at level {level}"):
        Controller.open(config, fake_core.reopen())
