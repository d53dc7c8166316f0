"""tuidag: run DAGs of tasks interactively in the terminal, or headless in CI."""
__version__ = "0.1.0"
