"""OffsetCommit, OffsetFetch and OffsetDelete: kio entities in and out.

kio has no OffsetCommit v0-v1 and no OffsetFetch v0 (Kafka 4 dropped them, KIP-896); the
versions served still overlap what librdkafka needs (OffsetCommit 2, OffsetFetch 1).
OffsetCommit and OffsetFetch v10 name topics by id (KIP-848's follow-up): ids are resolved to
names through the controller's image, an unknown id answers UNKNOWN_TOPIC_ID.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from krust.bridge.protocol import make_response
from krust.group.api_membership import Route, millis
from krust.group.coordinator import FetchedOffsets, GroupCoordinator
from krust.group.offset_manager import OffsetCommitRequest, PartitionCommit, PartitionErrors
from krust.group.results import ErrorCode
from krust.plugins.authorizer import AclOperation, ResourceType
from krust.security.authorization import Authorization

if TYPE_CHECKING:
    from krust.bridge.dispatcher import RequestContext

OFFSET_COMMIT = 8
OFFSET_FETCH = 9
OFFSET_DELETE = 47
FIRST_VERSION_WITH_TOPIC_IDS = 10


class OffsetApis:
    def __init__(
        self, coordinator: GroupCoordinator, authorization: Authorization | None = None
    ) -> None:
        self._coordinator = coordinator
        self._authorization = authorization or Authorization(None)

    async def _allowed_topics(
        self, context: RequestContext, operation: AclOperation, names: Any
    ) -> set[str]:
        return await self._authorization.allowed_names(
            context, operation, ResourceType.TOPIC, [n for n in names if n is not None]
        )

    async def _group_allowed(
        self, context: RequestContext, operation: AclOperation, group_id: str
    ) -> bool:
        return await self._authorization.allowed(context, operation, ResourceType.GROUP, group_id)

    def routes(self) -> Sequence[Route]:
        return [
            (OFFSET_COMMIT, 2, 10, self.offset_commit),
            (OFFSET_FETCH, 1, 10, self.offset_fetch),
            (OFFSET_DELETE, 0, 0, self.offset_delete),
        ]

    async def offset_commit(self, request: Any, context: RequestContext) -> Any:
        version = context.api_version
        topics = self._named(request.topics, version)
        # As Kafka: READ on the group, then READ on each topic.
        if not await self._group_allowed(context, AclOperation.READ, request.group_id):
            refused: dict[str | None, Any] = {
                name: [
                    (p.partition_index, ErrorCode.group_authorization_failed) for p in t.partitions
                ]
                for name, t in topics
            }
            return self._commit_response(version, topics, refused)
        readable = await self._allowed_topics(context, AclOperation.READ, (n for n, _ in topics))
        refused = {
            name: [(p.partition_index, ErrorCode.topic_authorization_failed) for p in t.partitions]
            for name, t in topics
            if name is not None and name not in readable
        }
        results = await self._coordinator.commit_offsets(
            OffsetCommitRequest(
                group_id=request.group_id,
                member_id=request.member_id,
                group_instance_id=request.group_instance_id if version >= 7 else None,
                generation_id=request.generation_id_or_member_epoch,
                # Only v2-v4 carry a retention time; -1 means the broker's retention.
                retention_time_ms=millis(request.retention_time) if version <= 4 else -1,
                api_version=version,
                topics=tuple(
                    (
                        name,
                        tuple(
                            PartitionCommit(
                                p.partition_index,
                                p.committed_offset,
                                p.committed_leader_epoch if version >= 6 else -1,
                                p.committed_metadata,
                            )
                            for p in topic.partitions
                        ),
                    )
                    for name, topic in topics
                    if name is not None and name not in refused
                ),
            )
        )
        return self._commit_response(version, topics, {**dict(results), **refused})

    def _commit_response(
        self, version: int, topics: list[tuple[str | None, Any]], outcomes: dict[str | None, Any]
    ) -> Any:
        answered = [
            (
                name,
                topic.topic_id if version >= FIRST_VERSION_WITH_TOPIC_IDS else None,
                outcomes[name]
                if name is not None and name in outcomes
                else [(p.partition_index, ErrorCode.unknown_topic_id) for p in topic.partitions],
            )
            for name, topic in topics
        ]
        return make_response(
            OFFSET_COMMIT,
            version,
            {
                "topics": [
                    {
                        "name": name,
                        "topic_id": topic_id,
                        "partitions": [
                            {"partition_index": p, "error_code": e} for p, e in partition_errors
                        ],
                    }
                    for name, topic_id, partition_errors in answered
                ]
            },
        )

    def _named(self, topics: Any, version: int) -> list[tuple[str | None, Any]]:
        """Each requested topic with its name; None for a v10 topic id the image does not know."""
        if version < FIRST_VERSION_WITH_TOPIC_IDS:
            return [(topic.name, topic) for topic in topics]
        return [(self._coordinator.topic_name(topic.topic_id), topic) for topic in topics]

    async def offset_fetch(self, request: Any, context: RequestContext) -> Any:
        version = context.api_version
        if version >= 8:
            groups = [
                await self._fetch_group(group, version, context, request.require_stable)
                for group in request.groups
            ]
            return make_response(OFFSET_FETCH, version, {"groups": groups})
        # v2+ may ask for every committed offset with a null topic list.
        requested = _requested(request.topics)
        if await self._group_allowed(context, AclOperation.DESCRIBE, request.group_id):
            error, fetched = self._coordinator.fetch_offsets(request.group_id, requested)
        else:
            error, fetched = ErrorCode.group_authorization_failed, []
        if version >= 2:
            topics = _topics(fetched)
            if version >= 7 and request.require_stable:
                self._mark_unstable(request.group_id, topics)
            topics = await self._describable(context, topics, requested is None)
            return make_response(OFFSET_FETCH, version, {"error_code": error, "topics": topics})
        # v1 has no group-level error: it is reported on every requested partition.
        if error is not ErrorCode.none:
            assert requested is not None
            fetched = [(topic, [(p, None) for p in partitions]) for topic, partitions in requested]
            return make_response(OFFSET_FETCH, version, {"topics": _topics(fetched, error)})
        topics = await self._describable(context, _topics(fetched), False)
        return make_response(OFFSET_FETCH, version, {"topics": topics})

    async def _fetch_group(
        self, group: Any, version: int, context: RequestContext, require_stable: bool
    ) -> dict[str, Any]:
        """One group of an OffsetFetch v8+ (KIP-709), authorized as Kafka does: DESCRIBE on
        the group, then DESCRIBE on each topic."""
        if not await self._group_allowed(context, AclOperation.DESCRIBE, group.group_id):
            error = ErrorCode.group_authorization_failed
            return {"group_id": group.group_id, "error_code": error, "topics": []}
        if version >= FIRST_VERSION_WITH_TOPIC_IDS:
            result = self._fetch_by_topic_ids(group)
        else:
            error, fetched = self._coordinator.fetch_offsets(
                group.group_id, _requested(group.topics), _member(group, version)
            )
            result = {"group_id": group.group_id, "error_code": error, "topics": _topics(fetched)}
        if require_stable:
            self._mark_unstable(group.group_id, result["topics"])
        result["topics"] = await self._describable(context, result["topics"], group.topics is None)
        return result

    def _mark_unstable(self, group_id: str, topics: list[dict[str, Any]]) -> None:
        """KIP-447's require_stable: a partition whose offset an open transaction holds answers
        UNSTABLE_OFFSET_COMMIT (the consumer retries) instead of a committed offset."""
        for topic in topics:
            for partition in topic["partitions"]:
                if topic.get("name") is not None and self._coordinator.is_unstable(
                    group_id, topic["name"], partition["partition_index"]
                ):
                    partition.update(_NO_OFFSET, error_code=ErrorCode.unstable_offset_commit)

    async def _describable(
        self, context: RequestContext, topics: list[dict[str, Any]], every_topic: bool
    ) -> list[dict[str, Any]]:
        """Topics the principal may not DESCRIBE: left out of an every-topic answer, each
        partition TOPIC_AUTHORIZATION_FAILED when named."""
        allowed = await self._allowed_topics(
            context, AclOperation.DESCRIBE, (t.get("name") for t in topics)
        )
        answered = []
        for topic in topics:
            if topic.get("name") is None or topic["name"] in allowed:
                answered.append(topic)
            elif not every_topic:
                refused = [
                    {**p, **_NO_OFFSET, "error_code": ErrorCode.topic_authorization_failed}
                    for p in topic["partitions"]
                ]
                answered.append({**topic, "partitions": refused})
        return answered

    def _fetch_by_topic_ids(self, group: Any) -> dict[str, Any]:
        """One group of an OffsetFetch v10: topics named by id, in the request's order."""
        named = (
            None
            if group.topics is None
            else self._named(group.topics, FIRST_VERSION_WITH_TOPIC_IDS)
        )
        requested = (
            None
            if named is None
            else [(name, list(t.partition_indexes)) for name, t in named if name is not None]
        )
        error, fetched = self._coordinator.fetch_offsets(
            group.group_id, requested, _member(group, FIRST_VERSION_WITH_TOPIC_IDS)
        )
        topics = _topics(fetched)
        for topic in topics:
            topic["topic_id"] = self._coordinator.topic_id(topic["name"])
        if named is None:
            # Offsets of a deleted topic cannot be named by id: Kafka leaves them out.
            topics = [topic for topic in topics if topic["topic_id"] is not None]
        elif error is ErrorCode.none:
            by_name = {topic["name"]: topic for topic in topics}
            topics = [
                by_name[name]
                if name is not None
                else _unknown_topic_id(requested_topic.topic_id, requested_topic.partition_indexes)
                for name, requested_topic in named
            ]
        return {"group_id": group.group_id, "error_code": error, "topics": topics}

    async def offset_delete(self, request: Any, context: RequestContext) -> Any:
        # As Kafka: DELETE on the group, then READ on each topic.
        if not await self._group_allowed(context, AclOperation.DELETE, request.group_id):
            return make_response(
                OFFSET_DELETE,
                context.api_version,
                {"error_code": ErrorCode.group_authorization_failed, "topics": []},
            )
        readable = await self._allowed_topics(
            context, AclOperation.READ, (t.name for t in request.topics)
        )
        error, results = await self._coordinator.delete_offsets(
            request.group_id,
            [
                (t.name, [p.partition_index for p in t.partitions])
                for t in request.topics
                if t.name in readable
            ],
        )
        results = list(results) + [
            (
                t.name,
                [(p.partition_index, ErrorCode.topic_authorization_failed) for p in t.partitions],
            )
            for t in request.topics
            if t.name not in readable
        ]
        return make_response(
            OFFSET_DELETE,
            context.api_version,
            {"error_code": error, "topics": _partition_errors(results)},
        )


_NO_OFFSET = {"committed_offset": -1, "committed_leader_epoch": -1, "metadata": ""}


def _requested(topics: Any) -> list[tuple[str, list[int]]] | None:
    if topics is None:
        return None
    return [(topic.name, list(topic.partition_indexes)) for topic in topics]


def _topics(fetched: FetchedOffsets, error: ErrorCode = ErrorCode.none) -> list[dict[str, Any]]:
    return [
        {
            "name": topic,
            "partitions": [
                {
                    "partition_index": partition,
                    "committed_offset": -1 if offset is None else offset.offset,
                    "committed_leader_epoch": -1 if offset is None else offset.leader_epoch,
                    "metadata": "" if offset is None else offset.metadata,
                    "error_code": error,
                }
                for partition, offset in partitions
            ],
        }
        for topic, partitions in fetched
    ]


def _unknown_topic_id(topic_id: uuid.UUID, partitions: Sequence[int]) -> dict[str, Any]:
    return {
        "topic_id": topic_id,
        "partitions": [
            {
                "partition_index": partition,
                "committed_offset": -1,
                "committed_leader_epoch": -1,
                "metadata": "",
                "error_code": ErrorCode.unknown_topic_id,
            }
            for partition in partitions
        ],
    }


def _partition_errors(results: PartitionErrors) -> list[dict[str, Any]]:
    return [
        {
            "name": topic,
            "partitions": [
                {"partition_index": partition, "error_code": error} for partition, error in outcomes
            ],
        }
        for topic, outcomes in results
    ]


def _member(group: Any, version: int) -> tuple[str | None, int]:
    """The member id and epoch of an OffsetFetch v9+ group (KIP-848); none before."""
    if version < 9:
        return None, -1
    return group.member_id, group.member_epoch
