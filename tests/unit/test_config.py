"""Broker configuration: sources and their precedence, Kafka's parsing and resolution, errors."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from krust.config.broker import ConfigSource, core_settings, env_name, load_config
from krust.config.errors import ConfigError
from krust.config.listeners import Listener
from krust.config.properties import parse_properties
from krust.config.table import BROKER_KEYS

from .conftest import SOURCE_ROOT


@pytest.fixture(autouse=True)
def in_tmp_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def load(*overrides: str, env: dict[str, str] | None = None, file: Path | None = None):
    return load_config(file, env or {}, overrides)


def test_no_configuration_at_all_is_a_working_single_node(tmp_path: Path) -> None:
    config = load()
    assert config["node.id"] == 1
    assert config["process.roles"] == ["broker", "controller"]
    # Kafka's single-node config/server.properties: a client and a controller listener.
    assert config["listeners"] == [
        Listener("PLAINTEXT", "localhost", 9092),
        Listener("CONTROLLER", "localhost", 9093),
    ]
    assert config["controller.listener.names"] == ["CONTROLLER"]
    assert config["advertised.listeners"] == [Listener("PLAINTEXT", "localhost", 9092)]
    assert config["log.dirs"] == [str(tmp_path / "krust-data")]
    assert (tmp_path / "krust-data").is_dir()
    assert config["offsets.topic.replication.factor"] == 1
    assert config["num.partitions"] == 1
    assert config["message.max.bytes"] == 1048588
    assert config.source("num.partitions") is ConfigSource.DEFAULT


def test_every_key_has_a_doc_and_a_parseable_default() -> None:
    for key in BROKER_KEYS:
        assert key.doc.strip(), key.name
        key.parse(key.default)


def test_file_then_env_then_override_each_win(tmp_path: Path) -> None:
    file = tmp_path / "server.properties"
    file.write_text("num.partitions=2\nlog.segment.bytes=2097152\n")
    env = {"KRUST_NUM_PARTITIONS": "3"}
    assert load(file=file)["num.partitions"] == 2
    assert load(file=file, env=env)["num.partitions"] == 3
    config = load("num.partitions=4", file=file, env=env)
    assert config["num.partitions"] == 4
    assert config["log.segment.bytes"] == 2097152
    assert config.source("num.partitions") is ConfigSource.OVERRIDE
    assert config.source("log.segment.bytes") is ConfigSource.FILE


def test_env_names_are_upper_case_keys_with_underscores(tmp_path: Path) -> None:
    assert env_name("log.dirs") == "KRUST_LOG_DIRS"
    config = load(env={"KRUST_LOG_DIRS": f"{tmp_path}/a,{tmp_path}/b", "HOME": "/x"})
    assert config["log.dirs"] == [f"{tmp_path}/a", f"{tmp_path}/b"]
    assert config.source("log.dirs") is ConfigSource.ENV


def test_later_override_of_the_same_key_wins() -> None:
    assert load("num.partitions=2", "num.partitions=5")["num.partitions"] == 5


def test_properties_syntax_like_java() -> None:
    text = (
        "# a comment\n"
        "   ! another comment\n"
        "\n"
        "a=1\n"
        "b : 2\n"
        "c 3\n"
        "  d   =   padded  \n"
        "long = one, \\\n"
        "       two\n"
        "key\\=with\\:seps = x\\ty\\u0041\\z\n"
        "crlf=yes\r\n"
        "a=last wins\n"
        "tail = end\\"
    )
    assert parse_properties(text) == {
        "a": "last wins",
        "b": "2",
        "c": "3",
        "d": "padded  ",
        "long": "one, two",
        "key=with:seps": "x\tyAz",
        "crlf": "yes",
        "tail": "end",
    }


def test_comment_lines_do_not_continue_and_continuations_are_not_comments() -> None:
    assert parse_properties("# comment \\\na=1\nb=2\\\n# not a comment") == {
        "a": "1",
        "b": "2# not a comment",
    }


def test_a_file_sets_keys_with_kafka_syntax(tmp_path: Path) -> None:
    file = tmp_path / "server.properties"
    file.write_text(
        "node.id: 7\nlisteners = PLAINTEXT://127.0.0.1:19092,\\\n  INTERNAL://127.0.0.1:19093\n"
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT\n"
    )
    config = load(file=file)
    assert config["node.id"] == 7
    assert config["listeners"] == [
        Listener("PLAINTEXT", "127.0.0.1", 19092),
        Listener("INTERNAL", "127.0.0.1", 19093),
    ]


@pytest.mark.parametrize(
    ("overrides", "key", "fragment"),
    [
        (["no.such.key=1"], "--override", "no.such.key"),
        (["num.partitions=abc"], "num.partitions", "not a number of type INT"),
        (["num.partitions=0"], "num.partitions", "at least 1"),
        (["num.partitions=2147483648"], "num.partitions", "INT"),
        (["num.partitions=1_0"], "num.partitions", "INT"),
        (["delete.topic.enable=yes"], "delete.topic.enable", "true or false"),
        (["log.cleanup.policy=delete,shred"], "log.cleanup.policy", "shred"),
        (["log.message.timestamp.type=Now"], "log.message.timestamp.type", "CreateTime"),
        (["offsets.topic.replication.factor=40000"], "offsets.topic.replication.factor", ""),
        (["listeners=localhost:9092"], "listeners", "NAME://host:port"),
        (["listeners=PLAINTEXT://:99999"], "listeners", "NAME://host:port"),
        (["listeners=SSL://:9093"], "ssl.keystore.location", "SSL: set ssl.keystore.location"),
        (["listeners=FOO://:9093"], "listeners", "no security protocol"),
        (["advertised.listeners=OTHER://h:1"], "advertised.listeners", "not in listeners"),
        (["listeners=PLAINTEXT://0.0.0.0:9092"], "advertised.listeners", "not routable"),
        (["process.roles=controller"], "controller.quorum.voters", "voters"),
        (["process.roles=broker"], "controller.quorum.voters", "voters"),
        (["controller.quorum.voters=1@localhost"], "controller.quorum.voters", "id@host:port"),
        (["cluster.id=not-a-uuid"], "cluster.id", "uuid"),
        (["log.retention.ms=0"], "log.retention.ms", "-1"),
        (["log.roll.ms=0"], "log.roll.ms", "at least 1"),
        (["log.segment.bytes=1048575"], "log.segment.bytes", "at least 1048576"),
        (["log.index.size.max.bytes=8"], "log.index.size.max.bytes", "at least 12"),
        (["offsets.topic.segment.bytes=1000"], "offsets.topic.segment.bytes", "1048576"),
        (["num.partitions"], "--override", "key=value"),
    ],
)
def test_bad_values_name_the_key(overrides: list[str], key: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load(*overrides)
    assert caught.value.key == key
    assert fragment in str(caught.value)
    assert "\n" not in str(caught.value)


def test_unknown_key_in_a_file_names_the_file_and_the_key(tmp_path: Path) -> None:
    file = tmp_path / "server.properties"
    file.write_text("log.dirz=/tmp/x\n")
    with pytest.raises(ConfigError, match=r"log\.dirz") as caught:
        load(file=file)
    assert caught.value.key == str(file)


def test_non_config_krust_variables_are_left_alone() -> None:
    env = {"KRUST_LOG": "debug", "KRUST_TEST_TIMEOUT": "300", "KRUST_NUM_PARTITIONS": "2"}
    assert load(env=env)["num.partitions"] == 2


def test_unknown_krust_variable_is_an_error() -> None:
    with pytest.raises(ConfigError) as caught:
        load(env={"KRUST_NUM_PARTITION": "3"})
    assert caught.value.key == "KRUST_NUM_PARTITION"


def test_unusable_log_dir_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    with pytest.raises(ConfigError, match="not usable") as caught:
        load(f"log.dirs={tmp_path}/a-file/sub")
    assert caught.value.key == "log.dirs"


def test_log_dir_is_used_when_log_dirs_is_unset(tmp_path: Path) -> None:
    assert load("log.dir=single")["log.dirs"] == [str(tmp_path / "single")]
    assert load("log.dir=single", "log.dirs=a,b")["log.dirs"] == [
        str(tmp_path / "a"),
        str(tmp_path / "b"),
    ]


def test_log_roll_and_retention_resolve_like_kafka() -> None:
    assert load()["log.roll.ms"] == 168 * 3_600_000
    assert load("log.roll.hours=2")["log.roll.ms"] == 7_200_000
    assert load("log.roll.hours=2", "log.roll.ms=5")["log.roll.ms"] == 5
    assert load()["log.retention.ms"] == 168 * 3_600_000
    assert load("log.retention.hours=1")["log.retention.ms"] == 3_600_000
    assert load("log.retention.hours=1", "log.retention.minutes=2")["log.retention.ms"] == 120_000
    assert load("log.retention.minutes=2", "log.retention.ms=7")["log.retention.ms"] == 7
    assert load("log.retention.ms=-5")["log.retention.ms"] == -1
    assert load("log.retention.hours=-1")["log.retention.ms"] == -1
    assert load()["log.flush.interval.ms"] == 2**63 - 1
    assert load("log.flush.scheduler.interval.ms=10")["log.flush.interval.ms"] == 10


def test_empty_listener_host_is_advertised_as_this_host() -> None:
    config = load("listeners=PLAINTEXT://:9092")
    assert config["listeners"] == [Listener("PLAINTEXT", "", 9092)]
    assert config["advertised.listeners"][0].host not in ("", "0.0.0.0")


def test_core_settings_are_kafka_strings_with_parsed_listeners_and_absolute_dirs(
    tmp_path: Path,
) -> None:
    settings = core_settings(
        load("listeners=PLAINTEXT://127.0.0.1:19092", "advertised.listeners=PLAINTEXT://h:1")
    )
    assert settings["listeners"] == [("PLAINTEXT", "127.0.0.1", 19092)]
    assert settings["advertised.listeners"] == [("PLAINTEXT", "h", 1)]
    assert settings["log.dirs"] == str(tmp_path / "krust-data")
    assert settings["log.roll.ms"] == "604800000"
    assert settings["auto.create.topics.enable"] == "true"
    assert settings["node.id"] == "1"
    assert "krust.metrics.port" not in settings  # unset: the core's None


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("KRUST_")}
    environment["PYTHONPATH"] = str(SOURCE_ROOT)
    environment.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "krust.runtime.cli", *args],
        capture_output=True,
        text=True,
        env=environment,
        timeout=30,
    )


@pytest.mark.parametrize(
    ("args", "env", "named"),
    [
        (["--override", "num.partitions=abc"], {}, "num.partitions"),
        (["--override", "bogus.key=1"], {}, "bogus.key"),
        ([], {"KRUST_SOCKET_REQUEST_MAX_BYTES": "0"}, "socket.request.max.bytes"),
        (["--config", "missing.properties"], {}, "missing.properties"),
    ],
)
def test_cli_config_error_is_one_line_and_exit_2(
    args: list[str], env: dict[str, str], named: str
) -> None:
    result = cli(*args, env=env)
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("krust-broker: configuration error:")
    assert named in lines[0]


def test_cli_help_documents_flags_and_environment() -> None:
    result = cli("--help")
    assert result.returncode == 0
    for text in ("--config", "--override", "--version", "KRUST_LOG_DIRS", "log.dirs"):
        assert text in result.stdout


def test_cli_version() -> None:
    result = cli("--version")
    assert result.returncode == 0
    assert result.stdout.startswith("krust-broker ")
