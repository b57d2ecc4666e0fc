"""The broker's configuration: the key table and its rows' parsing (`table`), the named checks,
the sources merged and resolved into a `BrokerConfig` (`broker`), listeners, roles and plugins.
Not here: what reads a key to act on it (the services), nor the config APIs (krust.controller)."""
