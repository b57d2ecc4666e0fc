"""What every Python service plugs into: the bridge's dispatcher and request context, the route
table, kio glue, the core as services see it, the context they install with, the controller
channel. Not here: the process that wires them (krust.runtime) nor what a service decides."""
