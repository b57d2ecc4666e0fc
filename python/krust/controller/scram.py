"""SCRAM credentials (KIP-554): AlterUserScramCredentials and DescribeUserScramCredentials,
with Kafka's validation and error codes. Credentials are UserScramCredentialRecords in the
metadata log: salt, stored key and server key derived from the salted password the client
sends (RFC 5802), never the password itself. The core authenticates against them."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from krust.bridge.dispatcher import RequestContext
from krust.bridge.protocol import make_response
from krust.bridge.routes import Exposure
from krust.controller.records import (
    MetadataRecord,
    RemoveUserScramCredentialRecord,
    UserScramCredentialRecord,
)

if TYPE_CHECKING:
    from krust.controller.controller import Controller
    from krust.controller.image import MetadataImage

DESCRIBE_USER_SCRAM_CREDENTIALS = 50
ALTER_USER_SCRAM_CREDENTIALS = 51
# Kafka's ScramMechanism types and their hash functions.
MECHANISMS: Mapping[int, str] = {1: "sha256", 2: "sha512"}
# Kafka's bounds on iterations (ScramMechanism.minIterations / maxIterations).
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384


def credential_record(
    name: str, mechanism: int, salt: bytes, salted_password: bytes, iterations: int
) -> UserScramCredentialRecord:
    """The record of a salted password: StoredKey = H(HMAC(salted, "Client Key")),
    ServerKey = HMAC(salted, "Server Key") (RFC 5802)."""
    digest = MECHANISMS[mechanism]
    client_key = hmac.digest(salted_password, b"Client Key", digest)
    return UserScramCredentialRecord(
        name=name,
        mechanism=mechanism,
        salt=salt,
        stored_key=hashlib.new(digest, client_key).digest(),
        server_key=hmac.digest(salted_password, b"Server Key", digest),
        iterations=iterations,
    )


@dataclass(frozen=True)
class _Alteration:
    name: str
    mechanism: int
    upsertion: Any | None  # the request's upsertion; None for a deletion


def _problem(image: MetadataImage, alteration: _Alteration) -> tuple[ErrorCode, str] | None:
    if not alteration.name:
        return ErrorCode.unacceptable_credential, "Username must not be empty"
    if alteration.mechanism not in MECHANISMS:
        return ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"
    upsertion = alteration.upsertion
    if upsertion is None:
        if (alteration.name, alteration.mechanism) not in image.scram_credentials:
            return (
                ErrorCode.resource_not_found,
                "Attempt to delete a user credential that does not exist",
            )
        return None
    if upsertion.iterations < MIN_ITERATIONS:
        return ErrorCode.unacceptable_credential, "Too few iterations"
    if upsertion.iterations > MAX_ITERATIONS:
        return ErrorCode.unacceptable_credential, "Too many iterations"
    if not upsertion.salt or not upsertion.salted_password:
        return ErrorCode.unacceptable_credential, "Salt and salted password must not be empty"
    return None


def plan_alter(
    image: MetadataImage, deletions: Sequence[Any], upsertions: Sequence[Any]
) -> tuple[list[MetadataRecord], list[dict[str, Any]]]:
    """Records and per-user results; a user's alterations apply all or none, as in Kafka."""
    alterations = [_Alteration(d.name, d.mechanism, None) for d in deletions]
    alterations += [_Alteration(u.name, u.mechanism, u) for u in upsertions]
    by_user: dict[str, list[_Alteration]] = {}
    for alteration in alterations:
        by_user.setdefault(alteration.name, []).append(alteration)
    records: list[MetadataRecord] = []
    results = []
    for user, mine in by_user.items():
        problem = (
            (
                ErrorCode.duplicate_resource,
                "A user credential cannot be altered twice in the same request",
            )
            if len(mine) > 1
            else _problem(image, mine[0])
        )
        if problem is None:
            records.extend(_record(alteration) for alteration in mine)
        error, message = problem if problem is not None else (ErrorCode.none, None)
        results.append({"user": user, "error_code": error, "error_message": message})
    return records, results


def _record(alteration: _Alteration) -> MetadataRecord:
    upsertion = alteration.upsertion
    if upsertion is None:
        return RemoveUserScramCredentialRecord(name=alteration.name, mechanism=alteration.mechanism)
    return credential_record(
        alteration.name,
        alteration.mechanism,
        upsertion.salt,
        upsertion.salted_password,
        upsertion.iterations,
    )


def describe(image: MetadataImage, users: Sequence[str] | None) -> list[dict[str, Any]]:
    """Each user's mechanisms and iterations (every user with credentials when none named)."""
    by_user: dict[str, list[dict[str, int]]] = {}
    for (name, mechanism), record in sorted(image.scram_credentials.items()):
        by_user.setdefault(name, []).append(
            {"mechanism": mechanism, "iterations": record.iterations}
        )
    if not users:
        return [
            {"user": name, "error_code": ErrorCode.none, "credential_infos": infos}
            for name, infos in by_user.items()
        ]
    results = []
    for name in dict.fromkeys(users):
        if users.count(name) > 1:
            error, message = (
                ErrorCode.duplicate_resource,
                "Cannot describe SCRAM credentials for the same user twice in a single request",
            )
        elif name not in by_user:
            error, message = (
                ErrorCode.resource_not_found,
                "Attempt to describe a user credential that does not exist",
            )
        else:
            error, message = ErrorCode.none, None
        infos = by_user.get(name, []) if error is ErrorCode.none else []
        results.append(
            {"user": name, "error_code": error, "error_message": message, "credential_infos": infos}
        )
    return results


def install(controller: Controller, register: Callable[..., None]) -> None:
    """Serve both APIs (v0, the version Kafka 4 serves) from `controller`'s image."""

    async def alter(request: Any, context: RequestContext) -> Any:
        async with controller.lock:
            records, results = plan_alter(controller.image, request.deletions, request.upsertions)
            if records:
                await controller.commit(records)
        fields = {"results": results}
        return make_response(ALTER_USER_SCRAM_CREDENTIALS, context.api_version, fields)

    async def describe_credentials(request: Any, context: RequestContext) -> Any:
        users = None if request.users is None else [user.name for user in request.users]
        fields = {"error_code": ErrorCode.none, "results": describe(controller.image, users)}
        return make_response(DESCRIBE_USER_SCRAM_CREDENTIALS, context.api_version, fields)

    register(ALTER_USER_SCRAM_CREDENTIALS, 0, 0, alter, exposure=Exposure.FORWARDED)
    register(DESCRIBE_USER_SCRAM_CREDENTIALS, 0, 0, describe_credentials)
