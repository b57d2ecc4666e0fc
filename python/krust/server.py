"""Wires the Rust core, the controller and the services to the bridge, and serves until a signal."""

from __future__ import annotations

import inspect
import logging
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

from krust import authentication, deferred_services, quota_callback
from krust.authorization import Authorization
from krust.bridge import Dispatcher
from krust.config import BrokerConfig, ConfigError, core_settings
from krust.context import BrokerContext
from krust.controller.controller import Controller

Installer = Callable[[BrokerContext], object]
SERVICE_CLOSE_TIMEOUT_S = 5.0
# A controlled shutdown gives up after this (Kafka's waits on its request timeouts too).
PREPARE_SHUTDOWN_TIMEOUT_S = 35.0
STOPPING_THREAD = "krust-stopping"
SERVICES_THREAD = "krust-services-install"
log = logging.getLogger(__name__)

# Each service registers its APIs on ctx.dispatcher. These load user plugins (a plugin that
# cannot load stops start-up with exit 2) and are installed before the port opens; the others
# are installed after it (krust.deferred_services) with their apis reserved before it.
SERVICES: list[Installer] = [authentication.install, quota_callback.install]


def run(config: BrokerConfig, on_ready: Callable[[], None] = lambda: None) -> None:
    """Open the core, replay the metadata log, install the services, serve until
    SIGINT/SIGTERM; then stop the services' loop and close the core (flush, checkpoints)."""
    from krust import _core  # the extension; imported here so config and controller need it not

    # A plugin that cannot be loaded stops start-up before any log dir is opened.
    authorization = Authorization.from_config(config, config.originals())
    try:
        core = _core.Broker(core_settings(config))
    except ValueError as error:
        # The core's checks of settings (TLS material, mapping rules) name the key.
        raise ConfigError(None, str(error)) from None
    dispatcher = Dispatcher(core.charge_request_time)
    services: list[object] = []
    loading: _ServicesLoading | None = None
    try:
        metadata = Controller.open(config, core)
        metadata.authorization = authorization
        authorization.use_acls(lambda: metadata.image.acls)
        image = metadata.image
        authorization.start(
            image.cluster_id, image.node_id, lambda: core.invalidate_authorizations()
        )
        ctx = BrokerContext(
            config=config,
            core=core,
            controller=metadata,
            dispatcher=dispatcher,
            authorization=authorization,
        )
        deferred_services.reserve(ctx)
        deferred_services.install(ctx, deferred_services.before_port(config), services)
        # One by one, so that those installed are closed if a later one fails.
        for install in SERVICES:
            services.append(install(ctx))
        on_ready()
        routes = dispatcher.core_routes()
        loading = _ServicesLoading(ctx, services, core.shutdown)
        with _shutdown_on_signals(lambda: _stop_gracefully(dispatcher, services, core.shutdown)):
            loading.start()
            core.serve(
                dispatcher.submit,
                routes,
                authorize=authorization.core_callback if authorization.enabled else None,
            )
        loading.finish()
    finally:
        log.info("closing the services, then flushing the logs and writing checkpoints")
        if loading is not None:
            loading.join()
        if services:
            _close_services(dispatcher, services)
        dispatcher.close()
        authorization.close()
        core.close()


class _ServicesLoading:
    """Imports and installs the services deferred until after the port opens on a thread of
    its own while the core serves; if that fails the broker stops, and `finish` raises the
    failure as start-up would (a process out of file descriptors keeps trying,
    `deferred_services.install`)."""

    def __init__(
        self, ctx: BrokerContext, services: list[object], stop: Callable[[], None]
    ) -> None:
        self._ctx, self._services, self._stop = ctx, services, stop
        self._failure: BaseException | None = None
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._load, name=SERVICES_THREAD, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _load(self) -> None:
        try:
            modules = deferred_services.after_port(self._ctx.config)
            if deferred_services.install(self._ctx, modules, self._services, self._stopping):
                deferred_services.check_all_installed(self._ctx)
        except BaseException as error:
            self._failure = error
            log.error("installing the services after the port opened failed, stopping: %s", error)
            self._stop()

    def join(self) -> None:
        self._stopping.set()
        if self._thread.ident is not None:  # started
            self._thread.join()

    def finish(self) -> None:
        """Wait for the deferred services; raise what kept them from loading."""
        self.join()
        if self._failure is not None:
            raise self._failure


def _stop_gracefully(
    dispatcher: Dispatcher, services: list[object], shutdown: Callable[[], None]
) -> None:
    """Kafka's order: while still serving, let services prepare (the controlled shutdown moves
    this broker's leaderships away), then stop serving. Runs on its own thread, so the signal
    handler returns at once; a second signal stops at once."""

    def prepare_then_stop() -> None:
        for service in services:
            prepare = getattr(service, "prepare_shutdown", None)
            if prepare is None:
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


def _close_services(dispatcher: Dispatcher, services: list[object]) -> None:
    """Let services that write to the core (the group coordinator's pending commits) finish
    before the core is closed, newest first; a service may offer `async close()`."""
    for service in reversed(services):
        close = getattr(service, "close", None)
        if close is None or not inspect.iscoroutinefunction(close):
            continue
        try:
            dispatcher.run(close(), timeout=SERVICE_CLOSE_TIMEOUT_S)
        except Exception as error:  # a failing close must not keep the core from closing
            log.error("closing %s failed: %s", type(service).__name__, error)


@contextmanager
def _shutdown_on_signals(shutdown: Callable[[], None]) -> Iterator[None]:
    """SIGINT and SIGTERM ask for a clean shutdown (exit status 0)."""

    def handle(_signum: int, _frame: FrameType | None) -> None:
        shutdown()

    previous = {sig: signal.signal(sig, handle) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
