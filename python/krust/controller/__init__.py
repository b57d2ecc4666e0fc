"""The controller: KIP-631 metadata records in `__cluster_metadata`, the image they replay into,
the state machine that appends them and its APIs. Not here: a broker's registration with it
(krust.runtime.lifecycle_manager). Imports none of its modules (docs: "Start-up order")."""
