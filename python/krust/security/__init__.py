"""Who may connect and do what: SASL/PLAIN callbacks, the authorizer, connection limits and the
client quota callback, as services of the broker. Not here: the security config keys
(krust.config.listeners) nor the plugin API users implement (krust.plugins)."""
