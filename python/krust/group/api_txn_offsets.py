"""TxnOffsetCommit (KIP-98, KIP-447): a transactional producer commits a consumer group's offsets
inside its transaction; kio entities in and out.

v0-v2 name only the group; v3+ also the consumer's generation, member id and instance id, so
that a zombie consumer of an old generation cannot commit (KIP-447).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from krust.bridge.protocol import make_response
from krust.group.api_membership import Route
from krust.group.coordinator import GroupCoordinator
from krust.group.offset_manager import PartitionCommit, TxnOffsetCommitRequest
from krust.group.results import ErrorCode
from krust.plugins.authorizer import AclOperation, ResourceType
from krust.security.authorization import Authorization

if TYPE_CHECKING:
    from krust.bridge.dispatcher import RequestContext

TXN_OFFSET_COMMIT = 28


class TxnOffsetApis:
    def __init__(
        self, coordinator: GroupCoordinator, authorization: Authorization | None = None
    ) -> None:
        self._coordinator = coordinator
        self._authorization = authorization or Authorization(None)

    def routes(self) -> Sequence[Route]:
        return [(TXN_OFFSET_COMMIT, 0, 4, self.txn_offset_commit)]

    async def txn_offset_commit(self, request: Any, context: RequestContext) -> Any:
        version = context.api_version
        # As Kafka: WRITE on the transactional id, READ on the group, then READ on each topic.
        refused_all: ErrorCode | None = None
        if not await self._authorization.allowed(
            context, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id
        ):
            refused_all = ErrorCode.transactional_id_authorization_failed
        elif not await self._authorization.allowed(
            context, AclOperation.READ, ResourceType.GROUP, request.group_id
        ):
            refused_all = ErrorCode.group_authorization_failed
        if refused_all is not None:
            return _response(
                version,
                [
                    (t.name, [(p.partition_index, refused_all) for p in t.partitions])
                    for t in request.topics
                ],
            )
        readable = await self._authorization.allowed_names(
            context, AclOperation.READ, ResourceType.TOPIC, [t.name for t in request.topics]
        )
        refused = [
            (
                t.name,
                [(p.partition_index, ErrorCode.topic_authorization_failed) for p in t.partitions],
            )
            for t in request.topics
            if t.name not in readable
        ]
        results = await self._coordinator.commit_transactional_offsets(
            TxnOffsetCommitRequest(
                group_id=request.group_id,
                producer_id=request.producer_id,
                producer_epoch=request.producer_epoch,
                generation_id=request.generation_id if version >= 3 else -1,
                member_id=request.member_id if version >= 3 else "",
                group_instance_id=request.group_instance_id if version >= 3 else None,
                topics=tuple(
                    (
                        topic.name,
                        tuple(
                            PartitionCommit(
                                p.partition_index,
                                p.committed_offset,
                                p.committed_leader_epoch if version >= 2 else -1,
                                p.committed_metadata,
                            )
                            for p in topic.partitions
                        ),
                    )
                    for topic in request.topics
                    if topic.name in readable
                ),
            )
        )
        return _response(version, [*results, *refused])


def _response(version: int, results: list[tuple[str, list[tuple[int, ErrorCode]]]]) -> Any:
    return make_response(
        TXN_OFFSET_COMMIT,
        version,
        {
            "topics": [
                {
                    "name": topic,
                    "partitions": [
                        {"partition_index": partition, "error_code": error}
                        for partition, error in outcomes
                    ],
                }
                for topic, outcomes in results
            ]
        },
    )
