"""Listener security settings (krust.config.listeners): what each listener's TLS and SASL get,
and the settings refused at start-up by name."""

from __future__ import annotations

from pathlib import Path

import pytest
from krust.config.broker import load_config
from krust.config.errors import ConfigError

PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'user_alice="alice-secret" user_bob="b\\"ob";'
)


def load(tmp_path: Path, **overrides: str) -> dict[str, dict[str, object]]:
    pairs = [f"log.dirs={tmp_path / 'data'}", *(f"{k}={v}" for k, v in overrides.items())]
    return load_config(None, {}, pairs)["listener.security"]


def refused(tmp_path: Path, **overrides: str) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        load(tmp_path, **overrides)
    return caught.value


def listeners(*names: str) -> str:
    return ",".join(f"{name}://127.0.0.1:{9092 + i}" for i, name in enumerate(names))


def test_a_pem_keystore_file_holds_the_key_and_chain(tmp_path: Path) -> None:
    keystore = tmp_path / "keystore.pem"
    keystore.write_text("KEY AND CHAIN")
    security = load(
        tmp_path,
        **{"listeners": listeners("PLAINTEXT", "SSL"), "ssl.keystore.location": str(keystore)},
    )
    assert security["PLAINTEXT"] == {"ssl": None, "sasl": None}
    ssl = security["SSL"]["ssl"]
    assert isinstance(ssl, dict)
    assert ssl["certificate_chain"] == ssl["private_key"] == "KEY AND CHAIN"
    assert refused(tmp_path, **{"ssl.keystore.type": "JKS"}).key == "ssl.keystore.type"
    missing = refused(tmp_path, **{"listeners": listeners("SSL")})
    assert missing.key == "ssl.keystore.location"
    unreadable = refused(
        tmp_path,
        **{"listeners": listeners("SSL"), "ssl.keystore.location": str(tmp_path / "absent")},
    )
    assert unreadable.key == "ssl.keystore.location"


def test_inline_pem_keys_and_listener_prefixes(tmp_path: Path) -> None:
    security = load(
        tmp_path,
        **{
            "listeners": listeners("INTERNAL", "EXTERNAL"),
            "listener.security.protocol.map": "INTERNAL:SSL,EXTERNAL:SASL_SSL",
            "ssl.keystore.certificate.chain": "CHAIN",
            "ssl.keystore.key": "KEY",
            "listener.name.external.ssl.keystore.key": "EXTERNAL KEY",
            "listener.name.internal.ssl.client.auth": "required",
            "ssl.truststore.certificates": "CA",
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        },
    )
    internal, external = security["INTERNAL"]["ssl"], security["EXTERNAL"]["ssl"]
    assert isinstance(internal, dict) and isinstance(external, dict)
    assert (internal["private_key"], internal["client_auth"]) == ("KEY", "required")
    assert (external["private_key"], external["client_auth"]) == ("EXTERNAL KEY", "none")
    assert external["trusted_certificates"] == "CA"
    assert security["EXTERNAL"]["sasl"] == {
        "mechanisms": ["SCRAM-SHA-512"],
        "plain_users": {},
        "plain_callback": False,
        "plain_callback_class": None,
        "reauth_ms": 0,
    }
    bad = refused(tmp_path, **{"listener.name.x.ssl.client.auth": "sometimes"})
    assert bad.key == "listener.name.x.ssl.client.auth"
    assert refused(tmp_path, **{"listener.name.x.log.dirs": "/tmp"}).key == (
        "listener.name.x.log.dirs"
    )


def test_client_auth_needs_a_truststore(tmp_path: Path) -> None:
    base = {
        "listeners": listeners("SSL"),
        "ssl.keystore.certificate.chain": "CHAIN",
        "ssl.keystore.key": "KEY",
        "ssl.client.auth": "requested",
    }
    assert refused(tmp_path, **base).key == "ssl.client.auth"
    truststore = tmp_path / "ca.pem"
    truststore.write_text("CA")
    ssl = load(tmp_path, **base, **{"ssl.truststore.location": str(truststore)})["SSL"]["ssl"]
    assert isinstance(ssl, dict) and ssl["trusted_certificates"] == "CA"
    assert refused(tmp_path, **{"ssl.truststore.type": "PKCS12"}).key == "ssl.truststore.type"


def test_sasl_listeners_need_supported_mechanisms_and_plain_users(tmp_path: Path) -> None:
    sasl = {"listeners": listeners("SASL_PLAINTEXT")}
    # Kafka's default, GSSAPI, is not served.
    assert refused(tmp_path, **sasl).key == "sasl.enabled.mechanisms"
    sasl["sasl.enabled.mechanisms"] = "PLAIN"
    no_users = refused(tmp_path, **sasl)
    assert no_users.key == "listener.name.sasl_plaintext.plain.sasl.jaas.config"
    sasl["listener.name.sasl_plaintext.plain.sasl.jaas.config"] = PLAIN_JAAS
    users = load(tmp_path, **sasl)["SASL_PLAINTEXT"]["sasl"]
    assert users == {
        "mechanisms": ["PLAIN"],
        "plain_users": {"alice": "alice-secret", "bob": 'b"ob'},
        "plain_callback": False,
        "plain_callback_class": None,
        "reauth_ms": 0,
    }
    wrong_module = dict(sasl)
    wrong_module["listener.name.sasl_plaintext.plain.sasl.jaas.config"] = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required;"
    )
    assert "PlainLoginModule" in str(refused(tmp_path, **wrong_module))
    # A PLAIN callback replaces the JAAS users; other mechanisms cannot have one.
    callback = {
        "listeners": listeners("SASL_PLAINTEXT"),
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "listener.name.sasl_plaintext.plain.sasl.server.callback.handler.class": "m:C",
    }
    with_callback = load(tmp_path, **callback)["SASL_PLAINTEXT"]["sasl"]
    assert isinstance(with_callback, dict)
    assert (with_callback["plain_callback"], with_callback["plain_callback_class"]) == (True, "m:C")
    callback["listener.name.sasl_plaintext.scram-sha-256.sasl.server.callback.handler.class"] = (
        "m:C"
    )
    assert refused(tmp_path, **callback).key == (
        "listener.name.sasl_plaintext.scram-sha-256.sasl.server.callback.handler.class"
    )
    assert refused(tmp_path, **{"sasl.jaas.config": PLAIN_JAAS}).key == "sasl.jaas.config"
