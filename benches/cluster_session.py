"""The cluster workload's session: a fresh three-node cluster of one kind (Apache Kafka or
krust, the same server.properties for both), its produce, latency and failover measurements,
then every node stopped."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass

from integration.cluster import Cluster, ClusterError
from plan import Plan
from report import Better, Metric, Results
from workloads.cluster import end_to_end_latency, failover_seconds, produce_throughput

GROUP = "Cluster (3 combined nodes, RF=3, acks=all, min.insync.replicas=2, librdkafka)"
PRODUCE = Metric(GROUP, "produce 1 KiB +idem p8", "MB/s", Better.HIGHER)
LATENCY_P99 = Metric(GROUP, "end-to-end latency p99 (1 KiB, 1 partition)", "ms", Better.LOWER)
FAILOVER = Metric(
    GROUP, "failover: leader kill -9 to first acknowledged produce", "s", Better.LOWER
)


@dataclass
class ClusterSession:
    cluster: Cluster
    plan: Plan
    results: Results

    def run(self) -> None:
        try:
            self.cluster.start()
        except ClusterError as error:
            self.results.failures.append(f"{self.cluster.kind} cluster: {error}"[:400])
            self.cluster.stop()
            return
        try:
            for name, action in (
                ("produce", self._produce),
                ("latency", self._latency),
                ("failover", self._failover),
            ):
                self._attempt(name, action)
        finally:
            self.cluster.stop()

    def _attempt(self, name: str, action: Callable[[], None]) -> None:
        """One measurement; a failure is recorded and the next one still runs on a whole
        cluster."""
        try:
            self.cluster.heal()
            action()
        except Exception as error:
            self.results.failures.append(
                f"{self.cluster.kind} cluster: {name}: {type(error).__name__}: {error}"[:400]
            )

    def _produce(self) -> None:
        records = self.plan.cluster_produce_bytes // 1024
        result = produce_throughput(self.cluster, "cluster-produce", records)
        self.results.add(PRODUCE, self.cluster.kind, result.mb_per_s)

    def _latency(self) -> None:
        result = end_to_end_latency(
            self.cluster,
            "cluster-latency",
            self.plan.latency_rate_per_s,
            self.plan.cluster_latency_seconds,
        )
        self.results.add(LATENCY_P99, self.cluster.kind, result.percentile(0.99))

    def _failover(self) -> None:
        times = [
            failover_seconds(self.cluster, f"cluster-failover-{index}")
            for index in range(self.plan.cluster_failovers)
        ]
        self.results.add(FAILOVER, self.cluster.kind, statistics.median(times))
