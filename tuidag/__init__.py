"""tuidag: run DAGs of tasks interactively in the terminal, or headless in CI.

`from tuidag import Dag` is the Python front end (see `tuidag.api`). It is imported on first use, so `import tuidag`
stays light and never pulls in the terminal UI.
"""

from .version import __version__ as __version__  # re-exported: `tuidag.__version__`

__all__ = ["Dag", "TaskContext", "load_python"]


def __getattr__(name: str):
    if name in __all__:
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module 'tuidag' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
