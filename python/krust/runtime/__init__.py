"""The broker process and what every service plugs into: CLI, start-up and shutdown, logging, the
bridge (dispatcher, routes, kio glue), the context services install with, the controller channel.
Not here: what a service decides (controller, group, transaction, security) nor the config."""
