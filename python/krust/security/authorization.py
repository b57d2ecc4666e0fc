"""The broker's authorizer (docs/authorization.md): the configured `authorizer.class.name`
plugin, called on its own thread with a timeout, for the core's native handlers (through
`krust._core.Core.serve`'s `authorize` callback, on a miss of the core's decision cache) and
for Python's handlers (`allowed`, `allowed_names`, `authorized_operations`).

A call that raises, times out or answers malformed results denies, is logged once with the
plugin's traceback, and is not cached. Without an authorizer everything is allowed and the core
does no check at all."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from krust.bridge.dispatcher import RequestContext
from krust.config.configured_plugins import AUTHORIZER_KEY, authorizer_spec
from krust.config.errors import ConfigError
from krust.plugins.authorizer import (
    CLUSTER_NAME,
    SUPPORTED_OPERATIONS,
    AclAuthorizer,
    AclOperation,
    Action,
    AuthorizableRequestContext,
    AuthorizationResult,
    Authorizer,
    AuthorizerContext,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from krust.plugins.containment import PluginRunner
from krust.plugins.loading import load_plugin, plugin_configs
from krust.plugins.standard_authorizer import KAFKA_CLASS_NAME, StandardAuthorizer

CLASS_KEY = AUTHORIZER_KEY
BUILT_IN = "krust.plugins.standard_authorizer:StandardAuthorizer"
log = logging.getLogger(__name__)

# One action as the core sends it: (operation, resource type, pattern type, resource name);
# pattern type ANY asks whether the operation is allowed on some resource of the type.
CoreAction = tuple[int, int, int, str]


class _Failed(Exception):
    """The plugin answered something that is not one result per action."""


def bitfield(operations: Iterable[AclOperation]) -> int:
    """KIP-430's authorized operations: bit `code` set for each operation."""
    bits = 0
    for operation in operations:
        bits |= 1 << operation
    return bits


class Authorization:
    """The configured authorizer, or (`plugin` None) none: then everything is allowed."""

    def __init__(self, plugin: Authorizer | None, timeout_s: float = 5.0) -> None:
        self.plugin = plugin
        self._acls: Callable[[], Mapping[Any, Any]] = dict
        self._loaded: object = None
        self._runner = PluginRunner("authorizer", timeout_s) if plugin is not None else None

    @classmethod
    def from_config(cls, config: Mapping[str, Any], originals: Mapping[str, str]) -> Authorization:
        """Load `authorizer.class.name` (ConfigError, exit 2, if it cannot be loaded)."""
        spec = authorizer_spec(config)
        if not spec:
            return cls(None)
        if spec == KAFKA_CLASS_NAME:
            spec = BUILT_IN
        plugin = load_plugin(CLASS_KEY, spec, plugin_configs(config, originals))
        timeout_s = config["authorizer.call.timeout.ms"] / 1000
        return cls(plugin, timeout_s)  # type: ignore[arg-type]

    def use_acls(self, acls: Callable[[], Mapping[Any, Any]]) -> None:
        """Where the ACLs in force come from (the controller's image), for an AclAuthorizer."""
        self._acls = acls

    @property
    def enabled(self) -> bool:
        return self.plugin is not None

    @property
    def manages_acls(self) -> bool:
        """Whether the ACL APIs are served (the authorizer takes the metadata log's ACLs)."""
        return isinstance(self.plugin, AclAuthorizer)

    def start(self, cluster_id: str, node_id: int, invalidate: Callable[[], None]) -> None:
        """The plugin's `start`, on its thread; an authorizer that cannot start (raises or
        takes longer than its timeout) stops start-up like one that cannot load (exit 2)."""
        if self.plugin is None or self._runner is None:
            return
        context = AuthorizerContext(cluster_id, node_id, invalidate)
        try:
            self._runner.submit(self.plugin.start, context).result(self._runner.timeout_s)
        except Exception as error:
            problem = f"{type(error).__name__}: {' '.join(str(error).split())}"
            raise ConfigError(
                CLASS_KEY, f"{type(self.plugin).__name__}.start failed: {problem}"
            ) from error

    def close(self) -> None:
        if self.plugin is not None and self._runner is not None:
            self._runner.close(self.plugin.close)

    def authorize_blocking(
        self, context: AuthorizableRequestContext, actions: Sequence[Action]
    ) -> list[bool] | None:
        """One decision per action, or None if the plugin failed (deny, do not cache). Blocks
        the calling thread (never the event loop) while the plugin's thread works."""
        if self.plugin is None or self._runner is None:
            return [True] * len(actions)
        if not actions:
            return []
        return self._runner.call("authorize", None, self._authorize, context, actions)

    def _authorize(
        self, context: AuthorizableRequestContext, actions: Sequence[Action]
    ) -> list[bool]:
        """On the plugin's thread: hand it the ACLs if they changed, then ask."""
        plugin = self.plugin
        acls = self._acls()
        if isinstance(plugin, AclAuthorizer) and acls is not self._loaded:
            plugin.load_acls(acls)
            self._loaded = acls
        assert plugin is not None
        named = [a for a in actions if a.resource.pattern_type != PatternType.ANY]
        answers = iter(plugin.authorize(context, named) if named else [])
        # Kafka's authorizeByResourceType; an authorizer without it allows nothing so.
        by_resource_type = getattr(plugin, "authorize_by_resource_type", None)
        results = [
            next(answers, None)
            if action.resource.pattern_type != PatternType.ANY
            else AuthorizationResult.DENIED
            if by_resource_type is None
            else by_resource_type(context, action.operation, action.resource.resource_type)
            for action in actions
        ]
        if next(answers, None) is not None:
            raise _Failed(f"answered more results than the {len(named)} actions asked")
        if len(results) != len(actions) or not all(
            isinstance(r, AuthorizationResult) for r in results
        ):
            raise _Failed(f"answered {results!r} for {len(actions)} actions")
        return [r == AuthorizationResult.ALLOWED for r in results]

    def core_callback(
        self,
        principal: str,
        listener_name: str,
        security_protocol: str,
        client_host: str,
        client_id: str | None,
        api_key: int,
        api_version: int,
        actions: Sequence[CoreAction],
    ) -> list[bool] | None:
        """What the core calls on its authorizer thread on a cache miss."""
        context = AuthorizableRequestContext(
            principal,
            listener_name,
            security_protocol,
            client_host,
            client_id,
            api_key,
            api_version,
        )
        try:
            decoded = [
                Action(
                    AclOperation(op),
                    ResourcePattern(ResourceType(rtype), name, PatternType(pattern)),
                )
                for op, rtype, pattern, name in actions
            ]
        except ValueError as error:
            log.error("the core asked about an action krust does not know: %s", error)
            return None
        return self.authorize_blocking(context, decoded)

    async def allowed_names(
        self,
        request: RequestContext,
        operation: AclOperation,
        resource_type: ResourceType,
        names: Iterable[str],
    ) -> set[str]:
        """The names of the resources `request`'s principal may do `operation` on."""
        wanted = list(dict.fromkeys(names))
        if self.plugin is None or request.internal or not wanted:
            return set(wanted)
        actions = [Action(operation, ResourcePattern(resource_type, name)) for name in wanted]
        results = await asyncio.to_thread(self.authorize_blocking, _context(request), actions)
        if results is None:
            return set()
        return {name for name, ok in zip(wanted, results, strict=True) if ok}

    async def allowed(
        self,
        request: RequestContext,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str = CLUSTER_NAME,
    ) -> bool:
        return name in await self.allowed_names(request, operation, resource_type, [name])

    async def authorized_operations(
        self, request: RequestContext, resource_type: ResourceType, name: str
    ) -> int:
        """KIP-430: the operations the principal may perform on the resource, as a bit field;
        every supported operation without an authorizer, as Kafka answers."""
        supported = SUPPORTED_OPERATIONS[resource_type]
        if self.plugin is None or request.internal:
            return bitfield(supported)
        actions = [
            Action(op, ResourcePattern(resource_type, name), False, False) for op in supported
        ]
        results = await asyncio.to_thread(self.authorize_blocking, _context(request), actions)
        return bitfield(op for op, ok in zip(supported, results or [], strict=False) if ok)


def _context(request: RequestContext) -> AuthorizableRequestContext:
    return AuthorizableRequestContext(
        principal=request.principal,
        listener_name=request.listener_name,
        security_protocol=request.security_protocol,
        client_address=request.client_host,
        client_id=request.client_id,
        request_type=request.api_key,
        request_version=request.api_version,
    )


__all__ = ["Authorization", "StandardAuthorizer", "bitfield"]
