"""What a node does with its metadata before its port opens: format the log dirs, start the
controller quorum, replay the metadata log into the image and push it to the core, bootstrap
an empty log and register a quorum of one's broker.

It imports only what that replay needs, no asyncio and no kio: an empty broker's first
Metadata answer waits for it, and the controller's event-loop side (`controller.py`) is loaded
after the port opens on a node that needs nothing of Python before it listens
(docs/python-services.md, "Start-up order")."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from krust.bridge.core import ServicesCore
from krust.controller.bootstrap import initial_records, registration_record
from krust.controller.features import check_finalized_levels
from krust.controller.image import MetadataImage
from krust.controller.publisher import METADATA_TOPIC, MetadataPublisher
from krust.controller.records import (
    METADATA_VERSION_FEATURE,
    AbortTransactionRecord,
    BeginTransactionRecord,
    EndTransactionRecord,
    MetadataRecord,
    NoOpRecord,
    encode_record,
)

log = logging.getLogger(__name__)

# How often start-up logs that it is still waiting for the quorum.
QUORUM_WAIT_LOG_S = 5.0


def open_metadata(
    config: Mapping[str, Any], core: ServicesCore, cluster_id: str
) -> MetadataPublisher:
    """Start the quorum on formatted log dirs and wait until the image holds what it
    committed, register this broker and push the image to the core. Blocking."""
    node_id = config["node.id"]
    publisher = MetadataPublisher(config, core, MetadataImage.empty(cluster_id, node_id))
    # A restart (the log holds records from before this start; once the quorum runs, it holds
    # the leader's own entries too).
    restart = core.log_end_offset(METADATA_TOPIC, 0) > 0
    core.start_quorum(
        publisher.apply, publisher.snapshot, publisher.load_snapshot, publisher.leader_changed
    )
    if config["controller.quorum.voters"]:
        # The quorum needs this node's controller listener, which serves only once the port
        # opens: the image reaches the core when the quorum has a leader, and the broker
        # registers through the controller channel (krust.runtime.lifecycle_manager).
        publisher.publish_when_caught_up()
        return publisher
    while not publisher.wait_caught_up(QUORUM_WAIT_LOG_S):
        log.info("waiting for the controller quorum to elect a leader")
    if restart:
        # The registration below must not land in a transaction a crash left open (its
        # records are separate entries, a crash can keep only some).
        end_transaction_left_open(core, publisher, None)
    check_finalized_levels(publisher.image.features)
    bootstrapped = METADATA_VERSION_FEATURE in publisher.image.features
    records = [] if bootstrapped else initial_records()
    # A quorum of one registers its broker here. The broker epoch is the record's offset.
    first = next_offset(core)
    records.append(registration_record(config, broker_epoch=first + len(records)))
    # The last record ends the transaction: replayed, the image holds them all.
    publisher.wait_replayed_blocking(core.propose(atomic(records)), None)
    publisher.start_publishing()
    return publisher


def next_offset(core: ServicesCore) -> int:
    """The offset the first record of the next commit gets, after its
    BeginTransactionRecord (Kafka's broker epochs are offsets)."""
    return core.log_end_offset(METADATA_TOPIC, 0) + 1


def atomic(records: Sequence[MetadataRecord]) -> list[bytes]:
    """The records' values in a metadata transaction (KIP-868): each is its own Raft entry,
    and a new leader may commit only some of them, so they apply together at the
    EndTransactionRecord or not at all. One record is wrapped too, so that the offsets a
    commit gives are known before it (`next_offset`)."""
    values = [encode_record(record) for record in records]
    begin = BeginTransactionRecord(name=f"{len(values)} records")
    return [encode_record(begin), *values, encode_record(EndTransactionRecord())]


def end_transaction_left_open(
    core: ServicesCore, publisher: MetadataPublisher, timeout: float | None
) -> None:
    """Blocking: replay the log up to a record of this leader's epoch, then abort a metadata
    transaction (KIP-868) that the last controller, or this node before a crash, left open.
    Right after an election the image can lag the log: it may still show a transaction the log
    has ended (an abort then would stop every node's replay) or not yet show one the log
    leaves open. Kafka's raft client tells its controller of a leadership only once the
    controller has caught up; here a NoOpRecord of this epoch, once replayed, marks that
    point. TimeoutError after `timeout` seconds of waiting."""
    barrier = core.propose([encode_record(NoOpRecord())])
    publisher.wait_replayed_blocking(barrier, timeout)
    if publisher.in_transaction:
        abort = AbortTransactionRecord(reason="controller failover")
        last = core.propose([encode_record(abort)])
        publisher.wait_replayed_blocking(last, timeout)
