"""What authorization costs krust's produce and fetch: the same librdkafka produce and read of
one topic with the built-in ACL authorizer on (every decision served from the core's cache
after the first) and with authorization off, restarting the broker between runs."""

from __future__ import annotations

import os
import statistics
from dataclasses import dataclass

from brokers import KrustBroker
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from workloads.consume import consume_with_librdkafka
from workloads.produce import ProduceCase, produce_with_librdkafka
from workloads.topics import create_topic

CASE = ProduceCase(record_bytes=1024, acks="1", partitions=8, compression="none")
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
# The ACL authorizer on, and an ACL that grants the load generators (User:ANONYMOUS) their
# topics; everything no ACL names stays open, so the ACL can be created over the Admin API.
AUTHORIZER_ON = {
    "authorizer.class.name": STANDARD_AUTHORIZER,
    "allow.everyone.if.no.acl.found": "true",
}
TOPIC_PREFIX = "authz-"


@dataclass(frozen=True)
class AuthorizationOverheadResult:
    off_produce_mb_per_s: float
    on_produce_mb_per_s: float
    off_fetch_mb_per_s: float
    on_fetch_mb_per_s: float


def produce_and_fetch_with_authorization_on_and_off(
    broker: KrustBroker, produce_bytes: int, repetitions: int
) -> AuthorizationOverheadResult:
    """Alternates runs with authorization off and on (medians of each): a produce of
    `produce_bytes` into a fresh topic, then one read of it from the start."""
    records = produce_bytes // CASE.record_bytes
    produced: dict[bool, list[float]] = {False: [], True: []}
    fetched: dict[bool, list[float]] = {False: [], True: []}
    for run in range(repetitions):
        for on in (False, True):
            broker.stop()
            broker.overrides = dict(AUTHORIZER_ON) if on else {}
            broker.start()
            if on:
                _grant_prefix(broker.bootstrap)
            topic = f"{TOPIC_PREFIX}{'on' if on else 'off'}-{run}"
            create_topic(broker.bootstrap, topic, CASE.partitions)
            # Unmeasured: the first produce after a start is slower, and it fills the cache.
            warm_up = f"{topic}-warm-up"
            create_topic(broker.bootstrap, warm_up, CASE.partitions)
            produce_with_librdkafka(broker.bootstrap, warm_up, CASE, records // 4)
            os.sync()
            result = produce_with_librdkafka(broker.bootstrap, topic, CASE, records)
            produced[on].append(result.mb_per_s)
            read = consume_with_librdkafka(broker.bootstrap, topic, CASE.partitions, records)
            fetched[on].append(read.mb_per_s)
    broker.stop()
    broker.overrides = {}
    broker.start()
    return AuthorizationOverheadResult(
        statistics.median(produced[False]),
        statistics.median(produced[True]),
        statistics.median(fetched[False]),
        statistics.median(fetched[True]),
    )


def _grant_prefix(bootstrap: str) -> None:
    """ALLOW User:ANONYMOUS everything on the benchmark's topics (PREFIXED)."""
    grant = AclBinding(
        ResourceType.TOPIC,
        TOPIC_PREFIX,
        ResourcePatternType.PREFIXED,
        "User:ANONYMOUS",
        "*",
        AclOperation.ALL,
        AclPermissionType.ALLOW,
    )
    admin = AdminClient({"bootstrap.servers": bootstrap})  # must outlive the future
    admin.create_acls([grant])[grant].result(60)
