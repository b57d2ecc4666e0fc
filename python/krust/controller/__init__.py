"""The controller: KIP-631 metadata records in `__cluster_metadata` (`records`), the metadata
image they replay into (`image`, `publisher`), the state machine that appends them
(`controller`) and its APIs (`apis`).

Importing the package imports none of them: start-up imports only what replaying the log
needs before the port opens (docs/python-services.md, "Start-up order")."""
