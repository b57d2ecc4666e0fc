"""Kafka's command-line tools (the Maven kafka-tools jars in tests/java/build/tools-libs), run
against krust with `java -cp` as kafka-features.sh, kafka-consumer-groups.sh, ... would."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass

from .clients.java import JAVA_DIR

TOOLS_CLASSPATH = str(JAVA_DIR / "build" / "tools-libs" / "*")
FEATURE_COMMAND = "org.apache.kafka.tools.FeatureCommand"
CONSUMER_GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
TOOL_TIMEOUT_S = 120


@dataclass(frozen=True)
class ToolRun:
    returncode: int
    stdout: str
    stderr: str


def run_tool(main_class: str, bootstrap: str, *args: str) -> ToolRun:
    """Run a tool with --bootstrap-server `bootstrap`; its exit code and output, not checked."""
    command = [
        "java",
        "-XX:TieredStopAtLevel=1",
        "-cp",
        TOOLS_CLASSPATH,
        main_class,
        "--bootstrap-server",
        bootstrap,
        *args,
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=TOOL_TIMEOUT_S)
    return ToolRun(done.returncode, done.stdout, done.stderr)
