"""Wires the Rust core, the controller and the services to the bridge, and serves until a signal.

Start-up order (docs/python-services.md): the core, then the metadata replayed into the image
the core serves from (`controller.startup`), then the port. The Python services (the services'
event loop and dispatcher, the controller, the authorizer, the coordinators) are built after
the port opens, with their apis advertised and their requests held until then, unless the node
needs them to listen: a node of a quorum of several voters registers with the active controller
first, and a configured plugin (authorizer, SASL/PLAIN callback, client quota callback, metric
reporter) must
load, or stop start-up with exit 2, before anything is served."""

from __future__ import annotations

import inspect
import logging
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import TYPE_CHECKING, Any

from krust.bridge.routes import CoreRoutes, RequestGate
from krust.config import configured_plugins
from krust.config.broker import BrokerConfig, core_settings
from krust.config.errors import ConfigError
from krust.controller.meta_properties import format_node
from krust.runtime import deferred_services

if TYPE_CHECKING:
    from krust import _core
    from krust.bridge.context import BrokerContext
    from krust.bridge.dispatcher import Dispatcher
    from krust.controller.publisher import MetadataPublisher
    from krust.security.authorization import Authorization

SERVICE_CLOSE_TIMEOUT_S = 5.0
# A controlled shutdown gives up after this (Kafka's waits on its request timeouts too).
PREPARE_SHUTDOWN_TIMEOUT_S = 35.0
STOPPING_THREAD = "krust-stopping"
SERVICES_THREAD = "krust-services-install"
log = logging.getLogger(__name__)


# What `PythonServices.start` imports: read through `deferred_services.import_modules` first
# when it runs after the port opened, so running out of file descriptors there is retried.
SERVICE_MODULES = (
    "krust.security.authentication",
    "krust.security.authorization",
    "krust.bridge.dispatcher",
    "krust.bridge.context",
    "krust.controller.controller",
    "krust.security.quota_callback",
    "krust.telemetry.install",
)


def _installers() -> list[deferred_services.Installer]:
    """The services that load user plugins, installed with the dispatcher: a plugin that
    cannot load stops start-up with exit 2."""
    from krust.security import authentication, quota_callback
    from krust.telemetry import install as telemetry

    return [authentication.install, quota_callback.install, telemetry.install]


def needs_python_before_port(config: BrokerConfig) -> bool:
    """Whether the services must be in place before the port opens (see the module's doc)."""
    return bool(config["controller.quorum.voters"]) or configured_plugins.any_configured(config)


def run(config: BrokerConfig, on_ready: Callable[[], None] = lambda: None) -> None:
    """Open the core, replay the metadata log, serve until SIGINT/SIGTERM with the services
    installed before or after the port opens (`on_ready` runs once every listener is bound);
    then stop the services' loop and close the core
    (flush, checkpoints)."""
    from krust import _core  # the extension; imported here so config and controller need it not

    early = needs_python_before_port(config)
    # A plugin that cannot be loaded stops start-up before any log dir is opened.
    authorization = _load_authorization(config) if early else None
    opening = _NodeOpening(config, _core.Core)
    opening.start()
    # The metadata replay's modules are imported while the other thread waits on the disk.
    from krust.controller.startup import open_metadata

    core, cluster_id = opening.result()
    python = PythonServices(config, core)
    loading: _ServicesLoading | None = None
    try:
        publisher = open_metadata(config, core, cluster_id)
        if early:
            python.start(publisher, authorization)
            routes = python.core_routes()
        else:
            routes = deferred_services.core_routes(config)
        loading = _ServicesLoading(python, publisher, routes, core.shutdown)
        with _shutdown_on_signals(lambda: python.stop_gracefully(core.shutdown)):
            loading.start()
            loading.serving()
            core.serve(
                python.gate.submit,
                routes,
                authorize=(
                    authorization.core_callback
                    if authorization is not None and authorization.enabled
                    else None
                ),
                on_listening=on_ready,
            )
        loading.finish()
    finally:
        log.info("closing the services, then flushing the logs and writing checkpoints")
        if loading is not None:
            loading.join()
        python.close()
        if authorization is not None:
            authorization.close()
        core.close()


class _NodeOpening:
    """On a thread of its own: the core (log dirs locked, logs recovered), then the log dirs'
    meta.properties checked or written. Both wait on the disk more than they compute, so the
    start-up thread imports the metadata replay's modules meanwhile."""

    def __init__(self, config: BrokerConfig, open_core: Callable[[Any], _core.Core]) -> None:
        self._config, self._open_core = config, open_core
        self._core: _core.Core | None = None
        self._cluster_id = ""
        self._failure: BaseException | None = None
        self._thread = threading.Thread(target=self._open, name="krust-opening", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _open(self) -> None:
        try:
            try:
                self._core = self._open_core(core_settings(self._config))
            except ValueError as error:
                # The core's checks of settings (TLS material, mapping rules) name the key.
                raise ConfigError(None, str(error)) from None
            self._cluster_id = format_node(self._config)
        except BaseException as error:
            self._failure = error

    def result(self) -> tuple[_core.Core, str]:
        """The core and the cluster id; raises what the thread could not do (closing a core
        it opened)."""
        self._thread.join()
        if self._failure is not None:
            if self._core is not None:
                self._core.close()
            raise self._failure
        assert self._core is not None
        return self._core, self._cluster_id


def _load_authorization(config: BrokerConfig) -> Authorization:
    from krust.security.authorization import Authorization

    return Authorization.from_config(config, config.originals())


class PythonServices:
    """The services' dispatcher and event loop, the controller and the services installed on
    them, and the gate that holds the core's requests for them until they exist."""

    def __init__(self, config: BrokerConfig, core: _core.Core) -> None:
        self.config, self.core = config, core
        self.gate = RequestGate()
        self.installed: list[object] = []
        self.dispatcher: Dispatcher | None = None
        self.ctx: BrokerContext | None = None
        self._authorization: Authorization | None = None

    def start(self, publisher: MetadataPublisher, authorization: Authorization | None) -> None:
        """Build the dispatcher and the controller (and the authorizer, when not given),
        reserve every deferred api and install the services that must be there as soon as the
        dispatcher is: the plugins' services, and a cluster node's controller apis and
        lifecycle manager (`deferred_services.before_port`; none on a node that starts its
        services after the port). `open_gate` then passes the core's requests on."""
        from krust.bridge.context import BrokerContext
        from krust.bridge.dispatcher import Dispatcher
        from krust.controller.controller import Controller

        if authorization is None:
            authorization = self._authorization = _load_authorization(self.config)
        core = self.core
        controller = Controller(self.config, core, publisher)
        controller.authorization = authorization
        authorization.use_acls(lambda: controller.image.acls)
        image = controller.image
        authorization.start(
            image.cluster_id, image.node_id, lambda: core.invalidate_authorizations()
        )
        self.dispatcher = Dispatcher(core.charge_request_time)
        self.ctx = ctx = BrokerContext(
            config=self.config,
            core=core,
            controller=controller,
            dispatcher=self.dispatcher,
            authorization=authorization,
        )
        deferred_services.reserve(ctx)
        deferred_services.install(ctx, deferred_services.before_port(self.config), self.installed)
        # One by one, so that those installed are closed if a later one fails.
        for install in _installers():
            self.installed.append(install(ctx))

    def core_routes(self) -> CoreRoutes:
        """The route table as the dispatcher has it (fixed from then on)."""
        assert self.dispatcher is not None, "start() first"
        return self.dispatcher.core_routes()

    def open_gate(self) -> None:
        assert self.dispatcher is not None, "start() first"
        self.gate.open(self.dispatcher.submit)

    def stop_gracefully(self, shutdown: Callable[[], None]) -> None:
        """Kafka's order: while still serving, let services prepare (the controlled shutdown
        moves this broker's leaderships away), then stop serving. Runs on its own thread, so
        the signal handler returns at once; a second signal stops at once."""
        dispatcher, installed = self.dispatcher, self.installed

        def prepare_then_stop() -> None:
            for service in list(installed):
                prepare = getattr(service, "prepare_shutdown", None)
                if prepare is None or dispatcher is None:
                    continue
                try:
                    dispatcher.run(prepare(), timeout=PREPARE_SHUTDOWN_TIMEOUT_S)
                except Exception as error:  # the stop goes on without it
                    log.error("preparing %s for shutdown failed: %s", type(service).__name__, error)
            shutdown()

        if any(thread.name == STOPPING_THREAD for thread in threading.enumerate()):
            shutdown()
            return
        threading.Thread(target=prepare_then_stop, name=STOPPING_THREAD, daemon=True).start()

    def close(self) -> None:
        """Let services that write to the core (the group coordinator's pending commits)
        finish before the core is closed, newest first; a service may offer `async close()`.
        Then stop the loop; requests still held get their connections closed."""
        dispatcher = self.dispatcher
        if dispatcher is not None:
            for service in reversed(self.installed):
                close = getattr(service, "close", None)
                if close is None or not inspect.iscoroutinefunction(close):
                    continue
                try:
                    dispatcher.run(close(), timeout=SERVICE_CLOSE_TIMEOUT_S)
                except Exception as error:  # a failing close must not keep the core from closing
                    log.error("closing %s failed: %s", type(service).__name__, error)
            dispatcher.close()
        self.gate.close()
        if self._authorization is not None:
            self._authorization.close()


class _ServicesLoading:
    """On a thread of its own while the core serves: builds the services if the port opened
    without them, then imports and installs the services deferred until after the port; if
    that fails the broker stops, and `finish` raises the failure as start-up would (a process
    out of file descriptors keeps trying, `deferred_services.install`)."""

    def __init__(
        self,
        python: PythonServices,
        publisher: MetadataPublisher,
        routes: CoreRoutes,
        stop: Callable[[], None],
    ) -> None:
        self._python, self._publisher, self._routes, self._stop = python, publisher, routes, stop
        self._failure: BaseException | None = None
        self._stopping = threading.Event()
        self._serving = threading.Event()
        self._thread = threading.Thread(target=self._load, name=SERVICES_THREAD, daemon=True)

    def start(self) -> None:
        """Start the thread; it waits for `serving` before it takes the GIL for long."""
        self._thread.start()

    def serving(self) -> None:
        """Called right before `core.serve`: from then on the start-up thread needs the GIL
        only briefly, so the imports here no longer hold up the port opening (a thread that
        asks for the GIL waits up to the switch interval, 5 ms, for it)."""
        self._serving.set()

    def _load(self) -> None:
        python = self._python
        self._serving.wait()
        try:
            if python.dispatcher is None:
                if deferred_services.import_modules(SERVICE_MODULES, self._stopping) is None:
                    return
                python.start(self._publisher, None)
                routes = python.core_routes()
                if routes != self._routes:
                    raise RuntimeError(f"the services route {routes}, the core {self._routes}")
            python.open_gate()
            assert python.ctx is not None
            modules = deferred_services.after_port(python.config)
            if deferred_services.install(python.ctx, modules, python.installed, self._stopping):
                deferred_services.check_all_installed(python.ctx)
        except BaseException as error:
            self._failure = error
            log.error("installing the services after the port opened failed, stopping: %s", error)
            self._stop()

    def join(self) -> None:
        self._stopping.set()
        self._serving.set()
        if self._thread.ident is not None:  # started
            self._thread.join()

    def finish(self) -> None:
        """Wait for the deferred services; raise what kept them from loading."""
        self.join()
        if self._failure is not None:
            raise self._failure


@contextmanager
def _shutdown_on_signals(shutdown: Callable[[], None]) -> Iterator[None]:
    """SIGINT and SIGTERM ask for a clean shutdown (exit status 0)."""

    def handle(_signum: int, _frame: FrameType | None) -> None:
        shutdown()

    previous: dict[int, Any] = {
        sig: signal.signal(sig, handle) for sig in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
