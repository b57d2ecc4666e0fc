"""Listeners: their names and addresses, their security protocols, what brokers advertise, and the
ssl.* and sasl.* keys, set for every listener or for one listener as
`listener.name.<listener>.<key>` (Kafka's listener prefix), resolved per listener into what the
core needs (PEM text, client auth, mechanisms, PLAIN users). See docs/security.md."""

from __future__ import annotations

import re
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from krust.config.errors import ConfigError

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
# Keys a broker reads per listener *and* mechanism: listener.name.<l>.<mechanism>.<key>.
MECHANISM_KEYS = ("sasl.jaas.config", "sasl.server.callback.handler.class")
_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
_LISTENER_KEY = re.compile(r"listener\.name\.([^.]+)\.(.+)")
_TLS_PROTOCOLS = ("SSL", "SASL_SSL")
_SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")


class Listener(NamedTuple):
    """One listener, as the core receives it: (name, host, port)."""

    name: str
    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


_LISTENER = re.compile(r"(.+)://\[?([0-9A-Za-z\-%._:]*)\]?:(-?[0-9]+)")


def parse_listeners(key: str, entries: list[str]) -> list[Listener]:
    listeners = []
    for entry in entries:
        match = _LISTENER.fullmatch(entry)
        if not match or not 0 <= int(match[3]) <= 65535:
            raise ConfigError(key, f"invalid listener {entry!r}: expected NAME://host:port")
        listeners.append(Listener(match[1].upper(), match[2], int(match[3])))
    names = [listener.name for listener in listeners]
    if len(set(names)) != len(names):
        raise ConfigError(key, "each listener must have a different name")
    return listeners


def protocol_map(text: str) -> dict[str, str]:
    """listener.security.protocol.map as {LISTENER: PROTOCOL}."""
    mapping = {}
    for entry in filter(None, (item.strip() for item in text.split(","))):
        name, sep, protocol = entry.partition(":")
        if not sep or protocol.strip().upper() not in SECURITY_PROTOCOLS:
            raise ConfigError(
                "listener.security.protocol.map",
                f"invalid entry {entry!r}: expected NAME:PROTOCOL "
                f"with PROTOCOL one of {', '.join(SECURITY_PROTOCOLS)}",
            )
        mapping[name.strip().upper()] = protocol.strip().upper()
    return mapping


def advertised_listeners(
    entries: list[str] | None, listeners: list[Listener], controller_names: list[str]
) -> list[Listener]:
    """What brokers advertise to clients: never a controller listener (Kafka's rule)."""
    if entries is None:
        # Like Kafka: an empty listener host is advertised as this machine's host name.
        advertised = [
            lst._replace(host=lst.host or socket.gethostname())
            for lst in listeners
            if lst.name not in controller_names
        ]
    else:
        advertised = parse_listeners("advertised.listeners", entries)
    if not advertised:
        raise ConfigError("listeners", "at least one listener that is not a controller listener")
    names = {listener.name for listener in listeners}
    for listener in advertised:
        if listener.name not in names:
            raise ConfigError("advertised.listeners", f"{listener.name} is not in listeners")
        if listener.name in controller_names:
            raise ConfigError(
                "advertised.listeners",
                f"{listener.name} is a controller listener (controller.listener.names): "
                "clients do not send requests to controllers",
            )
        if listener.host in ("0.0.0.0", "::", ""):
            raise ConfigError(
                "advertised.listeners",
                f"{listener} is not routable: set advertised.listeners to a host clients can reach",
            )
    return advertised


def is_security_key(name: str) -> bool:
    """Whether a table key may be set per listener (Kafka accepts the prefix on ssl.*/sasl.*)."""
    return name.startswith(("ssl.", "sasl.")) and name not in MECHANISM_KEYS


def split_listener_key(key: str) -> tuple[str, str] | None:
    """(listener name, key) of `listener.name.<listener>.<key>`; the key may start with a
    lower-case mechanism (`plain.sasl.jaas.config`). None for any other key."""
    match = _LISTENER_KEY.fullmatch(key)
    if match is None:
        return None
    return match[1].upper(), match[2]


def mechanism_key(base: str) -> tuple[str, str] | None:
    """(MECHANISM, key) of `<mechanism>.sasl.jaas.config`-style keys, else None."""
    mechanism, _, rest = base.partition(".")
    if rest in MECHANISM_KEYS and mechanism.upper() in MECHANISMS and mechanism.islower():
        return mechanism.upper(), rest
    return None


class _Lookup:
    """A listener's value of a key: its prefixed value if set, else the broker-wide one; and
    the name to blame in errors (the prefixed key when that is what was set)."""

    def __init__(
        self, listener: str, values: Mapping[str, Any], prefixed: Mapping[str, Any]
    ) -> None:
        self.listener = listener
        self.values = values
        self.prefixed = prefixed

    def name(self, key: str) -> str:
        prefixed = f"listener.name.{self.listener.lower()}.{key}"
        return prefixed if prefixed in self.prefixed else key

    def get(self, key: str) -> Any:
        prefixed = f"listener.name.{self.listener.lower()}.{key}"
        if prefixed in self.prefixed:
            return self.prefixed[prefixed]
        return self.values.get(key)

    def text(self, key: str) -> str:
        """The contents of the file a key names."""
        path = self.get(key)
        try:
            return Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise ConfigError(self.name(key), f"cannot read {path}: {error}") from None


def listener_security(
    listeners: list[Any],
    protocols: Mapping[str, str],
    values: Mapping[str, Any],
    prefixed: Mapping[str, Any],
) -> dict[str, dict[str, Any]]:
    """Each listener's `{"ssl": ..., "sasl": ...}` for the core (None where its protocol has
    no TLS or no SASL); any missing or unusable setting is a ConfigError naming the key."""
    security = {}
    for listener in listeners:
        protocol = protocols[listener.name]
        lookup = _Lookup(listener.name, values, prefixed)
        security[listener.name] = {
            "ssl": _tls(lookup, protocol) if protocol in _TLS_PROTOCOLS else None,
            "sasl": _sasl(lookup, protocol) if protocol in _SASL_PROTOCOLS else None,
        }
    return security


def _tls(lookup: _Lookup, protocol: str) -> dict[str, Any]:
    location = lookup.get("ssl.keystore.location")
    chain, key = lookup.get("ssl.keystore.certificate.chain"), lookup.get("ssl.keystore.key")
    if location is not None and (chain is not None or key is not None):
        raise ConfigError(
            lookup.name("ssl.keystore.location"),
            "set either ssl.keystore.location or ssl.keystore.certificate.chain and "
            "ssl.keystore.key, not both",
        )
    if location is not None:
        # Kafka's PEM keystore file holds the private key and the certificate chain.
        chain = key = lookup.text("ssl.keystore.location")
    elif chain is None or key is None:
        raise ConfigError(
            lookup.name("ssl.keystore.location"),
            f"listener {lookup.listener} uses {protocol}: set ssl.keystore.location, or "
            "ssl.keystore.certificate.chain and ssl.keystore.key",
        )
    trusted = lookup.get("ssl.truststore.certificates")
    if lookup.get("ssl.truststore.location") is not None:
        if trusted is not None:
            raise ConfigError(
                lookup.name("ssl.truststore.location"),
                "set either ssl.truststore.location or ssl.truststore.certificates, not both",
            )
        trusted = lookup.text("ssl.truststore.location")
    client_auth = lookup.get("ssl.client.auth")
    if client_auth != "none" and trusted is None:
        raise ConfigError(
            lookup.name("ssl.client.auth"),
            f"{client_auth} client certificates need ssl.truststore.location or "
            "ssl.truststore.certificates",
        )
    return {
        "certificate_chain": chain,
        "private_key": key,
        "trusted_certificates": trusted,
        "client_auth": client_auth,
        "principal_mapping_rules": lookup.get("ssl.principal.mapping.rules"),
    }


def _sasl(lookup: _Lookup, protocol: str) -> dict[str, Any]:
    mechanisms: list[str] = lookup.get("sasl.enabled.mechanisms") or []
    key = lookup.name("sasl.enabled.mechanisms")
    unsupported = [m for m in mechanisms if m not in MECHANISMS]
    if unsupported or not mechanisms:
        raise ConfigError(
            key,
            f"listener {lookup.listener} uses {protocol}: "
            + (f"{', '.join(unsupported)} not supported; " if unsupported else "")
            + f"krust serves {', '.join(MECHANISMS)}",
        )
    plain_users: dict[str, str] = {}
    callback: str | None = None
    for mechanism in mechanisms:
        jaas_key = f"{mechanism.lower()}.sasl.jaas.config"
        jaas = lookup.get(jaas_key)
        callback_key = f"{mechanism.lower()}.sasl.server.callback.handler.class"
        if lookup.get(callback_key) is not None:
            if mechanism != "PLAIN":
                raise ConfigError(
                    lookup.name(callback_key), "only PLAIN credentials can be checked by a callback"
                )
            callback = lookup.get(callback_key)
        name = f"listener.name.{lookup.listener.lower()}.{jaas_key}"
        if jaas is None:
            if mechanism == "PLAIN" and callback is None:
                raise ConfigError(
                    name,
                    f"PLAIN is enabled on {lookup.listener}: set its users, or "
                    f"listener.name.{lookup.listener.lower()}.plain.sasl.server.callback.handler.class",
                )
            continue
        module, options = parse_jaas(name, jaas)
        if module != _LOGIN_MODULES[mechanism]:
            raise ConfigError(name, f"{mechanism} needs {_LOGIN_MODULES[mechanism]}, not {module}")
        if mechanism == "PLAIN":
            plain_users = {
                user.removeprefix("user_"): password
                for user, password in options.items()
                if user.startswith("user_")
            }
    return {
        "mechanisms": mechanisms,
        "plain_users": plain_users,
        "plain_callback": callback is not None,
        "plain_callback_class": callback,
        "reauth_ms": lookup.get("connections.max.reauth.ms"),
    }


_JAAS = re.compile(r"\s*(\S+)\s+(required|requisite|sufficient|optional)\s*(.*?)\s*;\s*", re.S)
_JAAS_OPTION = re.compile(r'\s*([A-Za-z0-9_.\-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s"]+))', re.S)


def parse_jaas(key: str, text: str) -> tuple[str, dict[str, str]]:
    """The login module and options of a one-module JAAS config (Kafka's `sasl.jaas.config`
    syntax: `Module required name="value" ...;`)."""
    match = _JAAS.fullmatch(text)
    if match is None:
        raise ConfigError(key, "expected 'LoginModule required name=\"value\" ...;'")
    options: dict[str, str] = {}
    rest = match[3]
    while rest:
        option = _JAAS_OPTION.match(rest)
        if option is None:
            raise ConfigError(key, f"malformed JAAS option near {rest[:20]!r}")
        quoted, bare = option[2], option[3]
        options[option[1]] = re.sub(r"\\(.)", r"\1", quoted) if quoted is not None else bare
        rest = rest[option.end() :].lstrip()
    return match[1], options
