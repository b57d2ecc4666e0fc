"""What a consumer group subscribes to: topic names and RE2 regular expressions resolved against
the metadata image, and a digest of the subscribed topics' metadata.

Kafka resolves a subscription's regular expression on the broker with RE2/J (full match over
every topic name); `re2` (Google's RE2) has the same syntax, so a pattern Kafka refuses is
refused here too (INVALID_REGULAR_EXPRESSION).
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from krust.group.cluster import TopicView
from krust.group.results import CoordinatorError, ErrorCode

_compiled: dict[str, Any] = {}


def compile_regex(pattern: str) -> Any:
    """The compiled pattern; INVALID_REGULAR_EXPRESSION when RE2 refuses it."""
    regex = _compiled.get(pattern)
    if regex is None:
        # Imported on the first pattern: RE2 and the C++ runtime it loads take ~2.5 MiB,
        # which a broker without regex subscriptions never needs.
        import re2  # type: ignore[import-untyped]

        try:
            regex = re2.compile(pattern)
        except re2.error as refused:
            raise CoordinatorError(
                ErrorCode.invalid_regular_expression,
                f"SubscribedTopicRegex `{pattern}` is not a valid regular expression: {refused}.",
            ) from None
        if len(_compiled) > 1000:
            _compiled.clear()
        _compiled[pattern] = regex
    return regex


def resolve_regex(pattern: str, topic_names: Iterable[str]) -> frozenset[str]:
    """The topics whose whole name matches. As Kafka's TopicRegexResolver, no name is left
    out: a `__`-prefixed topic matches like any other (internal ones too, if the pattern
    names them)."""
    regex = compile_regex(pattern)
    return frozenset(name for name in topic_names if regex.fullmatch(name))


@dataclass(frozen=True)
class SubscribedTopic:
    topic_id: uuid.UUID
    name: str
    partitions: int


def subscribed_topics(
    names: Iterable[str], topics: Mapping[str, TopicView]
) -> dict[uuid.UUID, SubscribedTopic]:
    """The existing topics among `names`, by id."""
    found: dict[uuid.UUID, SubscribedTopic] = {}
    for name in names:
        topic = topics.get(name)
        if topic is not None:
            found[topic.topic_id] = SubscribedTopic(topic.topic_id, name, len(topic.partitions))
    return found


def metadata_hash(topics: Mapping[uuid.UUID, SubscribedTopic]) -> int:
    """A signed 64-bit digest of the subscribed topics' ids, names and partition counts."""
    digest = hashlib.blake2b(digest_size=8)
    for topic in sorted(topics.values(), key=lambda t: t.name):
        digest.update(f"{topic.topic_id}:{topic.name}:{topic.partitions};".encode())
    return int.from_bytes(digest.digest(), "big", signed=True)
