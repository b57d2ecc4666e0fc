"""OffsetCommit, OffsetFetch and OffsetDelete: kio entities in and out.

kio has no OffsetCommit v0-v1 and no OffsetFetch v0 (Kafka 4 dropped them, KIP-896); the
versions served still overlap what librdkafka needs (OffsetCommit 2, OffsetFetch 1).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from krust.group.api_membership import Route, millis
from krust.group.coordinator import FetchedOffsets, GroupCoordinator
from krust.group.offset_manager import OffsetCommitRequest, PartitionCommit, PartitionErrors
from krust.group.results import ErrorCode
from krust.protocol import make_response

if TYPE_CHECKING:
    from krust.bridge import RequestContext

OFFSET_COMMIT = 8
OFFSET_FETCH = 9
OFFSET_DELETE = 47


class OffsetApis:
    def __init__(self, coordinator: GroupCoordinator) -> None:
        self._coordinator = coordinator

    def routes(self) -> Sequence[Route]:
        return [
            (OFFSET_COMMIT, 2, 9, self.offset_commit),
            (OFFSET_FETCH, 1, 9, self.offset_fetch),
            (OFFSET_DELETE, 0, 0, self.offset_delete),
        ]

    async def offset_commit(self, request: Any, context: RequestContext) -> Any:
        version = context.api_version
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
                        topic.name,
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
                    for topic in request.topics
                ),
            )
        )
        return make_response(OFFSET_COMMIT, version, {"topics": _partition_errors(results)})

    async def offset_fetch(self, request: Any, context: RequestContext) -> Any:
        version = context.api_version
        if version >= 8:
            groups = []
            for group in request.groups:
                error, fetched = self._coordinator.fetch_offsets(
                    group.group_id, _requested(group.topics)
                )
                groups.append(
                    {"group_id": group.group_id, "error_code": error, "topics": _topics(fetched)}
                )
            return make_response(OFFSET_FETCH, version, {"groups": groups})
        # v2+ may ask for every committed offset with a null topic list.
        requested = _requested(request.topics)
        error, fetched = self._coordinator.fetch_offsets(request.group_id, requested)
        if version >= 2:
            return make_response(
                OFFSET_FETCH, version, {"error_code": error, "topics": _topics(fetched)}
            )
        # v1 has no group-level error: it is reported on every requested partition.
        if error is not ErrorCode.none:
            assert requested is not None
            fetched = [(topic, [(p, None) for p in partitions]) for topic, partitions in requested]
        return make_response(OFFSET_FETCH, version, {"topics": _topics(fetched, error)})

    async def offset_delete(self, request: Any, context: RequestContext) -> Any:
        error, results = await self._coordinator.delete_offsets(
            request.group_id,
            [(t.name, [p.partition_index for p in t.partitions]) for t in request.topics],
        )
        return make_response(
            OFFSET_DELETE,
            context.api_version,
            {"error_code": error, "topics": _partition_errors(results)},
        )


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
