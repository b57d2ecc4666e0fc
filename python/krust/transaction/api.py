"""InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, DescribeTransactions and
ListTransactions: kio entities in and out, with Kafka's authorization (KafkaApis).

WRITE on the transactional id for the producer's requests, DESCRIBE for describe/list,
CLUSTER_ACTION for the brokers' batched AddPartitionsToTxn (v4+). Clients older than KIP-588
(InitProducerId < 4, AddPartitionsToTxn / AddOffsetsToTxn / EndTxn < 2) get
INVALID_PRODUCER_EPOCH where newer ones get PRODUCER_FENCED.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from krust.bridge.protocol import make_response
from krust.group.records import OFFSETS_TOPIC
from krust.plugins.authorizer import AclOperation, ResourceType
from krust.security.authorization import Authorization
from krust.transaction.coordinator import TransactionCoordinator
from krust.transaction.metadata import TopicPartition

if TYPE_CHECKING:
    from krust.bridge.dispatcher import Handler, RequestContext

INIT_PRODUCER_ID = 22
ADD_PARTITIONS_TO_TXN = 24
ADD_OFFSETS_TO_TXN = 25
END_TXN = 26
DESCRIBE_TRANSACTIONS = 65
LIST_TRANSACTIONS = 66

Route = tuple[int, int, int, "Handler"]


def _millis(delta: timedelta) -> int:
    return delta // timedelta(milliseconds=1)


def _kip588(error: ErrorCode, version: int, first_fenced_version: int) -> ErrorCode:
    """Older clients know INVALID_PRODUCER_EPOCH only."""
    if error is ErrorCode.producer_fenced and version < first_fenced_version:
        return ErrorCode.invalid_producer_epoch
    return error


class TransactionApis:
    def __init__(
        self, coordinator: TransactionCoordinator, authorization: Authorization | None = None
    ) -> None:
        self._coordinator = coordinator
        self._authorization = authorization or Authorization(None)

    def routes(self) -> Sequence[Route]:
        # InitProducerId v6 is KIP-939's two-phase commit, which krust does not serve.
        return [
            (INIT_PRODUCER_ID, 0, 5, self.init_producer_id),
            (ADD_PARTITIONS_TO_TXN, 0, 5, self.add_partitions_to_txn),
            (ADD_OFFSETS_TO_TXN, 0, 4, self.add_offsets_to_txn),
            (END_TXN, 0, 5, self.end_txn),
            (DESCRIBE_TRANSACTIONS, 0, 0, self.describe_transactions),
            (LIST_TRANSACTIONS, 0, 2, self.list_transactions),
        ]

    async def _may(
        self, context: RequestContext, operation: AclOperation, transactional_id: str
    ) -> bool:
        return await self._authorization.allowed(
            context, operation, ResourceType.TRANSACTIONAL_ID, transactional_id
        )

    # -- InitProducerId ------------------------------------------------------------------------

    async def init_producer_id(self, request: Any, context: RequestContext) -> Any:
        version = context.api_version
        transactional_id = request.transactional_id

        def answer(error: ErrorCode, producer_id: int = -1, epoch: int = -1) -> Any:
            return make_response(
                INIT_PRODUCER_ID,
                version,
                {
                    "error_code": _kip588(error, version, 4),
                    "producer_id": producer_id,
                    "producer_epoch": epoch,
                },
            )

        if transactional_id is None:
            # The core serves idempotent producers; it passes on only transactional ones.
            return answer(ErrorCode.invalid_request)
        if not await self._may(context, AclOperation.WRITE, transactional_id):
            return answer(ErrorCode.transactional_id_authorization_failed)
        producer_id = request.producer_id if version >= 3 else -1
        epoch = request.producer_epoch if version >= 3 else -1
        if (producer_id == -1) != (epoch == -1):
            return answer(ErrorCode.invalid_request)
        result = await self._coordinator.init_producer_id(
            transactional_id,
            _millis(request.transaction_timeout),
            None if producer_id == -1 else (producer_id, epoch),
        )
        return answer(result.error, result.producer_id, result.producer_epoch)

    # -- AddPartitionsToTxn --------------------------------------------------------------------

    async def add_partitions_to_txn(self, request: Any, context: RequestContext) -> Any:
        version = context.api_version
        if version < 4:
            transactions = [
                (
                    request.v3_and_below_transactional_id,
                    request.v3_and_below_producer_id,
                    request.v3_and_below_producer_epoch,
                    False,
                    _partitions(request.v3_and_below_topics),
                )
            ]
        else:
            # KIP-890: brokers batch transactions, and may only verify (verify_only).
            if not await self._authorization.allowed(
                context, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER
            ):
                return make_response(
                    ADD_PARTITIONS_TO_TXN,
                    version,
                    {"error_code": ErrorCode.cluster_authorization_failed},
                )
            transactions = [
                (
                    t.transactional_id,
                    t.producer_id,
                    t.producer_epoch,
                    t.verify_only,
                    _partitions(t.topics),
                )
                for t in request.transactions
            ]
        results = [
            (
                transaction[0],
                await self._add_partitions(context, *transaction),
            )
            for transaction in transactions
        ]
        if version < 4:
            return make_response(
                ADD_PARTITIONS_TO_TXN,
                version,
                {"results_by_topic_v3_and_below": _topic_results(results[0][1])},
            )
        return make_response(
            ADD_PARTITIONS_TO_TXN,
            version,
            {
                "results_by_transaction": [
                    {"transactional_id": tid, "topic_results": _topic_results(errors)}
                    for tid, errors in results
                ]
            },
        )

    async def _add_partitions(
        self,
        context: RequestContext,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        verify_only: bool,
        partitions: list[TopicPartition],
    ) -> dict[TopicPartition, ErrorCode]:
        version = context.api_version
        if version < 4 and not await self._may(context, AclOperation.WRITE, transactional_id):
            return dict.fromkeys(partitions, ErrorCode.transactional_id_authorization_failed)
        topics = {p.topic for p in partitions}
        if version < 4:
            # Kafka never lets a producer add an internal topic by hand.
            writable = await self._authorization.allowed_names(
                context, AclOperation.WRITE, ResourceType.TOPIC, topics - _INTERNAL_TOPICS
            )
        else:
            writable = topics
        errors: dict[TopicPartition, ErrorCode] = {}
        for partition in partitions:
            if partition.topic not in writable:
                errors[partition] = ErrorCode.topic_authorization_failed
            elif not self._coordinator.partition_exists(partition):
                errors[partition] = ErrorCode.unknown_topic_or_partition
        if errors:
            return {p: errors.get(p, ErrorCode.operation_not_attempted) for p in partitions}
        wanted = frozenset(partitions)
        if verify_only:
            return self._coordinator.verify(transactional_id, producer_id, producer_epoch, wanted)
        error = await self._coordinator.add_partitions(
            transactional_id, producer_id, producer_epoch, wanted, 2 if version >= 4 else 0
        )
        return dict.fromkeys(partitions, _kip588(error, version, 2))

    # -- AddOffsetsToTxn -----------------------------------------------------------------------

    async def add_offsets_to_txn(self, request: Any, context: RequestContext) -> Any:
        version = context.api_version

        def answer(error: ErrorCode) -> Any:
            return make_response(ADD_OFFSETS_TO_TXN, version, {"error_code": error})

        if not await self._may(context, AclOperation.WRITE, request.transactional_id):
            return answer(ErrorCode.transactional_id_authorization_failed)
        if not await self._authorization.allowed(
            context, AclOperation.READ, ResourceType.GROUP, request.group_id
        ):
            return answer(ErrorCode.group_authorization_failed)
        offsets = TopicPartition(
            OFFSETS_TOPIC, self._coordinator.offsets_partition(request.group_id)
        )
        error = await self._coordinator.add_partitions(
            request.transactional_id,
            request.producer_id,
            request.producer_epoch,
            frozenset({offsets}),
        )
        return answer(_kip588(error, version, 2))

    # -- EndTxn --------------------------------------------------------------------------------

    async def end_txn(self, request: Any, context: RequestContext) -> Any:
        version = context.api_version
        if not await self._may(context, AclOperation.WRITE, request.transactional_id):
            return make_response(
                END_TXN, version, {"error_code": ErrorCode.transactional_id_authorization_failed}
            )
        result = await self._coordinator.end_transaction(
            request.transactional_id,
            request.producer_id,
            request.producer_epoch,
            request.committed,
            # KIP-890 part 2: EndTxn v5+ is transaction version 2 (epoch bump at every end).
            client_version=2 if version >= 5 else 0,
        )
        return make_response(
            END_TXN,
            version,
            {
                "error_code": _kip588(result.error, version, 2),
                "producer_id": result.producer_id,
                "producer_epoch": result.producer_epoch,
            },
        )

    # -- DescribeTransactions, ListTransactions ------------------------------------------------

    async def describe_transactions(self, request: Any, context: RequestContext) -> Any:
        ids = list(request.transactional_ids)
        allowed = await self._authorization.allowed_names(
            context, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, ids
        )
        states = []
        for transactional_id in ids:
            if transactional_id not in allowed:
                states.append(
                    {
                        "transactional_id": transactional_id,
                        "error_code": ErrorCode.transactional_id_authorization_failed,
                        "transaction_start_time": -1,
                    }
                )
                continue
            described = self._coordinator.describe(transactional_id)
            # As Kafka: only the topics the caller may describe.
            visible = await self._authorization.allowed_names(
                context,
                AclOperation.DESCRIBE,
                ResourceType.TOPIC,
                {p.topic for p in described.partitions},
            )
            by_topic: dict[str, list[int]] = {}
            for topic, partition in described.partitions:
                if topic in visible:
                    by_topic.setdefault(topic, []).append(partition)
            states.append(
                {
                    "transactional_id": transactional_id,
                    "error_code": described.error,
                    "transaction_state": described.state,
                    "transaction_timeout": described.timeout_ms,
                    "transaction_start_time": described.start_time_ms,
                    "producer_id": described.producer_id,
                    "producer_epoch": described.producer_epoch,
                    "topics": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()],
                }
            )
        return make_response(
            DESCRIBE_TRANSACTIONS, context.api_version, {"transaction_states": states}
        )

    async def list_transactions(self, request: Any, context: RequestContext) -> Any:
        version = context.api_version
        pattern = None
        raw_pattern = request.transactional_id_pattern if version >= 2 else None
        if raw_pattern:
            try:
                pattern = re.compile(raw_pattern)
            except re.error:
                return make_response(
                    LIST_TRANSACTIONS,
                    version,
                    {"error_code": ErrorCode.invalid_regular_expression},
                )
        error, unknown, listed = self._coordinator.list_transactions(
            list(request.state_filters),
            [int(p) for p in request.producer_id_filters],
            int(request.duration_filter) if version >= 1 else -1,
            pattern,
        )
        allowed = await self._authorization.allowed_names(
            context,
            AclOperation.DESCRIBE,
            ResourceType.TRANSACTIONAL_ID,
            [t.transactional_id for t in listed],
        )
        return make_response(
            LIST_TRANSACTIONS,
            version,
            {
                "error_code": error,
                "unknown_state_filters": unknown,
                "transaction_states": [
                    {
                        "transactional_id": t.transactional_id,
                        "producer_id": t.producer_id,
                        "transaction_state": t.state,
                    }
                    for t in listed
                    if t.transactional_id in allowed
                ],
            },
        )


_INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, "__transaction_state", "__share_group_state"})


def _partitions(topics: Iterable[Any]) -> list[TopicPartition]:
    return [TopicPartition(t.name, int(p)) for t in topics for p in t.partitions]


def _topic_results(errors: dict[TopicPartition, ErrorCode]) -> list[dict[str, Any]]:
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), error in errors.items():
        by_topic.setdefault(topic, []).append(
            {"partition_index": partition, "partition_error_code": error}
        )
    return [{"name": topic, "results_by_partition": results} for topic, results in by_topic.items()]
