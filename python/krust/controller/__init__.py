"""The controller: KIP-631 metadata records in `__cluster_metadata`, the metadata image they
replay into, and the topic and producer-id operations that append them."""

from krust.controller.controller import Controller, TopicCreationError, install
from krust.controller.image import BrokerImage, MetadataImage, PartitionImage, TopicImage

__all__ = [
    "BrokerImage",
    "Controller",
    "MetadataImage",
    "PartitionImage",
    "TopicCreationError",
    "TopicImage",
    "install",
]
