"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs for topics, brokers, groups and client
metrics subscriptions (KIP-714), as
Kafka 4 answers them (ConfigHelper, ConfigAdminManager, ConfigurationControlManager and
ControllerConfigurationValidator). See docs/config.md.

A change is ConfigRecords in the metadata log, durable before the answer; the core applies a
topic's new configs, or new broker defaults of every topic, to the live partitions.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from krust.bridge.dispatcher import RequestContext
from krust.bridge.protocol import make_response
from krust.bridge.routes import Exposure
from krust.config.table import BROKER_KEYS, GROUP_KEYS, TOPIC_KEYS, ConfigKey, ConfigType
from krust.controller import client_metrics_configs, group_configs
from krust.controller.broker_configs import (
    LIVE_KEYS,
    BrokerConfigChangeError,
    Source,
    Synonym,
    validate_broker_change,
)
from krust.controller.records import ConfigRecord, MetadataRecord
from krust.controller.topic_configs import (
    TopicConfigError,
    effective_topic_configs,
    validate_topic_configs,
)
from krust.controller.topics import topic_name_problem
from krust.plugins.authorizer import CLUSTER_NAME, AclOperation
from krust.plugins.authorizer import ResourceType as AclResource

if TYPE_CHECKING:
    from krust.controller.controller import Controller

DESCRIBE_CONFIGS = 32
ALTER_CONFIGS = 33
INCREMENTAL_ALTER_CONFIGS = 44


class ResourceType(enum.IntEnum):
    """Kafka's ConfigResource.Type ids."""

    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32


class OpType(enum.IntEnum):
    """Kafka's AlterConfigOp.OpType ids."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


# Kafka's DescribeConfigsResponse.ConfigType ids.
_CONFIG_TYPE_IDS = {
    ConfigType.BOOLEAN: 1,
    ConfigType.STRING: 2,
    ConfigType.INT: 3,
    ConfigType.SHORT: 4,
    ConfigType.LONG: 5,
    ConfigType.DOUBLE: 6,
    ConfigType.LIST: 7,
    ConfigType.PASSWORD: 9,
}
_KEYS = {
    ResourceType.TOPIC: {key.name: key for key in TOPIC_KEYS},
    ResourceType.BROKER: {key.name: key for key in BROKER_KEYS},
    ResourceType.GROUP: {key.name: key for key in GROUP_KEYS},
    ResourceType.CLIENT_METRICS: client_metrics_configs.KEYS,
}


Plan = Callable[[Any, Mapping[str, str]], dict[str, str]]
"""A request's resource and its current dynamic configs in, its new dynamic configs out."""

# Dispatcher.register: (api key, min version, max version, handler, exposure=...).
Register = Callable[..., None]


class ConfigApiError(Exception):
    """One resource's failure: its Kafka error code and message."""

    def __init__(self, error: ErrorCode, message: str | None) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


def _invalid_request(message: str) -> ConfigApiError:
    return ConfigApiError(ErrorCode.invalid_request, message)


def _invalid_config(message: str) -> ConfigApiError:
    return ConfigApiError(ErrorCode.invalid_config, message)


@dataclass(frozen=True)
class Entry:
    """One described config."""

    key: ConfigKey
    value: str | None
    source: Source
    read_only: bool
    synonyms: Sequence[Synonym]

    def as_response(self, include_synonyms: bool, include_documentation: bool) -> dict[str, Any]:
        sensitive = self.key.type is ConfigType.PASSWORD
        synonyms = self.synonyms if include_synonyms and not sensitive else ()
        return {
            "name": self.key.name,
            # Kafka never describes a PASSWORD's value (ConfigDef.Type.PASSWORD is sensitive).
            "value": None if sensitive else self.value,
            "read_only": self.read_only,
            "config_source": self.source,
            "is_sensitive": sensitive,
            "synonyms": [{"name": s.name, "value": s.value, "source": s.source} for s in synonyms],
            "config_type": _CONFIG_TYPE_IDS[self.key.type],
            "documentation": self.key.doc if include_documentation else None,
        }


def _resource_type(raw: int) -> ResourceType:
    try:
        return ResourceType(raw)
    except ValueError:
        return ResourceType.UNKNOWN


def _broker_id(name: str, node_id: int, registered: Collection[int]) -> None:
    """The resource name must be a registered broker's id. Kafka's broker checks that it is
    its own (validateResourceNameIsCurrentNodeId) before forwarding the request to the
    controller; forwarded here, it may be any broker's."""
    try:
        broker_id = int(name)
    except ValueError:
        raise _invalid_request(f"Node id must be an integer, but it is: {name}") from None
    if broker_id != node_id and broker_id not in registered:
        raise _invalid_request(f"Unexpected broker id, expected {node_id}, but received {name}")


def _check_topic_name(name: str) -> None:
    """Kafka's Topic.validate: an illegal name is INVALID_TOPIC_EXCEPTION."""
    problem = topic_name_problem(name)
    if problem:
        raise ConfigApiError(ErrorCode.invalid_topic_exception, problem)


class ConfigAdmin:
    """The three config APIs over the controller's image and metadata log."""

    def __init__(self, controller: Controller) -> None:
        self._controller = controller

    # DescribeConfigs (Kafka's ConfigHelper.describeConfigs).

    async def _authorize(
        self, context: RequestContext, operation: AclOperation, resource: Any
    ) -> None:
        """As Kafka's ConfigHelper/ConfigAdminManager: DESCRIBE_CONFIGS or ALTER_CONFIGS on the
        topic or group, or on the cluster for broker resources; ConfigApiError if refused."""
        code = resource.resource_type
        if code == ResourceType.TOPIC:
            target = (AclResource.TOPIC, resource.resource_name)
            refusal = ErrorCode.topic_authorization_failed
        elif code == ResourceType.GROUP:
            target = (AclResource.GROUP, resource.resource_name)
            refusal = ErrorCode.group_authorization_failed
        elif code in (ResourceType.BROKER, ResourceType.BROKER_LOGGER, ResourceType.CLIENT_METRICS):
            target = (AclResource.CLUSTER, CLUSTER_NAME)
            refusal = ErrorCode.cluster_authorization_failed
        else:
            return
        authorization = self._controller.authorization
        if not await authorization.allowed(context, operation, *target):
            raise ConfigApiError(refusal, None)

    async def describe_configs(self, request: Any, context: RequestContext) -> Any:
        # v1-v2 have no include_documentation.
        documentation = getattr(request, "include_documentation", False)
        results = []
        for resource in request.resources:
            result: dict[str, Any] = {
                "resource_type": resource.resource_type,
                "resource_name": resource.resource_name,
            }
            try:
                await self._authorize(context, AclOperation.DESCRIBE_CONFIGS, resource)
                entries = self._entries(_resource_type(resource.resource_type), resource)
            except ConfigApiError as error:
                result.update(error_code=error.error, error_message=error.message, configs=[])
            else:
                result["configs"] = [
                    entry.as_response(request.include_synonyms, documentation) for entry in entries
                ]
            results.append(result)
        return make_response(DESCRIBE_CONFIGS, context.api_version, {"results": results})

    def _entries(self, resource_type: ResourceType, resource: Any) -> list[Entry]:
        name = resource.resource_name
        if resource_type is ResourceType.TOPIC:
            entries = self._topic_entries(name)
        elif resource_type is ResourceType.BROKER:
            entries = self._broker_entries(name)
        elif resource_type is ResourceType.GROUP:
            if not name:
                raise _invalid_request("Group name must not be empty")
            entries = self._group_entries(name)
        elif resource_type is ResourceType.CLIENT_METRICS:
            if not name:
                raise _invalid_request("Client metrics subscription name must not be empty")
            entries = self._client_metrics_entries(name)
        else:
            raise _invalid_request(f"Unsupported resource type: {resource_type.name}")
        wanted = resource.configuration_keys
        return [e for e in entries if not wanted or e.key.name in wanted]

    def _group_entries(self, name: str) -> list[Entry]:
        """Kafka's: a group's own value (GROUP_CONFIG), else the default, which for the keys
        that act is the broker's value of the key they override."""
        own = self._controller.image.group_configs.get(name, {})
        broker = self._controller.broker_config()
        entries = []
        for key in GROUP_KEYS:
            broker_key = group_configs.BROKER_KEYS.get(key.name)
            default = str(broker[broker_key]) if broker_key is not None else key.default
            synonyms = [Synonym(key.name, default, Source.DEFAULT_CONFIG)]
            value = own.get(key.name)
            if value is None:
                entries.append(Entry(key, default, Source.DEFAULT_CONFIG, False, synonyms))
            else:
                synonyms.insert(0, Synonym(key.name, value, Source.GROUP_CONFIG))
                entries.append(Entry(key, value, Source.GROUP_CONFIG, False, synonyms))
        return entries

    def _client_metrics_entries(self, name: str) -> list[Entry]:
        """Kafka's: every key, the subscription's own value (CLIENT_METRICS_CONFIG) or the
        default; a subscription that does not exist describes as all defaults."""
        own = self._controller.image.client_metrics.get(name, {})
        entries = []
        for key in client_metrics_configs.KEYS.values():
            value = own.get(key.name)
            if value is None:
                entries.append(_default_entry(key))
            else:
                synonym = Synonym(key.name, value, Source.CLIENT_METRICS_CONFIG)
                entries.append(Entry(key, value, Source.CLIENT_METRICS_CONFIG, False, (synonym,)))
        return entries

    def _topic_entries(self, name: str) -> list[Entry]:
        _check_topic_name(name)
        topic = self._controller.image.topics.get(name)
        if topic is None:
            raise ConfigApiError(ErrorCode.unknown_topic_or_partition, None)
        keys = _KEYS[ResourceType.TOPIC]
        return [
            Entry(keys[c.name], c.value, c.source, False, c.synonyms)
            for c in effective_topic_configs(topic.configs, self._controller.broker_config())
        ]

    def _broker_entries(self, name: str) -> list[Entry]:
        broker = self._controller.broker_config()
        node_id = self._controller.image.node_id
        if name:
            try:
                requested = int(name)
            except ValueError:
                raise _invalid_request(f"Broker id must be an integer, but it is: {name}") from None
            if requested != node_id:
                raise _invalid_request(
                    f"Unexpected broker id, expected {node_id} or empty string, but received {name}"
                )
        entries = []
        for key in BROKER_KEYS:
            if not name and key.name not in broker.cluster_default:
                continue  # the default resource lists only what was set cluster-wide
            synonyms = broker.synonyms(key.name)
            # Kafka drops the family members of higher precedence than the key itself.
            while synonyms and synonyms[0].name != key.name:
                synonyms.pop(0)
            if not name:
                synonyms = [s for s in synonyms if s.source is Source.DYNAMIC_DEFAULT_BROKER_CONFIG]
            first = synonyms[0] if synonyms else None
            entries.append(
                Entry(
                    key=key,
                    value=first.value if first else None,
                    source=first.source if first else Source.DEFAULT_CONFIG,
                    read_only=key.name not in LIVE_KEYS,
                    synonyms=synonyms,
                )
            )
        return entries

    # AlterConfigs and IncrementalAlterConfigs (Kafka's ConfigAdminManager.preprocess, then
    # ConfigurationControlManager on the controller).

    async def alter_configs(self, request: Any, context: RequestContext) -> Any:
        def plan(resource: Any, current: Mapping[str, str]) -> dict[str, str]:
            nulls = [c.name for c in resource.configs if c.value is None]
            if nulls:
                raise _invalid_request(f"Null value not supported for : {', '.join(nulls)}")
            return {c.name: c.value for c in resource.configs}

        return await self._alter(ALTER_CONFIGS, request, context, plan)

    async def incremental_alter_configs(self, request: Any, context: RequestContext) -> Any:
        def plan(resource: Any, current: Mapping[str, str]) -> dict[str, str]:
            nulls = [
                c.name
                for c in resource.configs
                if c.value is None and c.config_operation != OpType.DELETE
            ]
            if nulls:
                raise _invalid_request(f"Null value not supported for : {', '.join(nulls)}")
            keys = _KEYS.get(_resource_type(resource.resource_type), {})
            configs = dict(current)
            for config in resource.configs:
                _apply_op(configs, config, keys.get(config.name))
            return configs

        return await self._alter(INCREMENTAL_ALTER_CONFIGS, request, context, plan)

    async def _alter(self, api_key: int, request: Any, context: RequestContext, plan: Plan) -> Any:
        controller = self._controller
        seen: dict[tuple[int, str], int] = {}
        for resource in request.resources:
            ident = (resource.resource_type, resource.resource_name)
            seen[ident] = seen.get(ident, 0) + 1
        refused: dict[int, ConfigApiError] = {}
        for index, resource in enumerate(request.resources):
            try:
                await self._authorize(context, AclOperation.ALTER_CONFIGS, resource)
            except ConfigApiError as error:
                refused[index] = error
        responses = []
        async with controller.lock:
            records: list[MetadataRecord] = []
            for index, resource in enumerate(request.resources):
                response: dict[str, Any] = {
                    "resource_type": resource.resource_type,
                    "resource_name": resource.resource_name,
                }
                try:
                    if index in refused:
                        raise refused[index]
                    if seen[(resource.resource_type, resource.resource_name)] > 1:
                        raise _invalid_request("Each resource must appear at most once.")
                    names = [c.name for c in resource.configs]
                    if len(set(names)) != len(names):
                        raise _invalid_request("Error due to duplicate config keys")
                    records += self._plan_resource(resource, plan)
                except ConfigApiError as error:
                    response.update(error_code=error.error, error_message=error.message)
                responses.append(response)
            if records and not request.validate_only:
                await controller.commit(records)
        return make_response(api_key, context.api_version, {"responses": responses})

    def _plan_resource(self, resource: Any, plan: Plan) -> list[ConfigRecord]:
        """The ConfigRecords of one resource's change, or ConfigApiError."""
        resource_type = _resource_type(resource.resource_type)
        name = resource.resource_name
        image = self._controller.image
        if resource_type is ResourceType.TOPIC:
            if not name:
                raise _invalid_request("Default topic resources are not allowed.")
            _check_topic_name(name)
            current = image.topics[name].configs if name in image.topics else {}
        elif resource_type is ResourceType.BROKER:
            if name:
                _broker_id(name, image.node_id, image.brokers.keys())
            current = image.broker_configs.get(name, {})
        elif resource_type is ResourceType.GROUP:
            if not name:
                raise _invalid_request("Default group resources are not allowed.")
            current = image.group_configs.get(name, {})
        elif resource_type is ResourceType.CLIENT_METRICS:
            current = image.client_metrics.get(name, {})
        else:
            raise _invalid_request(f"Unknown resource type {resource.resource_type}")
        new = plan(resource, current)
        changed = {n for n in set(new) | set(current) if new.get(n) != current.get(n)}
        if resource_type is ResourceType.TOPIC:
            self._validate_topic(name, new)
        elif resource_type is ResourceType.BROKER:
            try:
                changes = {n for n in changed if n in new}
                current = self._controller.broker_config()
                validate_broker_change(name, new, changes, current)
            except BrokerConfigChangeError as error:
                make = _invalid_config if error.invalid_config else _invalid_request
                raise make(str(error)) from None
        elif resource_type is ResourceType.CLIENT_METRICS:
            try:
                client_metrics_configs.validate(name, new, current)
            except client_metrics_configs.ClientMetricsConfigError as error:
                make = _invalid_config if error.invalid_config else _invalid_request
                raise make(str(error)) from None
        else:
            _check_group_configs(new, self._controller.broker_config())
        return [
            ConfigRecord(
                resource_type=int(resource_type), resource_name=name, name=n, value=new.get(n)
            )
            for n in sorted(changed)
        ]

    def _validate_topic(self, name: str, configs: Mapping[str, str]) -> None:
        try:
            validate_topic_configs(configs, self._controller.broker_config())
        except TopicConfigError as error:
            raise _invalid_config(str(error)) from None
        if name not in self._controller.image.topics:
            raise ConfigApiError(
                ErrorCode.unknown_topic_or_partition, f"The topic '{name}' does not exist."
            )


def _default_entry(key: ConfigKey) -> Entry:
    synonym = Synonym(key.name, key.default, Source.DEFAULT_CONFIG)
    return Entry(key, key.default, Source.DEFAULT_CONFIG, False, (synonym,))


def _apply_op(configs: dict[str, str], config: Any, key: ConfigKey | None) -> None:
    """One IncrementalAlterConfigs operation on a resource's dynamic configs (Kafka's
    ConfigurationControlManager.incrementalAlterConfigResource)."""
    try:
        op = OpType(config.config_operation)
    except ValueError:
        raise _invalid_request(f"Unknown operations type {config.config_operation}") from None
    name = config.name
    if op is OpType.SET:
        configs[name] = config.value
    elif op is OpType.DELETE:
        configs.pop(name, None)
    else:
        if key is None or key.type is not ConfigType.LIST:
            raise _invalid_config(f"Can't {op.name} to key {name} because its type is not LIST.")
        current = configs.get(name, key.default or "")
        items = [item for item in current.split(",") if item]
        for item in config.value.split(","):
            if op is OpType.APPEND and item not in items:
                items.append(item)
            elif op is OpType.SUBTRACT and item in items:
                items.remove(item)
        configs[name] = ",".join(items)


def _check_group_configs(configs: Mapping[str, str], broker: Mapping[str, Any]) -> None:
    keys = _KEYS[ResourceType.GROUP]
    for name in sorted(configs):
        key = keys.get(name)
        if key is None:
            raise _invalid_config(f"Unknown group config name: {name}")
        if key.refused:
            raise _invalid_config(f"krust does not honour group config {name}: {key.refused}")
    try:
        group_configs.validate(configs, broker)
    except group_configs.GroupConfigError as refused:
        raise _invalid_config(str(refused)) from None


def install(controller: Controller, register: Register) -> ConfigAdmin:
    """Route the three config APIs (the versions Kafka 4 serves) to a ConfigAdmin."""
    admin = ConfigAdmin(controller)
    register(DESCRIBE_CONFIGS, 1, 4, admin.describe_configs)
    register(ALTER_CONFIGS, 0, 2, admin.alter_configs, exposure=Exposure.FORWARDED)
    register(
        INCREMENTAL_ALTER_CONFIGS,
        0,
        1,
        admin.incremental_alter_configs,
        exposure=Exposure.FORWARDED,
    )
    return admin
