"""The controller: KIP-631 metadata records in `__cluster_metadata`, the metadata image they
replay into, and the operations that append them (their APIs: krust.controller.apis)."""

from krust.controller.controller import Controller, TopicCreationError
from krust.controller.image import BrokerImage, MetadataImage, PartitionImage, TopicImage

__all__ = [
    "BrokerImage",
    "Controller",
    "MetadataImage",
    "PartitionImage",
    "TopicCreationError",
    "TopicImage",
]
