"""The records that start an empty metadata log or register this broker."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from krust.controller.features import GROUP_VERSION, GROUP_VERSION_FEATURE, SUPPORTED_FEATURES
from krust.controller.meta_properties import random_kafka_uuid
from krust.controller.records import (
    METADATA_VERSION,
    METADATA_VERSION_FEATURE,
    BrokerEndpoint,
    BrokerFeature,
    FeatureLevelRecord,
    MetadataRecord,
    RegisterBrokerRecord,
)

SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}


def initial_records() -> list[MetadataRecord]:
    """What an empty metadata log starts with: the metadata.version feature level, and
    group.version 1 (KIP-848's consumer groups on), as a Kafka 4 cluster is formatted."""
    return [
        FeatureLevelRecord(name=METADATA_VERSION_FEATURE, feature_level=METADATA_VERSION),
        FeatureLevelRecord(name=GROUP_VERSION_FEATURE, feature_level=GROUP_VERSION),
    ]


def registration_record(config: Mapping[str, Any], broker_epoch: int) -> RegisterBrokerRecord:
    """This broker's registration, with a fresh incarnation id, as on every Kafka start.

    krust's node is its own controller, so it registers unfenced straight away."""
    protocols = config["listener.security.protocol.map"]
    return RegisterBrokerRecord(
        broker_id=config["node.id"],
        incarnation_id=random_kafka_uuid(),
        broker_epoch=broker_epoch,
        end_points=tuple(
            BrokerEndpoint(
                name=listener.name,
                host=listener.host,
                port=listener.port,
                security_protocol=SECURITY_PROTOCOL_IDS[protocols[listener.name]],
            )
            for listener in config["advertised.listeners"]
        ),
        features=tuple(
            BrokerFeature(
                name=name, min_supported_version=supported.min, max_supported_version=supported.max
            )
            for name, supported in SUPPORTED_FEATURES.items()
        ),
        rack=config["broker.rack"],
        fenced=False,
    )
