"""make_response: kio response entities of any API and version from plain dicts."""

from __future__ import annotations

import datetime
import uuid

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.response import MetadataResponse
from kio.serial import entity_reader
from krust.bridge.protocol import encode_entity, make_response


def test_create_topics_v2_encodes_byte_exact() -> None:
    response = make_response(
        19, 2, {"topics": [{"name": "a", "error_code": 36, "error_message": "x"}]}
    )
    # throttle_time 0, one topic: name "a", error 36 TOPIC_ALREADY_EXISTS, message "x".
    assert encode_entity(response).hex() == "00000000" + "00000001" + "000161" + "0024" + "000178"


def test_nested_structs_error_codes_and_uuids_are_converted() -> None:
    topic_id = uuid.uuid4()
    response = make_response(
        19,
        7,
        {
            "throttle_time": 5,
            "topics": [
                {
                    "name": "t",
                    "topic_id": topic_id.bytes,
                    "error_code": 0,
                    "num_partitions": 3,
                    "replication_factor": 1,
                    "configs": [{"name": "segment.bytes", "value": "1024", "config_source": 1}],
                }
            ],
        },
    )
    assert response.throttle_time == datetime.timedelta(milliseconds=5)
    (topic,) = response.topics
    assert topic.topic_id == topic_id
    assert topic.error_code is ErrorCode.none
    assert topic.num_partitions == 3
    (config,) = topic.configs
    assert (config.name, config.value, config.config_source) == ("segment.bytes", "1024", 1)
    assert config.read_only is False and config.is_sensitive is False


def test_keys_a_version_lacks_are_dropped() -> None:
    response = make_response(
        19, 4, {"topics": [{"name": "t", "topic_id": uuid.uuid4(), "configs": []}], "extra": 1}
    )
    assert not hasattr(response.topics[0], "topic_id")
    assert not hasattr(response.topics[0], "configs")


def test_missing_fields_take_schema_defaults() -> None:
    response = make_response(19, 7, {"topics": [{"name": "t"}]})
    (topic,) = response.topics
    assert topic.error_code is ErrorCode.none
    assert topic.error_message is None  # nullable
    assert topic.num_partitions == -1  # the schema's own default
    assert topic.configs is None
    assert response.throttle_time == datetime.timedelta(0)


def test_nullable_name_in_delete_topics_v6_round_trips() -> None:
    topic_id = uuid.uuid4()
    response = make_response(
        20, 6, {"responses": [{"name": None, "topic_id": topic_id, "error_code": 100}]}
    )
    encoded = encode_entity(response)
    decoded, size = entity_reader(type(response))(encoded, 0)
    assert size == len(encoded)
    assert decoded.responses[0].name is None
    assert decoded.responses[0].error_code is ErrorCode.unknown_topic_id


def test_empty_metadata_response_is_complete() -> None:
    response = make_response(3, 12, {})
    assert isinstance(response, MetadataResponse)
    assert response.brokers == () and response.topics == ()
    assert response.cluster_id is None
    encode_entity(response)


def test_none_for_a_non_nullable_field_is_refused() -> None:
    with pytest.raises(TypeError, match="name"):
        make_response(19, 2, {"topics": [{"name": None}]})
