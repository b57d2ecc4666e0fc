"""krust: a broker that speaks the Apache Kafka wire protocol (Rust hot path, Python decisions)."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("krust")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0+source"

__all__ = ["__version__"]
