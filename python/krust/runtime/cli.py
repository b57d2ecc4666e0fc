"""`krust-broker`: load the configuration, run the broker until SIGTERM/SIGINT."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from krust import __version__
from krust.config.broker import ENV_PREFIX, BrokerConfig, load_config
from krust.config.errors import ConfigError
from krust.runtime import logs

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_CONFIG = 2

_EPILOG = f"""\
configuration:
  Keys are Kafka's broker config names (node.id, listeners, log.dirs, num.partitions, ...).
  Sources, each overriding the ones before it:
    1. built-in defaults: Kafka's, except node.id=1, process.roles=broker,controller,
       listeners=PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093 (the controller
       listener: kafka-metadata-quorum --bootstrap-controller), log.dir=./krust-data,
       offsets.topic.replication.factor=1 (a single node works out of the box)
    2. --config FILE (Java .properties syntax, like Kafka's server.properties)
    3. environment variables {ENV_PREFIX}<KEY>: the key in upper case with dots turned into
       underscores, e.g. {ENV_PREFIX}LOG_DIRS=/var/lib/krust sets log.dirs and
       {ENV_PREFIX}NUM_PARTITIONS=3 sets num.partitions. Every {ENV_PREFIX}* variable must
       name a key, except {ENV_PREFIX}LOG (the log levels when krust.log.level is not set)
       and {ENV_PREFIX}TEST_* (test tooling).
    4. --override key=value, in the order given
    5. --metrics-port, --log-format and --log-level: short for --override of
       krust.metrics.port, krust.log.format and krust.log.level
  An unknown key, a bad value or an unusable log directory stops start-up with one line
  on stderr and exit status 2.

exit status: 0 after a clean shutdown on SIGTERM/SIGINT, 1 if the broker cannot start or
fails, 2 on a configuration error.
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="krust-broker",
        description="A broker that speaks the Apache Kafka wire protocol.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help="read broker configuration from this .properties file",
    )
    parser.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set one configuration key, over every other source (repeatable)",
    )
    parser.add_argument(
        "--metrics-port",
        metavar="PORT",
        help="serve Prometheus metrics on this port at /metrics (krust.metrics.port)",
    )
    parser.add_argument(
        "--log-format",
        metavar="FORMAT",
        help="log lines as text (default) or json (krust.log.format)",
    )
    parser.add_argument(
        "--log-level",
        metavar="LEVELS",
        help="log levels, e.g. info,krust_server::network=debug (krust.log.level)",
    )
    parser.add_argument("--version", action="version", version=f"krust-broker {__version__}")
    return parser


# The flags that stand for one config key each.
_KEY_FLAGS = {
    "metrics_port": "krust.metrics.port",
    "log_format": logs.FORMAT_KEY,
    "log_level": logs.LEVEL_KEY,
}


def overrides(args: argparse.Namespace) -> list[str]:
    """--override pairs, then the key flags that were given (they win)."""
    given = [
        f"{key}={getattr(args, flag)}"
        for flag, key in _KEY_FLAGS.items()
        if getattr(args, flag) is not None
    ]
    return [*args.override, *given]


def startup_line(config: BrokerConfig) -> str:
    listeners = ", ".join(str(listener) for listener in config["listeners"])
    return (
        f"krust-broker {__version__}: node {config['node.id']} listening on {listeners}, "
        f"data in {', '.join(config['log.dirs'])}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        config = load_config(args.config, os.environ, overrides(args))
        logs.configure(config, os.environ)
    except ConfigError as error:
        return _fail(EXIT_CONFIG, f"configuration error: {error}")
    _hide_hypothesis()
    from krust.runtime import server

    try:
        server.run(config, on_ready=lambda: print(startup_line(config), flush=True))
    except ConfigError as error:
        return _fail(EXIT_CONFIG, f"configuration error: {error}")
    except BlockingIOError as error:
        # The core's log dir lock is held: another broker runs on the same log.dirs.
        return _fail(EXIT_CONFIG, str(error))
    except KeyboardInterrupt:
        return EXIT_OK
    except Exception as error:
        logging.getLogger("krust").debug("start-up failure", exc_info=True)
        return _fail(EXIT_FAILED, f"cannot run the broker: {type(error).__name__}: {error}")
    return EXIT_OK


def _hide_hypothesis() -> None:
    """kio, which the broker's modules import, registers hypothesis strategies wherever
    hypothesis is installed, and hypothesis then builds its unicode tables: ~3.5 s of CPU at
    every start and a .hypothesis/ folder in the working directory. A broker never uses them.
    (A process that has imported hypothesis already keeps it.)"""
    sys.modules.setdefault("hypothesis", None)  # type: ignore[arg-type]


def _fail(status: int, message: str) -> int:
    print(f"krust-broker: {' '.join(message.split())}", file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
