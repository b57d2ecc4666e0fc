"""Listeners with TLS and SASL (docs/security.md), driven by real clients and raw sockets: one
broker with PLAINTEXT, SSL (client certificates required), SASL_SSL and SASL_PLAINTEXT
listeners at once."""

from __future__ import annotations

import json
import os
import socket
import ssl
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaPythonPartition

from . import wire
from .broker_process import HOST, BrokerProcess, free_port
from .clients.confluent import create_topic
from .kafka_cli import CONFIG_COMMAND, TOPIC_COMMAND, run_tool
from .tls_certs import CertificateAuthority, Pem

PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'user_alice="alice-secret" user_bob="bob-secret";'
)
API_SASL_HANDSHAKE = 17
API_SASL_AUTHENTICATE = 36
ILLEGAL_SASL_STATE = 34
UNSUPPORTED_SASL_MECHANISM = 33
SASL_AUTHENTICATION_FAILED = 58
# A PLAIN server callback a user would write (a module on the broker's PYTHONPATH).
PLAIN_CALLBACK = """
import time


class Callback:
    def configure(self, configs):
        self.passwords = {"dave": "dave-secret"}

    def authenticate(self, username, password):
        if username == "raiser":
            raise RuntimeError("the user directory is down")
        if username == "sleeper":
            time.sleep(7)
        return self.passwords.get(username) == password
"""


class SecureBroker:
    """A broker with every security protocol on its own port, and the certificates to use."""

    def __init__(self, workdir: Path) -> None:
        certs = workdir / "certs"
        certs.mkdir(parents=True)
        self.ca = CertificateAuthority(certs)
        self.client_alice: Pem = self.ca.client("alice")
        keystore = self.ca.server().keystore(certs / "keystore.pem")
        self.ports = {
            name: free_port() for name in ("SSL", "SASL_SSL", "SASL_PLAINTEXT", "CALLBACK")
        }
        plugins = workdir / "plugins"
        plugins.mkdir()
        (plugins / "plain_callback.py").write_text(PLAIN_CALLBACK)
        python_path = os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"), str(plugins)]))
        self.process = BrokerProcess(
            workdir,
            {
                "ssl.keystore.location": str(keystore),
                "ssl.truststore.location": str(self.ca.pem.cert),
                "listener.name.ssl.ssl.client.auth": "required",
                "listener.name.ssl.ssl.principal.mapping.rules": (
                    "RULE:^CN=([^,]*),OU=Tools,.*$/$1/L,DEFAULT"
                ),
                # A client certificate is optional there: librdkafka below sends none.
                "listener.name.sasl_ssl.ssl.client.auth": "requested",
                "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
                "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
                "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,"
                "SASL_SSL:SASL_SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,CALLBACK:SASL_PLAINTEXT",
                "listener.name.callback.sasl.enabled.mechanisms": "PLAIN",
                "listener.name.callback.plain.sasl.server.callback.handler.class": (
                    "plain_callback:Callback"
                ),
                "krust.log.format": "json",
                "krust.log.level": "info,kafka.request.logger=debug",
                # The consumer groups form at once: no initial rebalance delay.
                "group.initial.rebalance.delay.ms": "0",
            },
            env={"PYTHONPATH": python_path},
        )
        self.process.overrides["listeners"] = ",".join(
            [f"PLAINTEXT://{HOST}:{self.process.port}"]
            + [f"{name}://{HOST}:{port}" for name, port in self.ports.items()]
        )

    def bootstrap(self, listener: str) -> str:
        port = self.process.port if listener == "PLAINTEXT" else self.ports[listener]
        return f"{HOST}:{port}"

    def client_config(self, listener: str, **extra: Any) -> dict[str, Any]:
        """librdkafka settings for `listener` (TLS trusting the test CA)."""
        config: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap(listener),
            "security.protocol": listener,
        }
        if "SSL" in listener:
            config["ssl.ca.location"] = str(self.ca.pem.cert)
        config.update(extra)
        return config

    def log_lines(self) -> list[dict[str, Any]]:
        return [
            json.loads(line)
            for line in self.process.stderr_text().splitlines()
            if line.startswith("{")
        ]

    def principals(self, listener: str) -> set[str]:
        """The principals the request log shows for requests on `listener`."""
        return {
            line["principal"]
            for line in self.log_lines()
            if line.get("target") == "kafka.request.logger" and line.get("listener") == listener
        }


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    broker = SecureBroker(tmp_path_factory.mktemp("secure"))
    broker.process.start()
    try:
        yield broker
        crash = broker.process.unexpected_exit()
        if crash:
            pytest.fail(crash)
    finally:
        broker.process.kill9()


def round_trip(config: dict[str, Any], topic: str, values: list[bytes]) -> list[bytes]:
    """Produce `values` and read them back with confluent-kafka over `config`."""
    producer = Producer({**config, "acks": "all", "message.timeout.ms": 20_000})
    for value in values:
        producer.produce(topic, value=value, partition=0)
    assert producer.flush(30) == 0, "records left undelivered"
    consumer = Consumer({**config, "group.id": "unused", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    try:
        while len(got) < len(values):
            message = consumer.poll(20)
            assert message is not None, f"only {len(got)} of {len(values)} records came back"
            assert message.error() is None, message.error()
            got.append(message.value())
    finally:
        consumer.close()
    return got


def fresh_topic(secure: SecureBroker) -> str:
    topic = f"secure-{uuid.uuid4().hex[:8]}"
    create_topic(secure.bootstrap("PLAINTEXT"), topic)
    return topic


def test_confluent_kafka_produces_and_consumes_over_sasl_ssl_plain(secure: SecureBroker) -> None:
    topic = fresh_topic(secure)
    config = secure.client_config(
        "SASL_SSL",
        **{"sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": "alice-secret"},
    )
    values = [f"v{i}".encode() * 100 for i in range(50)]
    assert round_trip(config, topic, values) == values
    assert secure.principals("SASL_SSL") == {"User:alice"}
    assert secure.principals("PLAINTEXT") == {"User:ANONYMOUS"}


def test_mtls_principal_and_required_client_certificates(secure: SecureBroker) -> None:
    topic = fresh_topic(secure)
    with_cert = secure.client_config(
        "SSL",
        **{
            "ssl.certificate.location": str(secure.client_alice.cert),
            "ssl.key.location": str(secure.client_alice.key),
        },
    )
    assert round_trip(with_cert, topic, [b"mtls"]) == [b"mtls"]
    assert secure.principals("SSL") == {"User:CN=alice,OU=Eng,O=Acme,C=US"}
    # ssl.client.auth=required: a client without a certificate cannot connect.
    no_cert = AdminClient(secure.client_config("SSL"))
    with pytest.raises(KafkaException):
        no_cert.list_topics(timeout=5)


def test_the_java_client_authenticates_with_a_pem_client_certificate(
    secure: SecureBroker, tmp_path: Path
) -> None:
    java = secure.ca.client("java-client", unit="Tools")
    properties = tmp_path / "client.properties"
    properties.write_text(
        "security.protocol=SSL\n"
        "ssl.keystore.type=PEM\n"
        f"ssl.keystore.location={java.keystore(tmp_path / 'java-keystore.pem')}\n"
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={secure.ca.pem.cert}\n"
    )
    common = ("--command-config", str(properties))
    created = run_tool(
        TOPIC_COMMAND, secure.bootstrap("SSL"), *common, "--create", "--topic", "java-mtls"
    )
    assert created.returncode == 0, created.stdout + created.stderr
    listed = run_tool(TOPIC_COMMAND, secure.bootstrap("SSL"), *common, "--list")
    assert "java-mtls" in listed.stdout.split()
    # The listener's mapping rule turns the Tools unit's subjects into short names.
    assert "User:java-client" in secure.principals("SSL")


def test_a_consumer_group_over_sasl_ssl_commits_through_the_coordinator_on_its_listener(
    secure: SecureBroker,
) -> None:
    topic = fresh_topic(secure)
    config = secure.client_config(
        "SASL_SSL",
        **{"sasl.mechanism": "PLAIN", "sasl.username": "bob", "sasl.password": "bob-secret"},
    )
    assert round_trip(config, topic, [b"grouped"]) == [b"grouped"]
    consumer = Consumer({**config, "group.id": "tls-group", "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        message = consumer.poll(30)
        assert message is not None and message.error() is None
        # FindCoordinator answers the SASL_SSL address: the commit reaches the coordinator.
        committed = consumer.commit(message=message, asynchronous=False)
        assert committed is not None and committed[0].offset == 1
    finally:
        consumer.close()


def test_a_wrong_password_is_refused_and_logged_once(secure: SecureBroker) -> None:
    before = len(secure.log_lines())
    errors: list[str] = []
    wrong = AdminClient(
        secure.client_config(
            "SASL_PLAINTEXT",
            **{
                "sasl.mechanism": "PLAIN",
                "sasl.username": "alice",
                "sasl.password": "nope",
                "reconnect.backoff.ms": 5_000,
                "error_cb": lambda error: errors.append(str(error)),
            },
        )
    )
    with pytest.raises(KafkaException):
        wrong.list_topics(timeout=3)
    wrong.poll(1)  # serves error_cb
    assert any("Authentication failed: Invalid username or password" in e for e in errors), errors
    failures = [
        line
        for line in secure.log_lines()[before:]
        if "authentication failed (PLAIN)" in line.get("message", "")
    ]
    assert len(failures) >= 1
    right = AdminClient(
        secure.client_config(
            "SASL_PLAINTEXT",
            **{"sasl.mechanism": "PLAIN", "sasl.username": "bob", "sasl.password": "bob-secret"},
        )
    )
    assert right.list_topics(timeout=10).brokers


def test_kcat_lists_produces_and_consumes_over_ssl(secure: SecureBroker, tmp_path: Path) -> None:
    topic = fresh_topic(secure)
    tls = [
        "-X", "security.protocol=SSL",
        "-X", f"ssl.ca.location={secure.ca.pem.cert}",
        "-X", f"ssl.certificate.location={secure.client_alice.cert}",
        "-X", f"ssl.key.location={secure.client_alice.key}",
    ]  # fmt: skip
    broker = ["-b", secure.bootstrap("SSL")]
    subprocess.run(
        ["kcat", *broker, *tls, "-P", "-t", topic, "-p", "0"],
        input=b"one\ntwo\n", check=True, timeout=60,
    )  # fmt: skip
    consumed = subprocess.run(
        ["kcat", *broker, *tls, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-q"],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    assert consumed.stdout.split() == [b"one", b"two"]


def kafka_python_round_trip(
    secure: SecureBroker, topic: str, user: str, password: str, values: list[bytes]
) -> list[bytes]:
    """Produce and read back `values` with kafka-python over SASL_SSL with SCRAM-SHA-512."""
    security: dict[str, Any] = {
        "bootstrap_servers": secure.bootstrap("SASL_SSL"),
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": user,
        "sasl_plain_password": password,
        "ssl_cafile": str(secure.ca.pem.cert),
    }
    producer = KafkaProducer(**security, acks="all")
    for value in values:
        producer.send(topic, value=value, partition=0).get(timeout=30)
    producer.close()
    consumer = KafkaConsumer(**security, enable_auto_commit=False, consumer_timeout_ms=20_000)
    partition = KafkaPythonPartition(topic, 0)
    consumer.assign([partition])
    consumer.seek_to_beginning(partition)
    got = [message.value for _, message in zip(values, consumer, strict=False)]
    consumer.close()
    return got


def test_kafka_configs_adds_a_scram_user_who_then_produces_and_consumes(
    secure: SecureBroker,
) -> None:
    topic = fresh_topic(secure)
    altered = run_tool(
        CONFIG_COMMAND,
        secure.bootstrap("PLAINTEXT"),
        "--alter",
        "--add-config",
        "SCRAM-SHA-512=[iterations=8192,password=carol-secret]",
        "--entity-type",
        "users",
        "--entity-name",
        "carol",
    )
    assert altered.returncode == 0, altered.stdout + altered.stderr
    scram = secure.client_config(
        "SASL_SSL",
        **{
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "carol",
            "sasl.password": "carol-secret",
        },
    )
    assert round_trip(scram, topic, [b"confluent"]) == [b"confluent"]
    other_topic = fresh_topic(secure)
    assert kafka_python_round_trip(secure, other_topic, "carol", "carol-secret", [b"kp"]) == [b"kp"]
    assert "User:carol" in secure.principals("SASL_SSL")
    errors: list[str] = []
    wrong = AdminClient(
        {**scram, "sasl.password": "not-hers", "error_cb": lambda e: errors.append(str(e))}
    )
    with pytest.raises(KafkaException):
        wrong.list_topics(timeout=3)
    wrong.poll(1)
    assert any("invalid credentials with SASL mechanism SCRAM-SHA-512" in e for e in errors)


def handshake(
    sock: socket.socket, mechanism: str, correlation_id: int = 1, version: int = 1
) -> tuple[int, list[str]]:
    """SaslHandshake: (error code, enabled mechanisms)."""
    header = wire.request_header(API_SASL_HANDSHAKE, version, correlation_id)
    sock.sendall(wire.frame(header + wire.string(mechanism)))
    reader = wire.read_response(sock, correlation_id)
    error = reader.int16()
    return error, [str(reader.string()) for _ in range(reader.int32())]


def authenticate(
    sock: socket.socket, token: bytes, correlation_id: int = 2
) -> tuple[int, str | None]:
    """SaslAuthenticate v1: (error code, error message)."""
    header = wire.request_header(API_SASL_AUTHENTICATE, 1, correlation_id)
    sock.sendall(wire.frame(header + wire.int32(len(token)) + token))
    reader = wire.read_response(sock, correlation_id)
    return reader.int16(), reader.string()


def still_serving(secure: SecureBroker) -> None:
    assert secure.process.port in wire.metadata_broker_ports(HOST, secure.process.port, 5.0)


def test_sasl_handshake_on_a_plaintext_listener_answers_illegal_sasl_state(
    secure: SecureBroker,
) -> None:
    with wire.connect(HOST, secure.process.port) as sock:
        assert handshake(sock, "PLAIN")[0] == ILLEGAL_SASL_STATE
        assert authenticate(sock, b"\0alice\0alice-secret")[0] == ILLEGAL_SASL_STATE
        # The connection stays usable, as in Kafka.
        assert wire.api_versions(sock, 0, 3).error_code == 0


def test_sasl_rules_on_an_unauthenticated_connection(secure: SecureBroker) -> None:
    port = secure.ports["SASL_PLAINTEXT"]
    with wire.connect(HOST, port) as sock:
        error, mechanisms = handshake(sock, "GSSAPI")
        assert (error, mechanisms) == (
            UNSUPPORTED_SASL_MECHANISM,
            ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"],
        )
        assert wire.is_closed_by_peer(sock, 5.0)
    with wire.connect(HOST, port) as sock:
        # Nothing but ApiVersions and SaslHandshake is read before authentication.
        sock.sendall(wire.frame(wire.request_header(wire.API_METADATA, 1, 1) + wire.int32(0)))
        assert wire.is_closed_by_peer(sock, 5.0)
    with wire.connect(HOST, port) as sock:
        assert handshake(sock, "PLAIN")[0] == 0
        error, message = authenticate(sock, b"\0alice\0wrong")
        assert error == SASL_AUTHENTICATION_FAILED
        assert message == "Authentication failed: Invalid username or password"
        assert wire.is_closed_by_peer(sock, 5.0)
    with wire.connect(HOST, port) as sock:
        assert handshake(sock, "PLAIN")[0] == 0
        assert authenticate(sock, b"\0alice\0alice-secret")[0] == 0
        # Authenticated: a second SaslAuthenticate is out of order; other requests are served.
        assert authenticate(sock, b"\0alice\0alice-secret", 3)[0] == ILLEGAL_SASL_STATE
        assert wire.api_versions(sock, 0, 4).error_code == 0
    with wire.connect(HOST, port) as sock:
        # SaslHandshake v0: the PLAIN message follows as a bare frame, answered by one.
        assert handshake(sock, "PLAIN", version=0)[0] == 0
        sock.sendall(wire.frame(b"\0bob\0bob-secret"))
        assert wire.read_frame(sock) == b""
        assert wire.api_versions(sock, 0, 5).error_code == 0
    still_serving(secure)


def test_truncated_exchanges_and_non_tls_clients_are_dropped(secure: SecureBroker) -> None:
    with wire.connect(HOST, secure.ports["SASL_SSL"]) as sock:
        # A plaintext Kafka request on the TLS port: answered by a TLS alert at most, then closed.
        sock.sendall(wire.frame(wire.request_header(wire.API_METADATA, 1, 1) + wire.int32(0)))
        received = b""
        while chunk := sock.recv(4096):
            received += chunk
        assert len(received) < 10, received
    assert any("TLS handshake failed" in line.get("message", "") for line in secure.log_lines())
    with wire.connect(HOST, secure.ports["SASL_PLAINTEXT"]) as sock:
        assert handshake(sock, "SCRAM-SHA-512")[0] == 0
        header = wire.request_header(API_SASL_AUTHENTICATE, 1, 2)
        # Half a SaslAuthenticate frame, then the client goes away.
        sock.sendall(wire.frame(header + wire.int32(20) + b"n,,n=al")[:-3])
    context = ssl.create_default_context(cafile=str(secure.ca.pem.cert))
    with (
        socket.create_connection((HOST, secure.ports["SSL"]), timeout=5) as raw,
        pytest.raises((ssl.SSLError, ConnectionError)),
        context.wrap_socket(raw, server_hostname="localhost") as tls,
    ):
        # No client certificate on a listener that requires one.
        tls.sendall(wire.frame(wire.request_header(wire.API_METADATA, 1, 1) + wire.int32(0)))
        wire.read_frame(tls)
    still_serving(secure)


def test_a_python_plain_callback_decides_and_its_failures_are_contained(
    secure: SecureBroker,
) -> None:
    port = secure.ports["CALLBACK"]

    def plain(user: str, password: str) -> int:
        with wire.connect(HOST, port, timeout=20) as sock:
            assert handshake(sock, "PLAIN") == (0, ["PLAIN"])
            return authenticate(sock, f"\0{user}\0{password}".encode())[0]

    assert plain("dave", "dave-secret") == 0
    assert plain("dave", "wrong") == SASL_AUTHENTICATION_FAILED
    assert plain("raiser", "x") == SASL_AUTHENTICATION_FAILED
    assert plain("raiser", "x") == SASL_AUTHENTICATION_FAILED
    plugin_errors = [
        line for line in secure.log_lines() if "the user directory is down" in json.dumps(line)
    ]
    assert len(plugin_errors) == 1, "one log line, with the traceback, for repeated failures"
    # Slower than the timeout: refused, and the broker keeps serving meanwhile.
    assert plain("sleeper", "x") == SASL_AUTHENTICATION_FAILED
    still_serving(secure)


def authenticate_lifetime(
    sock: socket.socket, token: bytes, correlation_id: int
) -> tuple[int, int]:
    """SaslAuthenticate v1: (error code, session_lifetime_ms)."""
    header = wire.request_header(API_SASL_AUTHENTICATE, 1, correlation_id)
    sock.sendall(wire.frame(header + wire.int32(len(token)) + token))
    reader = wire.read_response(sock, correlation_id)
    error = reader.int16()
    reader.string()  # error message
    assert reader.int32() == 0  # PLAIN's final server message is empty
    return error, reader.int64()


def test_sasl_sessions_expire_unless_the_client_reauthenticates(tmp_path: Path) -> None:
    sasl_port = free_port()
    broker = BrokerProcess(
        tmp_path,
        {
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
            "connections.max.reauth.ms": "1000",
        },
    )
    broker.overrides["listeners"] = (
        f"PLAINTEXT://{HOST}:{broker.port},SASL_PLAINTEXT://{HOST}:{sasl_port}"
    )
    broker.start()
    alice, bob = b"\0alice\0alice-secret", b"\0bob\0bob-secret"
    try:
        with wire.connect(HOST, sasl_port) as sock:
            assert handshake(sock, "PLAIN")[0] == 0
            assert authenticate_lifetime(sock, alice, 2) == (0, 1000)
            # KIP-368: the same principal may re-authenticate, which starts a new session.
            assert handshake(sock, "PLAIN", 3)[0] == 0
            assert authenticate_lifetime(sock, alice, 4) == (0, 1000)
            assert wire.api_versions(sock, 0, 5).error_code == 0
            # Past the session's lifetime, anything but re-authentication closes the connection.
            time.sleep(1.5)
            sock.sendall(wire.frame(wire.request_header(wire.API_METADATA, 1, 6) + wire.int32(0)))
            assert wire.is_closed_by_peer(sock, 5.0)
        with wire.connect(HOST, sasl_port) as sock:
            assert handshake(sock, "PLAIN")[0] == 0
            assert authenticate_lifetime(sock, alice, 2) == (0, 1000)
            assert handshake(sock, "PLAIN", 3)[0] == 0
            assert authenticate(sock, bob, 4) == (
                SASL_AUTHENTICATION_FAILED,
                "Cannot change principals during re-authentication from User:alice: User:bob",
            )
            assert wire.is_closed_by_peer(sock, 5.0)
        # librdkafka re-authenticates by itself (KIP-368) and keeps producing past the lifetime.
        topic = "reauthenticated"
        create_topic(broker.bootstrap, topic)
        config = {
            "bootstrap.servers": f"{HOST}:{sasl_port}",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "alice",
            "sasl.password": "alice-secret",
        }
        producer = Producer(config)
        for batch in range(6):
            producer.produce(topic, value=f"batch {batch}".encode(), partition=0)
            assert producer.flush(10) == 0
            time.sleep(0.5)
        assert broker.unexpected_exit() is None
        # Only the raw socket above let its session expire; librdkafka re-authenticated.
        assert broker.stderr_text().count("expired without re-authentication") == 1
    finally:
        broker.kill9()
