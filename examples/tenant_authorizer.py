"""A multi-tenant authorizer: each principal may only touch the topics, groups and transactional
ids prefixed by its tenant (`User:acme` owns `acme.orders`, group `acme.billing`, ...).

Run the broker with it (the examples directory on PYTHONPATH):

    PYTHONPATH=examples krust-broker \\
        --override authorizer.class.name=tenant_authorizer:TenantAuthorizer \\
        --override tenant.separator=.  --override super.users=User:admin

`tenant.separator` is this plugin's own key (default "."); `super.users` (';'-separated) may do
anything. Decisions are cached by the broker per principal, host, operation and resource until
`context.invalidate()` is called: call it if the policy changes at run time.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from krust.plugins.authorizer import (
    AclOperation,
    Action,
    AuthorizableRequestContext,
    AuthorizationResult,
    AuthorizerContext,
    ResourceType,
)

# What any tenant may do on the cluster: look at it and produce idempotently.
CLUSTER_OPERATIONS = {AclOperation.DESCRIBE, AclOperation.IDEMPOTENT_WRITE}
OWNED = {ResourceType.TOPIC, ResourceType.GROUP, ResourceType.TRANSACTIONAL_ID}


class TenantAuthorizer:
    def configure(self, configs: Mapping[str, str]) -> None:
        self.separator = configs.get("tenant.separator", ".")
        self.super_users = {u for u in configs.get("super.users", "").split(";") if u}

    def start(self, context: AuthorizerContext) -> None:
        self.context = context

    def close(self) -> None:
        pass

    def authorize(
        self, context: AuthorizableRequestContext, actions: Sequence[Action]
    ) -> list[AuthorizationResult]:
        return [self._decide(context.principal, action) for action in actions]

    def _decide(self, principal: str, action: Action) -> AuthorizationResult:
        resource = action.resource
        tenant = principal.partition(":")[2]
        allowed = (
            principal in self.super_users
            or (
                resource.resource_type in OWNED
                and resource.name.startswith(tenant + self.separator)
            )
            or (
                resource.resource_type == ResourceType.CLUSTER
                and action.operation in CLUSTER_OPERATIONS
            )
        )
        return AuthorizationResult.ALLOWED if allowed else AuthorizationResult.DENIED
