"""Bad input to a three-node cluster: clear Kafka errors, nothing changed."""

from __future__ import annotations

from confluent_kafka.admin import AdminClient, NewTopic
from kafka import TopicPartition
from kafka.admin import KafkaAdminClient
from kafka.errors import InvalidReplicationAssignmentError

from .cluster import Cluster
from .no_loss import create_replicated_topic


def test_topic_with_more_replicas_than_nodes_is_invalid_replication_factor(
    cluster: Cluster,
) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    topic = "replication-factor-too-large"
    error = admin.create_topics([NewTopic(topic, 1, len(cluster.nodes) + 1)])[topic].exception(60)
    assert error is not None and error.args[0].name() == "INVALID_REPLICATION_FACTOR"
    assert topic not in admin.list_topics(timeout=30).topics


def test_reassignment_to_an_unknown_broker_is_refused(cluster: Cluster) -> None:
    topic = "reassign-to-unknown-broker"
    create_replicated_topic(cluster, topic, 1)
    before = cluster.partition_state(topic, 0)
    unknown = max(node.node_id for node in cluster.nodes) + 100
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        target = TopicPartition(topic, 0)
        answer = admin.alter_partition_reassignments({target: [*before.replicas[:2], unknown]})
        assert answer == {target: InvalidReplicationAssignmentError}
        assert admin.list_partition_reassignments([target]) == {}
    finally:
        admin.close()
    assert cluster.partition_state(topic, 0).replicas == before.replicas
