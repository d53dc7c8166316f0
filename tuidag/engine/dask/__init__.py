"""The Dask executor (`--executor dask`, `dask-local`): attempts run on the workers of a Dask cluster.

One idea per module. Set-up: `cluster` (starting a local cluster or connecting to one, the version check, the
client made ready). Shared by both ends: `wire` (an attempt's identity, its spec, its events). The client's side:
`executor` (`DaskExecutor`) and `attempt` (one attempt as the client sees it). The workers' side, imported there by
module path: `runner` (the Dask task that runs attempts), `registry` (what runs on a worker, and stopping it),
`output` (the worker's copy of the logs and the client's reads of it), `callable_task` (a Python callable's child
process), `guard` (the scheduler and worker plugins) and `watchdog` (what kills a dead worker's trees).

Nothing here is imported until a run asks for Dask, and this package imports nothing itself: the watchdog and the
callable's child import it on every start.
"""
