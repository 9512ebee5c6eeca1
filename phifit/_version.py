"""The version of phifit (one place; read by the package, the CLI and every result file)."""

__version__ = "0.1.0"
