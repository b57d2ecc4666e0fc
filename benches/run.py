"""Benchmark krust against Apache Kafka on this machine: `python benches/run.py [--quick]`.

Brokers run one at a time, alternating (Kafka, krust, Kafka, krust, ...), each session on a
fresh data directory; the report gives medians over the repetitions and krust/Kafka ratios.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import shutil
import subprocess
import sys
import time
from pathlib import Path

BENCHES = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCHES))
# The cluster launcher (integration.cluster) is the integration tests' own.
sys.path.append(str(BENCHES.parent / "tests"))

from brokers import (  # noqa: E402
    KAFKA_JVM_OPTS,
    BrokerSettings,
    KafkaBroker,
    KrustBroker,
    krust_executable,
)
from cluster_session import ClusterSession  # noqa: E402
from integration.cluster import ApacheKafkaCluster, KrustCluster, free_port  # noqa: E402
from plan import CLUSTER, FULL, QUICK, SPARK, STARTUP, WORKLOADS, Plan  # noqa: E402
from report import (  # noqa: E402
    Results,
    latency_cdf_plot,
    machine_description,
    markdown,
    throughput_plot,
)
from session import Session  # noqa: E402
from workloads.ceiling import loopback_tcp_mb_per_s, page_cache_write_mb_per_s  # noqa: E402
from workloads.java_tools import JavaTools  # noqa: E402
from workloads.tls import make_certificates  # noqa: E402


def fetch_kafka_jars(work_dir: Path) -> Path:
    """Apache Kafka's jars via Maven (benches/pom.xml pins the version)."""
    libs = work_dir / "kafka-libs"
    if not any(libs.glob("kafka_2.13-*.jar")):
        subprocess.run(
            [
                "mvn",
                "-q",
                "-f",
                str(BENCHES / "pom.xml"),
                "dependency:copy-dependencies",
                f"-DoutputDirectory={libs}",
                "-DincludeScope=runtime",
            ],
            check=True,
        )
    return libs


def kafka_version(libs: Path) -> str:
    jar = next(libs.glob("kafka_2.13-*.jar"))
    return jar.stem.removeprefix("kafka_2.13-")


def command_output(command: list[str]) -> str:
    done = subprocess.run(command, capture_output=True, text=True)
    return (done.stdout + done.stderr).strip().splitlines()[0]


def measure_ceilings(plan: Plan, data_root: Path, results: Results) -> None:
    results.ceilings.setdefault("loopback TCP, plain socket sink", []).append(
        loopback_tcp_mb_per_s(plan.ceiling_bytes)
    )
    results.ceilings.setdefault("sequential page-cache write, data disk", []).append(
        page_cache_write_mb_per_s(data_root, plan.ceiling_bytes)
    )


def write_report(
    results: Results, plan: Plan, header: dict[str, str], out_dir: Path, stem: str
) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    plots = [
        plot
        for plot in (
            throughput_plot(results, "Produce throughput", out_dir / f"{stem}-produce.png"),
            throughput_plot(results, "Consume throughput", out_dir / f"{stem}-consume.png"),
            latency_cdf_plot(results, out_dir / f"{stem}-latency-cdf.png"),
        )
        if plot is not None
    ]
    table = out_dir / f"{stem}.md"
    table.write_text(markdown(results, header, plots))
    return table


def report_stem(today: str, plan: Plan, args: argparse.Namespace) -> str:
    """`<date>-<mode>`, then the workloads when a subset ran; never an earlier run's name."""
    stem = f"{today}-{plan.name}"
    if set(plan.workloads) != set(WORKLOADS):
        stem += "-" + "-".join(plan.workloads)
    taken = {path.stem for path in args.results_dir.glob(f"{stem}*.md")}
    suffix = 2
    unique = stem
    while unique in taken:
        unique, suffix = f"{stem}-{suffix}", suffix + 1
    return unique


def run_broker_sessions(
    plan: Plan, args: argparse.Namespace, settings: BrokerSettings, results: Results
) -> dict[str, str]:
    """Kafka and krust sessions, alternating; returns the report header's version lines."""
    libs = fetch_kafka_jars(args.work_dir)
    log4j = settings.data_root / "tools-log4j2.properties"
    log4j.write_text("rootLogger.level = ERROR\n")
    tools = JavaTools(libs, log4j)
    brokers = [
        KafkaBroker(settings, libs_dir=libs),
        KrustBroker(
            settings,
            executable=krust_executable(),
            metrics_port=free_port() if args.krust_metrics else None,
        ),
    ]
    started = time.monotonic()
    for repetition in range(plan.repetitions):
        measure_ceilings(plan, settings.data_root, results)
        for broker in brokers:
            print(
                f"[{time.monotonic() - started:6.0f}s] repetition {repetition + 1}/"
                f"{plan.repetitions}: {broker.name}",
                flush=True,
            )
            Session(broker, tools, plan, results).run(
                last_repetition=repetition == plan.repetitions - 1
            )

    import confluent_kafka

    return {
        "Apache Kafka": f"{kafka_version(libs)} (KRaft combined mode, -Xmx1g)",
        "confluent-kafka": f"{confluent_kafka.version()} "
        f"(librdkafka {confluent_kafka.libversion()[0]})",
    }


def run_cluster_sessions(
    plan: Plan, args: argparse.Namespace, settings: BrokerSettings, results: Results
) -> dict[str, str]:
    """Three-node Kafka and krust clusters, alternating, each fresh; its header lines."""
    libs = fetch_kafka_jars(args.work_dir)
    properties = {"log.segment.bytes": str(settings.segment_bytes)}
    started = time.monotonic()
    for repetition in range(plan.repetitions):
        for kind in ("kafka", "krust"):
            print(
                f"[{time.monotonic() - started:6.0f}s] cluster repetition {repetition + 1}/"
                f"{plan.repetitions}: {kind}",
                flush=True,
            )
            root = settings.data_root / f"cluster-{kind}-{repetition}"
            cluster = (
                ApacheKafkaCluster(
                    root, properties=properties, libs=libs, jvm_options=KAFKA_JVM_OPTS
                )
                if kind == "kafka"
                else KrustCluster(root, properties=properties, executable=krust_executable())
            )
            ClusterSession(cluster, plan, results).run()
            shutil.rmtree(root, ignore_errors=True)
    return {"clusters": "3 combined broker+controller nodes per kind, same server.properties"}


def run_spark_session(
    plan: Plan, args: argparse.Namespace, settings: BrokerSettings, results: Results
) -> dict[str, str]:
    """The Spark workload against one krust broker (no Kafka broker); its header lines."""
    # pyspark is only needed, and only imported, when the Spark workload runs.
    import pyspark
    from spark_session import SparkSessionRun
    from workloads.spark import connector_jars

    broker = KrustBroker(
        settings,
        executable=krust_executable(),
        metrics_port=free_port() if args.krust_metrics else None,
    )
    print(f"spark: {plan.spark_records:,} records, {plan.repetitions} repetitions", flush=True)
    try:
        SparkSessionRun(broker, plan, results).run()
    except Exception as error:
        results.failures.append(f"spark: {type(error).__name__}: {error}"[:400])
    connector = next(jar for jar in connector_jars() if jar.name.startswith("spark-sql-kafka"))
    return {
        "pyspark": f"{pyspark.__version__} (local[2]); Spark's Kafka connector: {connector.stem}",
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="small subset, 2 repetitions, under ~10 minutes"
    )
    parser.add_argument(
        "--work-dir",
        type=Path,
        default=BENCHES / "work",
        help="jars and broker data (git-ignored); default benches/work",
    )
    parser.add_argument("--results-dir", type=Path, default=BENCHES / "results")
    parser.add_argument(
        "--workloads",
        default=",".join(WORKLOADS),
        help=f"comma-separated subset of {','.join(WORKLOADS)} (start-up always runs), "
        f"or {SPARK}: format('krust') against Spark's Kafka connector, on krust only, "
        f"or {CLUSTER}: three-node clusters of each kind (RF=3, acks=all, failover), "
        f"or {STARTUP}: the start-up and idle RSS rows alone",
    )
    parser.add_argument("--repetitions", type=int, help="override the mode's repetitions")
    parser.add_argument(
        "--krust-metrics",
        action="store_true",
        help="run krust with its Prometheus endpoint on (compare with a run without)",
    )
    args = parser.parse_args()
    plan = QUICK if args.quick else FULL
    chosen = tuple(name.strip() for name in args.workloads.split(",") if name.strip())
    choices = [*WORKLOADS, SPARK, CLUSTER, STARTUP]
    unknown = sorted(set(chosen) - set(choices))
    if unknown:
        parser.error(f"unknown workloads {unknown}; choose from {choices}")
    plan = dataclasses.replace(
        plan, workloads=chosen, repetitions=args.repetitions or plan.repetitions
    )

    data_root = args.work_dir / "data"
    shutil.rmtree(data_root, ignore_errors=True)
    data_root.mkdir(parents=True)
    settings = BrokerSettings(data_root=data_root, segment_bytes=plan.segment_bytes)
    if "tls" in chosen:
        tls = make_certificates(args.work_dir / "tls")
        settings = dataclasses.replace(settings, tls_keystore=tls.keystore, tls_ca=tls.ca)
    results = Results()
    started = time.monotonic()
    versions: dict[str, str] = {}
    if set(chosen) - {SPARK, CLUSTER}:
        versions |= run_broker_sessions(plan, args, settings, results)
    if CLUSTER in chosen:
        versions |= run_cluster_sessions(plan, args, settings, results)
    if SPARK in chosen:
        versions |= run_spark_session(plan, args, settings, results)

    today = datetime.date.today().isoformat()
    header = {
        "date": today,
        "mode": f"{plan.name} ({plan.repetitions} repetitions, "
        + ("brokers alternating)" if set(chosen) - {SPARK} else "formats alternating)"),
        "workloads": ", ".join(plan.workloads),
        "machine": machine_description(),
        "krust": command_output([str(krust_executable()), "--version"])
        + " (release build"
        + (", metrics endpoint on)" if args.krust_metrics else ")"),
        "Java": command_output(["java", "-version"]),
        **versions,
        "wall time": f"{time.monotonic() - started:.0f} s",
    }
    table = write_report(results, plan, header, args.results_dir, report_stem(today, plan, args))
    print(table.read_text())
    print(f"written: {table}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
