"""Kafka's command-line tools (the Maven kafka-tools and kafka_2.13 jars in
tests/java/build/tools-libs), run with `java -cp` as kafka-features.sh, kafka-configs.sh, ...
would: the one place tests start a Kafka tool."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass

from .clients.java import JAVA_DIR

TOOLS_CLASSPATH = str(JAVA_DIR / "build" / "tools-libs" / "*")
FEATURE_COMMAND = "org.apache.kafka.tools.FeatureCommand"
CONSUMER_GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
CONFIG_COMMAND = "kafka.admin.ConfigCommand"
TOPIC_COMMAND = "org.apache.kafka.tools.TopicCommand"
DUMP_LOG_SEGMENTS = "org.apache.kafka.tools.DumpLogSegments"
METADATA_QUORUM_COMMAND = "org.apache.kafka.tools.MetadataQuorumCommand"
REASSIGN_PARTITIONS_COMMAND = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
LEADER_ELECTION_COMMAND = "org.apache.kafka.tools.LeaderElectionCommand"
TOOL_TIMEOUT_S = 120


@dataclass(frozen=True)
class ToolRun:
    returncode: int
    stdout: str
    stderr: str


def run_java_tool(main_class: str, *args: str) -> ToolRun:
    """Run a tool; its exit code and output, not checked."""
    command = ["java", "-XX:TieredStopAtLevel=1", "-cp", TOOLS_CLASSPATH, main_class, *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=TOOL_TIMEOUT_S)
    return ToolRun(done.returncode, done.stdout, done.stderr)


def run_tool(main_class: str, bootstrap: str, *args: str) -> ToolRun:
    """Run a tool with --bootstrap-server `bootstrap`; its exit code and output, not checked."""
    return run_java_tool(main_class, "--bootstrap-server", bootstrap, *args)


def tool_output(main_class: str, *args: str) -> str:
    """Run a tool that must succeed; its standard output."""
    done = run_java_tool(main_class, *args)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout
