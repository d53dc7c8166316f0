"""Which executor runs a DAG's attempts: `local` (this machine), `dask` (an existing Dask cluster, at an address) or
`dask-local[:N]` (a Dask LocalCluster of N worker processes started for the run). Chosen by `--executor` or
`executor:` in the file; parsed here (plain data) so the file loader can report a bad value at its line, and so that
choosing `local` never imports Dask."""

from __future__ import annotations

import os
from typing import NamedTuple

ADDRESS_ENV = "DASK_SCHEDULER_ADDRESS"  # Dask's own variable for the scheduler to connect to


class ExecutorChoice(NamedTuple):
    kind: str  # "local", "dask" or "dask-local"
    workers: int | None = None  # dask-local: worker processes (None: one per CPU)
    address: str | None = None  # dask: the scheduler's address

    @property
    def uses_dask(self) -> bool:
        return self.kind != "local"


def executor_problem(text: str) -> str | None:
    """Why `text` names no executor, or None."""
    kind, colon, count = text.strip().partition(":")
    if kind not in ("local", "dask", "dask-local") or (colon and kind != "dask-local"):
        return f"the executor must be local, dask or dask-local[:N], got {text!r}"
    if colon and (not count.isdigit() or int(count) < 1):
        return f"dask-local:N needs a positive number of worker processes, got {text!r}"
    return None


def choose_executor(text: str | None, address: str | None) -> ExecutorChoice:
    """The executor `text` names (None: local), with the scheduler address for `dask` taken from `address`, else
    $DASK_SCHEDULER_ADDRESS. Raises ValueError with the message for the user."""
    if text is None:
        return ExecutorChoice("local")
    problem = executor_problem(text)
    if problem:
        raise ValueError(problem)
    kind, _, count = text.strip().partition(":")
    if kind == "dask":
        address = address or os.environ.get(ADDRESS_ENV)
        if not address:
            raise ValueError(
                "executor dask needs the scheduler's address: --dask-address tcp://HOST:8786 "
                f"(or dask_address in the DAG file, or ${ADDRESS_ENV})"
            )
        return ExecutorChoice("dask", address=address)
    return ExecutorChoice(kind, int(count) if count else None)
