"""`format("krust")` over TLS and SASL with Kafka's client keys (`kafka.security.protocol`,
`kafka.ssl.*`, `kafka.sasl.*`): one broker with a SASL_SSL listener (SCRAM users), an SSL listener
that requires client certificates (mTLS), a SASL_PLAINTEXT one (PLAIN) and an SSL one whose
certificate names another host. The native client alone covers the other mechanisms."""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka.admin import ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from integration.broker_process import HOST, BrokerProcess, free_port
from integration.clients.confluent import admin_client, create_topic
from integration.tls_certs import CertificateAuthority, Pem
from krust._core import KafkaClient, KafkaClientError
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

SCRAM_USER, SCRAM_PASSWORD = "spark-user", "spark-secret"
PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    f'user_{SCRAM_USER}="{SCRAM_PASSWORD}";'
)
ADMIN_TIMEOUT_S = 30


def elsewhere_keystore(ca: CertificateAuthority, path: Path) -> Path:
    """A PEM keystore whose server certificate, signed by `ca`, names only elsewhere.invalid."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    name = x509.Name([x509.NameAttribute(x509.oid.NameOID.COMMON_NAME, "elsewhere.invalid")])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(ca.cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName("elsewhere.invalid")]), critical=False
        )
        .sign(ca.key, hashes.SHA256())
    )
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        + cert.public_bytes(serialization.Encoding.PEM)
    )
    return path


@dataclass(frozen=True)
class SecureBroker:
    process: BrokerProcess
    ports: dict[str, int]
    ca: CertificateAuthority
    client: Pem
    # A CA that signed nothing the broker has.
    other_ca: CertificateAuthority

    def bootstrap(self, listener: str) -> str:
        return f"{HOST}:{self.ports[listener]}"


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    workdir = tmp_path_factory.mktemp("spark-secure")
    certs = workdir / "certs"
    certs.mkdir()
    ca = CertificateAuthority(certs)
    ports = {name: free_port() for name in ("SSL", "SASL_SSL", "SASL_PLAINTEXT", "ELSEWHERE")}
    process = BrokerProcess(
        workdir,
        {
            "ssl.keystore.location": str(ca.server().keystore(certs / "keystore.pem")),
            "ssl.truststore.location": str(ca.pem.cert),
            "listener.name.ssl.ssl.client.auth": "required",
            "listener.name.elsewhere.ssl.keystore.location": str(
                elsewhere_keystore(ca, certs / "elsewhere.pem")
            ),
            "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
            "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL,"
            "SASL_PLAINTEXT:SASL_PLAINTEXT,ELSEWHERE:SSL",
        },
    )
    process.overrides["listeners"] = ",".join(
        [f"PLAINTEXT://{HOST}:{process.port}"]
        + [f"{name}://{HOST}:{port}" for name, port in ports.items()]
    )
    process.start()
    try:
        admin = admin_client(process.bootstrap)
        # One request per mechanism: Kafka refuses to alter a user twice in one request.
        for mechanism in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512):
            credential = ScramCredentialInfo(mechanism, 4096)
            upsert = UserScramCredentialUpsertion(SCRAM_USER, credential, SCRAM_PASSWORD.encode())
            for future in admin.alter_user_scram_credentials([upsert]).values():
                future.result(ADMIN_TIMEOUT_S)
        yield SecureBroker(
            process, ports, ca, ca.client("spark"), CertificateAuthority(certs, "other CA")
        )
        crash = process.unexpected_exit()
        if crash:
            pytest.fail(crash)
    finally:
        process.kill9()


def scram_options(
    secure: SecureBroker, password: str = SCRAM_PASSWORD, mechanism: str = "SCRAM-SHA-512"
) -> dict[str, str]:
    return {
        "kafka.bootstrap.servers": secure.bootstrap("SASL_SSL"),
        "kafka.security.protocol": "SASL_SSL",
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.location": str(secure.ca.pem.cert),
        "kafka.sasl.mechanism": mechanism,
        "kafka.sasl.jaas.config": (
            "org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{SCRAM_USER}" password="{password}";'
        ),
    }


def native_client(options: dict[str, str]) -> KafkaClient:
    """The data source's client with `options` as it gets them (without the kafka. prefix)."""
    settings = {k.removeprefix("kafka."): v for k, v in options.items()}
    return KafkaClient(settings.pop("bootstrap.servers"), settings)


def write_then_read(
    spark: SparkSession,
    topic: str,
    write_options: dict[str, str],
    read_options: dict[str, str],
) -> list[tuple[str, str]]:
    """Writes 20 rows over 2 partitions with `write_options`, reads them back with
    `read_options`; the (key, value) pairs read."""
    rows = [(f"k{i}", f"v{i}") for i in range(20)]
    (
        spark.createDataFrame(rows, "key string, value string")
        .repartition(2)
        .write.format("krust")
        .mode("append")
        .options(**write_options)
        .option("topic", topic)
        .save()
    )
    read = (
        spark.read.format("krust")
        .options(**read_options)
        .option("subscribe", topic)
        .load()
        .selectExpr("CAST(key AS STRING)", "CAST(value AS STRING)")
        .collect()
    )
    return sorted((row[0], row[1]) for row in read)


def expected_rows() -> list[tuple[str, str]]:
    return sorted((f"k{i}", f"v{i}") for i in range(20))


def test_batch_write_and_read_over_sasl_ssl_with_scram_sha_512(
    spark: SparkSession, secure: SecureBroker
) -> None:
    topic = "spark-scram"
    create_topic(secure.process.bootstrap, topic, partitions=2)
    options = scram_options(secure)
    assert write_then_read(spark, topic, options, options) == expected_rows()


def test_batch_write_and_read_over_mtls(
    spark: SparkSession, secure: SecureBroker, tmp_path: Path
) -> None:
    topic = "spark-mtls"
    create_topic(secure.process.bootstrap, topic, partitions=2)
    ssl = {"kafka.bootstrap.servers": secure.bootstrap("SSL"), "kafka.security.protocol": "SSL"}
    # The writer names files; the reader gives the PEM inline: both of Kafka's PEM forms.
    from_files = {
        **ssl,
        "kafka.ssl.truststore.location": str(secure.ca.pem.cert),
        "kafka.ssl.keystore.type": "PEM",
        "kafka.ssl.keystore.location": str(secure.client.keystore(tmp_path / "client.pem")),
    }
    inline = {
        **ssl,
        "kafka.ssl.truststore.certificates": secure.ca.pem.cert.read_text(),
        "kafka.ssl.keystore.certificate.chain": secure.client.cert.read_text(),
        "kafka.ssl.keystore.key": secure.client.key.read_text(),
    }
    assert write_then_read(spark, topic, from_files, inline) == expected_rows()


def load_error(spark: SparkSession, options: dict[str, str]) -> str:
    with pytest.raises(PySparkException) as raised:
        spark.read.format("krust").options(**options).option("subscribe", "t").load().collect()
    return str(raised.value)


def test_a_wrong_password_names_the_mechanism_and_the_brokers_message(
    spark: SparkSession, secure: SecureBroker
) -> None:
    message = load_error(spark, scram_options(secure, password="not-the-password"))
    assert "SASL authentication with SCRAM-SHA-512" in message
    assert "invalid credentials with SASL mechanism SCRAM-SHA-512" in message


def test_a_truststore_without_the_brokers_ca_fails_the_tls_handshake(
    spark: SparkSession, secure: SecureBroker
) -> None:
    options = {
        **scram_options(secure),
        "kafka.ssl.truststore.location": str(secure.other_ca.pem.cert),
    }
    message = load_error(spark, options)
    assert "TLS with " in message
    assert "not signed by a CA in ssl.truststore.location" in message


def test_without_a_client_certificate_the_ssl_listener_refuses(
    spark: SparkSession, secure: SecureBroker
) -> None:
    options = {
        "kafka.bootstrap.servers": secure.bootstrap("SSL"),
        "kafka.security.protocol": "SSL",
        "kafka.ssl.truststore.location": str(secure.ca.pem.cert),
    }
    assert "the broker refused this client's certificate" in load_error(spark, options)


def test_the_native_client_authenticates_with_plain_and_scram_sha_256(
    secure: SecureBroker,
) -> None:
    topic = "native-sasl"
    create_topic(secure.process.bootstrap, topic, partitions=3)
    plain = {
        "kafka.bootstrap.servers": secure.bootstrap("SASL_PLAINTEXT"),
        "kafka.security.protocol": "SASL_PLAINTEXT",
        "kafka.sasl.mechanism": "PLAIN",
    }
    jaas = "org.apache.kafka.common.security.plain.PlainLoginModule required"
    right = {
        **plain,
        "kafka.sasl.jaas.config": f'{jaas} username="{SCRAM_USER}" password="{SCRAM_PASSWORD}";',
    }
    for options in (right, scram_options(secure, mechanism="SCRAM-SHA-256")):
        assert native_client(options).partition_counts([topic]) == [(topic, 3)]
    wrong = {**plain, "kafka.sasl.jaas.config": f'{jaas} username="{SCRAM_USER}" password="x";'}
    with pytest.raises(KafkaClientError) as raised:
        native_client(wrong).partition_counts([topic])
    assert "SASL authentication with PLAIN to " in str(raised.value)


def test_hostname_verification_is_on_unless_the_algorithm_is_empty(secure: SecureBroker) -> None:
    topic = "native-elsewhere"
    create_topic(secure.process.bootstrap, topic, partitions=1)
    options = {
        "kafka.bootstrap.servers": secure.bootstrap("ELSEWHERE"),
        "kafka.security.protocol": "SSL",
        "kafka.ssl.truststore.location": str(secure.ca.pem.cert),
    }
    with pytest.raises(KafkaClientError) as raised:
        native_client(options).partition_counts([topic])
    assert "does not name this host" in str(raised.value)
    unverified = {**options, "kafka.ssl.endpoint.identification.algorithm": ""}
    assert native_client(unverified).partition_counts([topic]) == [(topic, 1)]
