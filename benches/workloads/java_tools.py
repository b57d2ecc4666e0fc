"""Running Apache Kafka's own load generators (kafka-tools) from the fetched jars."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

# kafka-run-class.sh gives tools a 256 MiB heap; ProducerPerformance's buffers want a bit more.
TOOL_JVM_OPTS = ["-Xmx512m", "-XX:+UseG1GC", "-Djava.awt.headless=true"]


@dataclass(frozen=True)
class JavaTools:
    libs_dir: Path
    log4j_config: Path

    def run(self, main_class: str, args: list[str], timeout_s: float) -> str:
        """Run one tool to completion and return its standard output."""
        command = [
            "java",
            *TOOL_JVM_OPTS,
            f"-Dlog4j2.configurationFile={self.log4j_config}",
            "-cp",
            str(self.libs_dir / "*"),
            main_class,
            *args,
        ]
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
        if done.returncode != 0:
            raise RuntimeError(f"{main_class} failed ({done.returncode}): {done.stderr[-1500:]}")
        return done.stdout
