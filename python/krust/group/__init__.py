"""The group coordinator: groups and offsets in `__consumer_offsets`, their api handlers (api_*),
loading and migration; each group type's protocol in classic/ and consumer/. Not here: the shared
coordinator runtime (krust.coordinator). Imports nothing: config imports group.settings early."""
