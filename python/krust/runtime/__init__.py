"""The broker process: CLI, start-up and shutdown, the services installed before and after the
port opens, logging, the lifecycle of a broker-only node. Not here: what services plug into
(krust.bridge), what a service decides (controller, group, transaction, security), the config."""
