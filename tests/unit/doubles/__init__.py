"""Test doubles for krust's unit tests: in-memory stand-ins for the core, the controller, the clock
and the coordinators' clients. They live here, not in the wheel."""
