"""Client metrics (KIP-714): which subscriptions a client matches and when it may push
(`manager`), what it pushed as Prometheus text (`exposition`), and the two apis over both
(`service`, installed by `install`). The subscriptions themselves are config resources of the
controller (krust.controller.client_metrics_configs); the plugin API is krust.plugins.telemetry.
"""
