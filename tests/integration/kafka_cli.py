"""Kafka's command-line tools (the Maven kafka-tools and kafka_2.13 jars in
tests/java/build/tools-libs), run by their main classes as kafka-features.sh, kafka-configs.sh,
... would, in a long-lived JVM (java_server.py): the one place tests start a Kafka tool."""

from __future__ import annotations

import subprocess

from .clients.java import JAVA_DIR
from .java_server import MainRun as ToolRun
from .java_server import run_main

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
# Tools that keep state of one run inside the JVM, so a second run in the same JVM hangs: each
# run gets a JVM of its own. MetadataShell's second run never finishes loading its snapshot.
OWN_JVM_TOOLS = frozenset({"org.apache.kafka.shell.MetadataShell"})


def run_java_tool(main_class: str, *args: str) -> ToolRun:
    """Run a tool; its exit code and output, not checked."""
    if main_class not in OWN_JVM_TOOLS:
        return run_main(TOOLS_CLASSPATH, main_class, *args, timeout_s=TOOL_TIMEOUT_S)
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
