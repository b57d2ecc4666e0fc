"""One broker session: start it fresh, run every workload of the plan, stop it."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

from brokers import BrokerProcess, KrustBroker
from measure import PeakRssSampler, cpu_seconds, rss_bytes
from plan import Plan
from report import Better, Metric, Results
from workloads.authorization import produce_and_fetch_with_authorization_on_and_off
from workloads.background_work import (
    produce_with_and_without_background_work,
    produce_with_metrics_on_and_off,
)
from workloads.consume import consume_with_java, consume_with_librdkafka
from workloads.java_tools import JavaTools
from workloads.latency import measure_end_to_end
from workloads.many_partitions import many_partitions
from workloads.produce import (
    ProduceCase,
    ProduceResult,
    produce_with_java,
    produce_with_librdkafka,
)
from workloads.rebalance import PROTOCOLS, measure_rebalances
from workloads.startup import fixture_ready_s, loaded_restarts
from workloads.tls import produce_and_consume_over_tls
from workloads.topics import create_topic
from workloads.transactions import produce_in_transactions

_MIB = 1024 * 1024
CLIENTS = ("java", "librdkafka")

STARTUP = Metric(
    "Start-up and memory", "start-up to first Metadata (empty)", "s", Better.LOWER, 1 / 20
)
# krust only: Kafka has no equivalent to time (a Kafka test fixture is a container).
FIXTURE_READY = Metric(
    "Start-up and memory", "fixture ready: krust.Broker().start() (empty)", "s", Better.LOWER
)
IDLE_RSS = Metric("Start-up and memory", "idle RSS after start", "MiB", Better.LOWER, 1 / 10)
PEAK_RSS = Metric("Start-up and memory", "peak RSS during produce", "MiB", Better.LOWER)
CPU_PER_GB = Metric("Start-up and memory", "broker CPU per GB produced", "CPU s/GB", Better.LOWER)


def produce_metric(client: str, case: ProduceCase) -> Metric:
    return Metric("Produce throughput", f"{client}: {case.label}", "MB/s", Better.HIGHER, 1.5)


def consume_metric(client: str) -> Metric:
    return Metric(
        "Consume throughput", f"{client}: from start, 1 KiB records", "MB/s", Better.HIGHER, 1.5
    )


def consume_cpu_metric(client: str) -> Metric:
    # The clients, not the brokers, run out of CPU first on 2 cores: this is the broker's share.
    return Metric(
        "Consume throughput", f"{client}: broker CPU per GB consumed", "CPU s/GB", Better.LOWER
    )


def latency_metric(percentile: str, target: float | None) -> Metric:
    return Metric(
        "End-to-end latency", f"{percentile} (1 KiB, acks=all)", "ms", Better.LOWER, target
    )


def transactional_produce_metric(records_per_transaction: int) -> Metric:
    return Metric(
        "Transactions",
        f"produce, {records_per_transaction:,} records per transaction (1 KiB)",
        "MB/s",
        Better.HIGHER,
    )


def commit_metric(percentile: str) -> Metric:
    return Metric(
        "Transactions",
        f"commit_transaction {percentile} (100 records, 8 partitions)",
        "ms",
        Better.LOWER,
    )


def rebalance_metric(protocol: str, change: str, members: int, partitions: int) -> Metric:
    return Metric(
        f"Rebalance ({members} consumers, {partitions} partitions, confluent-kafka)",
        f"{protocol}: {change}, until all partitions consume again (mean over heartbeat phases)",
        "s",
        Better.LOWER,
        columns=("Kafka", "krust", "krust/Kafka (< 1: krust faster)"),
    )


@dataclass
class Session:
    broker: BrokerProcess
    tools: JavaTools
    plan: Plan
    results: Results

    def run(self, last_repetition: bool) -> None:
        self.broker.reset()
        self.results.add(STARTUP, self.broker.name, self.broker.start())
        try:
            time.sleep(2)  # let start-up work settle before calling the broker idle
            self.results.add(IDLE_RSS, self.broker.name, rss_bytes(self.broker.pid) / _MIB)
            if isinstance(self.broker, KrustBroker):
                self.results.add(FIXTURE_READY, self.broker.name, fixture_ready_s())
            workloads: list[tuple[str, Callable[[], None]]] = [
                ("produce", self._produce),
                ("consume", self._consume),
                ("latency", lambda: self._latency(last_repetition)),
                ("background-work", self._background_work),
                ("authorization", self._authorization),
                ("transactions", self._transactions),
                ("rebalance", self._rebalance),
            ]
            if self.plan.loaded_start_partitions:
                workloads.append(("loaded-start", self._loaded_start))
            if self.plan.many_partitions:
                workloads.append(("many-partitions", self._many_partitions))
            if self.broker.settings.tls_ca is not None:
                workloads.append(("tls", self._tls))
            for name, action in workloads:
                if name in self.plan.workloads:
                    self._attempt(name, action)
        finally:
            self.broker.stop()

    def _attempt(self, workload: str, action: Callable[[], None]) -> None:
        """Run one workload; a failure is recorded and the next workload still runs."""
        if self.broker.process is None or self.broker.process.poll() is not None:
            self.results.failures.append(f"{self.broker.name}: {workload} skipped, broker down")
            return
        try:
            action()
        except Exception as error:
            self.results.failures.append(
                f"{self.broker.name}: {workload}: {type(error).__name__}: {error}"[:400]
            )

    def _produce(self) -> None:
        bootstrap, pid = self.broker.bootstrap, self.broker.pid
        produced_bytes = 0
        cpu_before = cpu_seconds(pid)
        with PeakRssSampler(pid) as sampler:
            for index, case in enumerate(self.plan.produce_cases):
                records = self.plan.produce_bytes // case.record_bytes
                for client in CLIENTS:
                    topic = f"produce-{client}-{index}"
                    create_topic(bootstrap, topic, case.partitions)
                    result = self._produce_one(client, topic, case, records)
                    produced_bytes += result.bytes
                    self.results.add(
                        produce_metric(client, case), self.broker.name, result.mb_per_s
                    )
        cpu_used = cpu_seconds(pid) - cpu_before
        self.results.add(PEAK_RSS, self.broker.name, sampler.peak_bytes / _MIB)
        self.results.add(CPU_PER_GB, self.broker.name, cpu_used / (produced_bytes / 1e9))

    def _produce_one(
        self, client: str, topic: str, case: ProduceCase, records: int
    ) -> ProduceResult:
        if client == "java":
            return produce_with_java(self.tools, self.broker.bootstrap, topic, case, records)
        return produce_with_librdkafka(self.broker.bootstrap, topic, case, records)

    def _consume(self) -> None:
        bootstrap, partitions = self.broker.bootstrap, self.plan.consume_partitions
        records = self.plan.consume_bytes // 1024
        create_topic(bootstrap, "consume-source", partitions)
        fill = ProduceCase(1024, "1", partitions, "none")
        produce_with_librdkafka(bootstrap, "consume-source", fill, records)
        for client in CLIENTS:
            cpu_before = cpu_seconds(self.broker.pid)
            if client == "java":
                result = consume_with_java(self.tools, bootstrap, "consume-source", records)
            else:
                result = consume_with_librdkafka(bootstrap, "consume-source", partitions, records)
            cpu_used = cpu_seconds(self.broker.pid) - cpu_before
            self.results.add(consume_metric(client), self.broker.name, result.mb_per_s)
            self.results.add(
                consume_cpu_metric(client), self.broker.name, cpu_used / (result.bytes / 1e9)
            )

    def _latency(self, keep_samples: bool) -> None:
        create_topic(self.broker.bootstrap, "latency", 1)
        result = measure_end_to_end(
            self.broker.bootstrap,
            "latency",
            self.plan.latency_rate_per_s,
            self.plan.latency_seconds,
        )
        for label, fraction, target in (
            ("p50", 0.5, None),
            ("p99", 0.99, 0.5),
            ("p99.9", 0.999, None),
        ):
            self.results.add(
                latency_metric(label, target), self.broker.name, result.percentile(fraction)
            )
        if keep_samples:
            self.results.latency_samples_ms[self.broker.name] = result.samples_ms

    def _transactions(self) -> None:
        create_topic(self.broker.bootstrap, "transactions", 8)
        for per_transaction, total in (
            (100, self.plan.transaction_records_small),
            (10_000, self.plan.transaction_records_large),
        ):
            result = produce_in_transactions(
                self.broker.bootstrap, "transactions", per_transaction, total
            )
            name = self.broker.name
            self.results.add(transactional_produce_metric(per_transaction), name, result.mb_per_s)
            if per_transaction == 100:
                for label, fraction in (("p50", 0.5), ("p99", 0.99)):
                    value = result.commit_percentile(fraction)
                    self.results.add(commit_metric(label), name, value)

    def _rebalance(self) -> None:
        members, partitions = self.plan.rebalance_members, self.plan.rebalance_partitions
        create_topic(self.broker.bootstrap, "rebalance", partitions)
        for protocol, client_config in PROTOCOLS.items():
            result = measure_rebalances(
                self.broker.bootstrap,
                "rebalance",
                partitions,
                client_config,
                members,
                self.plan.rebalance_rounds,
            )
            for change, samples in (
                ("one member joins", result.join_s),
                ("one member leaves", result.leave_s),
            ):
                # The rounds start at evenly spread heartbeat phases: their mean, not their
                # median, estimates the time over a phase the change cannot choose.
                metric = rebalance_metric(protocol, change, members, partitions)
                self.results.add(metric, self.broker.name, statistics.fmean(samples))

    def _background_work(self) -> None:
        group = "Background work (produce 1 KiB acks=1 p8, librdkafka)"
        result = produce_with_and_without_background_work(
            self.broker,
            self.plan.background_produce_bytes,
            self.plan.background_compacted_bytes,
            repetitions=3,
        )
        for label, value in (
            ("MB/s, nothing to delete or clean", result.idle_mb_per_s),
            ("MB/s, retention deleting and the cleaner compacting", result.busy_mb_per_s),
        ):
            self.results.add(Metric(group, label, "MB/s", Better.HIGHER), self.broker.name, value)
        self.results.add(
            Metric(group, "busy / idle (target for krust: >= 0.95)", "x", Better.HIGHER),
            self.broker.name,
            result.busy_mb_per_s / result.idle_mb_per_s,
        )
        if not isinstance(self.broker, KrustBroker):
            return
        metrics = produce_with_metrics_on_and_off(
            self.broker, self.plan.background_produce_bytes, repetitions=3
        )
        for label, value in (
            ("MB/s, metrics endpoint off", metrics.off_mb_per_s),
            ("MB/s, metrics endpoint on, scraped every 1 s", metrics.on_mb_per_s),
            ("metrics on / off (target: >= 0.97)", metrics.on_mb_per_s / metrics.off_mb_per_s),
        ):
            unit = "MB/s" if label.startswith("MB/s") else "x"
            self.results.add(Metric(group, label, unit, Better.HIGHER), self.broker.name, value)

    def _authorization(self) -> None:
        """krust only: the ACL authorizer on (cached decisions) against authorization off."""
        if not isinstance(self.broker, KrustBroker):
            return
        group = "Authorization (krust; 1 KiB acks=1 p8, librdkafka)"
        result = produce_and_fetch_with_authorization_on_and_off(
            self.broker, self.plan.authorization_bytes, repetitions=3
        )
        for label, value in (
            ("produce MB/s, authorization off", result.off_produce_mb_per_s),
            ("produce MB/s, ACL authorizer on", result.on_produce_mb_per_s),
            (
                "produce on / off (target: >= 0.95)",
                result.on_produce_mb_per_s / result.off_produce_mb_per_s,
            ),
            ("fetch MB/s, authorization off", result.off_fetch_mb_per_s),
            ("fetch MB/s, ACL authorizer on", result.on_fetch_mb_per_s),
            (
                "fetch on / off (target: >= 0.95)",
                result.on_fetch_mb_per_s / result.off_fetch_mb_per_s,
            ),
        ):
            unit = "x" if "/" in label.split("(")[0] else "MB/s"
            self.results.add(Metric(group, label, unit, Better.HIGHER), self.broker.name, value)

    def _tls(self) -> None:
        group = "TLS (SSL listener, confluent-kafka, 1 KiB records, 8 partitions)"
        assert self.broker.settings.tls_ca is not None
        cpu_before = cpu_seconds(self.broker.pid)
        result = produce_and_consume_over_tls(
            self.broker.bootstrap,
            self.broker.tls_bootstrap,
            self.broker.settings.tls_ca,
            self.plan.consume_partitions,
            self.plan.tls_bytes,
        )
        cpu_used = cpu_seconds(self.broker.pid) - cpu_before
        for label, value, unit, better in (
            ("produce acks=1", result.produce_mb_per_s, "MB/s", Better.HIGHER),
            ("consume from start", result.consume_mb_per_s, "MB/s", Better.HIGHER),
            (
                "broker CPU per GB produced and consumed",
                cpu_used / (2 * result.consume_bytes / 1e9),
                "CPU s/GB",
                Better.LOWER,
            ),
        ):
            self.results.add(Metric(group, label, unit, better), self.broker.name, value)

    def _restart_empty(self) -> None:
        """Full-mode workloads start from an empty broker so earlier data does not count."""
        self.broker.stop()
        self.broker.reset()
        self.broker.start()

    def _loaded_start(self) -> None:
        self._restart_empty()
        loaded = loaded_restarts(
            self.broker, self.plan.loaded_start_partitions, self.plan.loaded_start_records
        )
        group = "Start-up with data"
        label = f"{loaded.partitions} partitions, {loaded.data_bytes / 2**20:,.0f} MiB"
        self.results.add(
            Metric(group, f"restart after kill -9, {label} written since start", "s", Better.LOWER),
            self.broker.name,
            loaded.recovery_after_kill_s,
        )
        self.results.add(
            Metric(group, f"clean restart, {label}", "s", Better.LOWER, 1 / 20),
            self.broker.name,
            loaded.clean_restart_s,
        )

    def _many_partitions(self) -> None:
        self._restart_empty()
        result = many_partitions(
            self.broker, self.plan.many_partitions, self.plan.many_partitions_records_each
        )
        group = f"{result.partitions:,} partitions"
        self.results.add(
            Metric(group, "create topic", "s", Better.LOWER), self.broker.name, result.create_s
        )
        self.results.add(
            Metric(group, "produce to all partitions", "MB/s", Better.HIGHER),
            self.broker.name,
            result.mb_per_s,
        )
        self.results.add(
            Metric(group, "RSS after create", "MiB", Better.LOWER),
            self.broker.name,
            result.rss_after_create / _MIB,
        )
        self.results.add(
            Metric(group, "peak RSS while producing", "MiB", Better.LOWER),
            self.broker.name,
            result.peak_rss / _MIB,
        )
