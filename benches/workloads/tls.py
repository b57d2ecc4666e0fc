"""TLS throughput: produce and consume 1 KiB records over each broker's SSL listener with
confluent-kafka (librdkafka), with certificates made for the run (a CA and a server
certificate for 127.0.0.1). krust encrypts with rustls and copies fetched records through
user space (no sendfile under TLS, docs/security.md); Kafka's TLS listener loses zero-copy
too. Same records, same client, same listener settings for both brokers."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from workloads.consume import consume_with_librdkafka
from workloads.produce import ProduceCase, produce_with_librdkafka
from workloads.topics import create_topic


@dataclass(frozen=True)
class TlsFiles:
    """The CA clients trust, and the broker's PEM keystore (unencrypted key + certificate)."""

    ca: Path
    keystore: Path


def make_certificates(directory: Path) -> TlsFiles:
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "bench CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=7))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    server = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=7))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    files = TlsFiles(directory / "ca.pem", directory / "keystore.pem")
    files.ca.write_bytes(ca.public_bytes(pem))
    files.keystore.write_bytes(
        key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
        + server.public_bytes(pem)
    )
    return files


@dataclass(frozen=True)
class TlsResult:
    produce_mb_per_s: float
    consume_mb_per_s: float
    consume_bytes: int


def produce_and_consume_over_tls(
    plaintext_bootstrap: str, tls_bootstrap: str, ca: Path, partitions: int, data_bytes: int
) -> TlsResult:
    """Produce `data_bytes` of 1 KiB records (acks=1) to a new topic over TLS, then read
    them all back from the start over TLS."""
    tls = {"security.protocol": "SSL", "ssl.ca.location": str(ca)}
    create_topic(plaintext_bootstrap, "tls", partitions)
    records = data_bytes // 1024
    case = ProduceCase(1024, "1", partitions, "none")
    produced = produce_with_librdkafka(tls_bootstrap, "tls", case, records, tls)
    consumed = consume_with_librdkafka(tls_bootstrap, "tls", partitions, records, tls)
    return TlsResult(produced.mb_per_s, consumed.mb_per_s, consumed.bytes)
