"""WriteTxnMarkers, the partition leader's side (Kafka's handleWriteTxnMarkersRequest).

A transaction coordinator, on this broker or another, asks the leader of every partition of an
ending transaction to append its COMMIT or ABORT marker. The core appends them (they move the
last stable offset and the aborted-transaction index) and waits for the in-sync replicas; the
markers that reach `__consumer_offsets` also end the transaction's pending offsets in the group
coordinator (TxnOffsetCommit's offsets become committed or are dropped).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from krust.bridge.protocol import make_response
from krust.group.api_membership import Route
from krust.group.coordinator import GroupCoordinator
from krust.group.records import OFFSETS_TOPIC
from krust.group.results import ErrorCode
from krust.plugins.authorizer import CLUSTER_NAME, AclOperation, ResourceType
from krust.security.authorization import Authorization

if TYPE_CHECKING:
    from krust.bridge.dispatcher import RequestContext

WRITE_TXN_MARKERS = 27

Marker = tuple[str, int, int, int, int, bool]
"""(topic, partition, producer id, producer epoch, coordinator epoch, commit)."""


class MarkerWriter(Protocol):
    def write_txn_markers(self, markers: Sequence[Marker]) -> list[int]: ...


class TxnMarkerApis:
    def __init__(
        self,
        core: MarkerWriter,
        coordinator: GroupCoordinator,
        authorization: Authorization | None = None,
    ) -> None:
        self._core = core
        self._coordinator = coordinator
        self._authorization = authorization or Authorization(None)

    def routes(self) -> Sequence[Route]:
        return [(WRITE_TXN_MARKERS, 1, 1, self.write_txn_markers)]

    async def write_txn_markers(self, request: Any, context: RequestContext) -> Any:
        markers: list[Marker] = [
            (
                topic.name,
                partition,
                marker.producer_id,
                marker.producer_epoch,
                marker.coordinator_epoch,
                marker.transaction_result,
            )
            for marker in request.markers
            for topic in marker.topics
            for partition in topic.partition_indexes
        ]
        # As Kafka: only brokers (CLUSTER_ACTION on the cluster) write markers.
        if await self._authorization.allowed(
            context, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME
        ):
            loop = asyncio.get_running_loop()
            codes = await loop.run_in_executor(None, self._core.write_txn_markers, markers)
        else:
            codes = [ErrorCode.cluster_authorization_failed.value] * len(markers)
        for (topic, partition, producer_id, _, _, commit), code in zip(markers, codes, strict=True):
            if topic == OFFSETS_TOPIC and code == 0:
                self._coordinator.complete_transaction(producer_id, commit, partition)
        return make_response(
            WRITE_TXN_MARKERS, context.api_version, {"markers": _results(request, iter(codes))}
        )


def _results(request: Any, codes: Any) -> list[dict[str, Any]]:
    """The response, in the request's order (codes are in that order too)."""
    return [
        {
            "producer_id": marker.producer_id,
            "topics": [
                {
                    "name": topic.name,
                    "partitions": [
                        {"partition_index": partition, "error_code": next(codes)}
                        for partition in topic.partition_indexes
                    ],
                }
                for topic in marker.topics
            ],
        }
        for marker in request.markers
    ]
