"""krust: a broker that speaks the Apache Kafka wire protocol (Rust hot path, Python decisions)."""

# The version lives in Cargo.toml (the wheel takes it from there too). Reading it from the
# extension instead of importlib.metadata saves ~50 ms of start-up.
try:
    from krust._core import __version__
except ImportError:  # a source tree whose extension was never built
    __version__ = "0+source"

__all__ = ["__version__"]
