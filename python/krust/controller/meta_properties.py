"""Formatting log directories: `meta.properties`, as `kafka-storage format` writes it, and
Kafka's uuids (cluster, directory and incarnation ids)."""

from __future__ import annotations

import base64
import datetime
import os
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from krust.config.errors import ConfigError
from krust.config.properties import PropertiesError, parse_properties

META_PROPERTIES = "meta.properties"
_RESERVED_UUIDS = (uuid.UUID(int=0), uuid.UUID(int=1))


def kafka_uuid_string(value: uuid.UUID) -> str:
    """Kafka's Uuid.toString: url-safe base64 of the 16 bytes, no padding."""
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode()


def parse_kafka_uuid(text: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=="))


def random_kafka_uuid() -> uuid.UUID:
    """Kafka's Uuid.randomUuid: never 0 or 1, never a string starting with '-' (it would look
    like a command line flag)."""
    while True:
        candidate = uuid.uuid4()
        if candidate not in _RESERVED_UUIDS and not kafka_uuid_string(candidate).startswith("-"):
            return candidate


@dataclass(frozen=True)
class MetaProperties:
    """A formatted log directory's identity (meta.properties version 1, KRaft)."""

    cluster_id: str
    node_id: int
    directory_id: str

    @staticmethod
    def read(path: Path) -> MetaProperties:
        where = str(path)
        try:
            entries = parse_properties(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, PropertiesError) as error:
            raise ConfigError("log.dirs", f"cannot read {where}: {error}") from None
        if entries.get("version") != "1":
            raise ConfigError(
                "log.dirs", f"{where} has version {entries.get('version')}, krust reads version 1"
            )
        try:
            return MetaProperties(
                cluster_id=entries["cluster.id"],
                node_id=int(entries["node.id"]),
                directory_id=entries.get("directory.id", ""),
            )
        except (KeyError, ValueError) as error:
            raise ConfigError("log.dirs", f"{where} lacks a valid {error}") from None

    def write(self, path: Path) -> None:
        """Write atomically: a temporary file, fsync, rename, fsync the directory."""
        stamp = datetime.datetime.now(datetime.UTC).strftime("%a %b %d %H:%M:%S UTC %Y")
        text = (
            f"#\n#{stamp}\ncluster.id={self.cluster_id}\ndirectory.id={self.directory_id}\n"
            f"node.id={self.node_id}\nversion=1\n"
        )
        temporary = path.with_name(path.name + ".tmp")
        with open(temporary, "w", encoding="utf-8") as file:
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
        directory = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)


def format_log_dirs(
    log_dirs: Sequence[str], node_id: int, cluster_id: str | None, shared: bool = False
) -> str:
    """Check the meta.properties of every log dir, write the missing ones; the cluster id.

    All formatted dirs must agree on cluster id and node id (as Kafka checks on start-up);
    `cluster_id` (the cluster.id config) only chooses the id of a cluster being created. A
    node of a `shared` quorum (several voters) needs it, as `kafka-storage format -t` does:
    every node must be formatted with the same one."""
    existing = {
        directory: MetaProperties.read(Path(directory, META_PROPERTIES))
        for directory in log_dirs
        if Path(directory, META_PROPERTIES).exists()
    }
    for directory, meta in existing.items():
        if meta.node_id != node_id:
            raise ConfigError(
                "node.id",
                f"{node_id} does not match node.id={meta.node_id} in {directory}/{META_PROPERTIES}",
            )
    cluster_ids = {meta.cluster_id for meta in existing.values()}
    if len(cluster_ids) > 1:
        raise ConfigError("log.dirs", f"the directories belong to different clusters {cluster_ids}")
    if cluster_ids:
        stored = cluster_ids.pop()
        if cluster_id is not None and cluster_id != stored:
            raise ConfigError("cluster.id", f"{cluster_id} differs from {stored} in log.dirs")
        cluster_id = stored
    elif cluster_id is None and shared:
        raise ConfigError(
            "cluster.id",
            "must be set to the same id on every node of a quorum of several voters before "
            f"their first start (e.g. {kafka_uuid_string(random_kafka_uuid())})",
        )
    elif cluster_id is None:
        cluster_id = kafka_uuid_string(random_kafka_uuid())
    for directory in log_dirs:
        if directory not in existing:
            meta = MetaProperties(cluster_id, node_id, kafka_uuid_string(random_kafka_uuid()))
            try:
                meta.write(Path(directory, META_PROPERTIES))
            except OSError as error:
                raise ConfigError("log.dirs", f"cannot format {directory}: {error}") from None
    return cluster_id


def format_node(config: Mapping[str, Any]) -> str:
    """`format_log_dirs` with the broker's config (after the core locked the dirs); the
    cluster id."""
    return format_log_dirs(
        config["log.dirs"],
        config["node.id"],
        config["cluster.id"],
        shared=bool(config["controller.quorum.voters"]),
    )
