"""tuidag's version, in a module of its own so the CLI reads it without importing the package's lazy front end."""

__version__ = "0.1.0"
