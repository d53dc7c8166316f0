"""The Python front end's keyword arguments checked as the YAML front end checks its keys: each mistake a located
`DagError` at the decorator or `dag.shell(...)` call, collected so that every one is reported at once, and the
values a `TaskSpec` takes (durations, slot requests, paths, environment, inputs and outputs, a matrix)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .durations import DurationTooLong, parse_duration
from .errors import DagError, Location, short_repr
from .matrix import KEY_RE, Matrix, text_of
from .resources import Request, kind_problem
from .service import service_from_values
from .spec import MAX_COUNT, nul_problem


class OptionChecks:
    """Checks of one Python DAG's options; `errors` is the DAG's list of mistakes, which they add to."""

    def __init__(self, errors: list[DagError]) -> None:
        self.errors = errors

    def check(self, ok: bool, at: Location, message: str) -> bool:
        if not ok:
            self.errors.append(DagError(message, at))
        return ok

    def options(
        self,
        name: str,
        at: Location,
        retries: Any,
        retry_delay: Any,
        timeout: Any,
        env: Any,
        workdir: Any,
        resources: Any,
    ) -> dict[str, Any]:
        what = f"task '{name}': "
        options: dict[str, Any] = {}
        if self.check(
            is_int(retries, 0),
            at,
            f"{what}retries must be an integer from 0 to {MAX_COUNT:,}, got {short_repr(retries)}",
        ):
            options["retries"] = retries
        options["retry_delay"] = self.duration(retry_delay, what + "retry_delay", at, positive=False, default=0.0)
        if timeout is not None:
            options["timeout"] = self.duration(timeout, what + "timeout", at, positive=True, default=None)
        options["env"] = self.env(env, what + "env", at)
        options["workdir"] = self.path(workdir, what + "workdir", at)
        options["resources"] = {
            kind: Request(count, at) for kind, count in self.slots(resources, what + "resources", at, minimum=1).items()
        }
        return options

    def io_options(
        self, name: str, at: Location, inputs: Any, outputs: Any, cache: Any, env_inputs: Any
    ) -> dict[str, Any]:
        """`inputs`, `outputs`, `cache` and `env_inputs`, checked as the YAML keys are."""
        what = f"task '{name}': "
        options: dict[str, Any] = {}
        for key, value in (("inputs", inputs), ("outputs", outputs), ("env_inputs", env_inputs)):
            entries = [value] if isinstance(value, str | os.PathLike) else value
            try:
                items = list(entries)
            except TypeError:
                self.errors.append(DagError(f"{what}{key} must be a string or a list of strings, got {value!r}", at))
                continue
            kept: list[str] = []
            for item in items:
                text = os.fspath(item) if isinstance(item, str | os.PathLike) else None
                if not isinstance(text, str) or not text.strip() or "\0" in text:
                    self.errors.append(DagError(f"{what}{key} entries must be non-empty strings, got {item!r}", at))
                elif key == "env_inputs" and "=" in text:
                    self.errors.append(DagError(f"{what}env_inputs: variable name {text!r} may not contain '='", at))
                elif key == "outputs" and os.path.isabs(text):
                    self.errors.append(DagError(f"{what}outputs entry '{text}' must be relative to the workdir", at))
                elif text in kept:
                    self.errors.append(DagError(f"{what}{key} lists '{text}' twice", at))
                else:
                    kept.append(text)
            options[key] = tuple(kept)
        if cache is not True and cache is not False:
            self.errors.append(DagError(f"{what}cache must be True or False, got {cache!r}", at))
        else:
            options["cache"] = cache
        return options

    def shell_options(self, name: str, at: Location, run: Any, setup: Any, interruptible: Any) -> dict[str, Any]:
        """`dag.shell`'s `run`, `setup` and `interruptible`."""
        options: dict[str, Any] = {}
        if interruptible is not True and interruptible is not False:
            self.errors.append(
                DagError(f"task '{name}': interruptible must be True or False, got {interruptible!r}", at)
            )
        elif not interruptible:
            options["interruptible"] = False
        if not isinstance(run, str) or not run.strip():
            self.errors.append(
                DagError(f"task '{name}': run must be a non-empty shell command string, got {run!r}", at)
            )
        elif "\0" in run:
            self.errors.append(DagError(nul_problem(f"task '{name}': run"), at))
        else:
            options["run"] = run
        if setup is not None:
            if isinstance(setup, str) and "\0" in setup:
                self.errors.append(DagError(nul_problem(f"task '{name}': setup"), at))
            elif isinstance(setup, str) and setup.strip():
                options["setup"] = setup
            else:
                self.errors.append(
                    DagError(f"task '{name}': setup must be a non-empty shell command string, got {setup!r}", at)
                )
        return options

    def service_options(
        self, name: str, at: Location, values: tuple[Any, ...], outputs: Any, retries: Any, timeout: Any
    ) -> dict[str, Any]:
        """`dag.shell`'s service keywords (`service`, `ready_when`, `ready_timeout`, `restart`, `max_restarts`,
        `restart_delay`, in that order in `values`), and the keywords a service can't have."""
        service, ready_when, ready_timeout, restart, max_restarts, restart_delay = values
        spec, problems = service_from_values(
            service,
            ready_when,
            ready_timeout,
            restart,
            max_restarts,
            restart_delay,
            lambda value, key: self.duration(value, f"task '{name}': {key}", at, positive=False, default=None),
        )
        self.errors.extend(DagError(f"task '{name}': {problem}", at) for problem in problems)
        if spec is None:
            return {}
        for key, value, given in (
            ("outputs", outputs, outputs not in ((), "", [])),
            ("retries", retries, retries != 0),
            ("timeout", timeout, timeout is not None),
        ):
            if given:
                self.errors.append(DagError(f"task '{name}': a service can't have {key} (got {value!r})", at))
        return {"service": spec}

    def matrix(self, name: str, at: Location, matrix: Any, limit: Any, template: Any) -> Matrix | None:
        """A task's `matrix`, `max_parallel` and `instance_name`, checked as the YAML keys are."""
        what = f"task '{name}': "
        if matrix is None:
            if limit is not None or template is not None:
                self.errors.append(
                    DagError(f"{what}max_parallel and instance_name are for a task with a matrix, and it has none", at)
                )
            return None
        if not isinstance(matrix, Mapping) or not matrix:
            self.errors.append(
                DagError(f"{what}matrix must be a mapping of keys to lists of values, got {matrix!r}", at)
            )
            return None
        before = len(self.errors)
        axes: list[tuple[str, tuple[Any, ...]]] = []
        for key, values in matrix.items():
            if key in ("include", "exclude"):
                continue
            if not isinstance(key, str) or not KEY_RE.fullmatch(key):
                self.errors.append(
                    DagError(f"{what}matrix key {key!r} may only contain letters, digits, '_' and '-' (not first)", at)
                )
            elif isinstance(values, (str, bytes, Mapping)) or not isinstance(values, Iterable):
                self.errors.append(DagError(f"{what}matrix: '{key}' must be a list of values, got {values!r}", at))
            else:
                values = tuple(values)
                if not values:
                    self.errors.append(
                        DagError(f"{what}matrix: '{key}' is an empty list: give it at least one value", at)
                    )
                elif not all(is_value(v) for v in values):
                    bad = next(v for v in values if not is_value(v))
                    self.errors.append(
                        DagError(f"{what}matrix: '{key}' values must be strings, numbers or booleans, got {bad!r}", at)
                    )
                elif len(set(map(value_text, values))) < len(values):
                    twice = next(v for i, v in enumerate(values) if value_text(v) in map(value_text, values[:i]))
                    self.errors.append(DagError(f"{what}matrix: '{key}' lists {twice!r} twice", at))
                else:
                    axes.append((key, values))
        lists = {}
        for key in ("include", "exclude"):
            entries = matrix.get(key, ())
            if not isinstance(entries, (list, tuple)) or not all(
                isinstance(e, Mapping)
                and e
                and all(isinstance(k, str) and KEY_RE.fullmatch(k) and is_value(v) for k, v in e.items())
                for e in entries
            ):
                self.errors.append(
                    DagError(f"{what}matrix {key} must be a list of mappings like {{'lr': 0.1}}, got {entries!r}", at)
                )
                entries = ()
            lists[key] = tuple(dict(e) for e in entries)
        if not axes and not lists["include"] and len(self.errors) == before:
            self.errors.append(
                DagError(f"{what}matrix has no keys: give it at least one key with a list of values", at)
            )
        if limit is not None and not is_int(limit, 1):
            self.errors.append(
                DagError(f"{what}max_parallel must be an integer from 1 to {MAX_COUNT:,}, got {short_repr(limit)}", at)
            )
        if template is not None and (not isinstance(template, str) or not template.strip()):
            self.errors.append(DagError(f"{what}instance_name must be a non-empty string, got {template!r}", at))
        if len(self.errors) > before:
            return None
        return Matrix(
            tuple(axes),
            lists["include"],
            lists["exclude"],
            max_parallel=limit,
            name=template,
            location=at,
            include_at=(at,) * len(lists["include"]),
            exclude_at=(at,) * len(lists["exclude"]),
            name_at=at,
        )

    def slots(self, value: Any, what: str, at: Location, minimum: int) -> dict[str, Any]:
        """Slot kind -> count: capacities (minimum 0) or a task's requests (minimum 1)."""
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            self.errors.append(
                DagError(f"{what} must be a mapping of resource names to counts, e.g. {{'gpu': 1}}, got {value!r}", at)
            )
            return {}
        slots = {}
        for kind, count in value.items():
            problem = kind_problem(kind) if isinstance(kind, str) else f"resource names must be strings, got {kind!r}"
            if problem:
                self.errors.append(DagError(f"{what}: {problem}", at))
            elif minimum and isinstance(count, str) and "${{" in count:
                slots[kind] = count  # from a matrix's values: filled and checked when the matrix is expanded
            elif not is_int(count, minimum):
                self.errors.append(
                    DagError(
                        f"{what}: '{kind}' must be an integer from {minimum} to {MAX_COUNT:,}, got {short_repr(count)}",
                        at,
                    )
                )
            else:
                slots[kind] = count
        return slots

    def duration(self, value: Any, what: str, at: Location, positive: bool, default: Any) -> Any:
        try:
            seconds = parse_duration(value)
        except DurationTooLong:
            self.errors.append(DagError(f"{what} is too long: {DurationTooLong.LIMIT}, got {short_repr(value)}", at))
            return default
        except ValueError:
            self.errors.append(
                DagError(f"{what} must be a duration like 500ms, 5s, 2m or 1h, got {short_repr(value)}", at)
            )
            return default
        if positive and seconds == 0:
            self.errors.append(DagError(f"{what} must be longer than 0, got {value!r}", at))
            return default
        return seconds

    def env(self, env: Any, what: str, at: Location) -> dict[str, str]:
        if env is None:
            return {}
        if not isinstance(env, Mapping):
            self.errors.append(DagError(f"{what} must be a mapping of variable names to values, got {env!r}", at))
            return {}
        result: dict[str, str] = {}
        for key, value in env.items():
            if not isinstance(key, str) or not key or "=" in key or "\0" in key:
                self.errors.append(
                    DagError(f"{what}: variable name {key!r} must be a non-empty string without '=' or NUL", at)
                )
            elif isinstance(value, bool):
                result[key] = "true" if value else "false"
            elif isinstance(value, str) and "\0" in value:
                self.errors.append(DagError(nul_problem(f"{what} value for '{key}'"), at))
            elif isinstance(value, (str, int, float)):
                result[key] = str(value)
            else:
                self.errors.append(
                    DagError(f"{what} value for '{key}' must be a string, number or boolean, got {value!r}", at)
                )
        return result

    def command(self, value: Any, what: str, at: Location) -> str | None:
        """A shell command (`on_end`), or None when not given."""
        if value is None:
            return None
        if not self.check(
            isinstance(value, str) and value.strip() != "" and "\0" not in value,
            at,
            f"{what} must be a non-empty shell command string, got {short_repr(value)}",
        ):
            return None
        return value

    def path(self, value: Any, what: str, at: Location) -> Path | None:
        if value is None:
            return None
        if isinstance(value, (str, os.PathLike)) and "\0" in str(value):
            self.errors.append(DagError(nul_problem(what), at))
            return None
        if isinstance(value, (str, os.PathLike)) and str(value).strip():
            return Path(value).expanduser()
        self.errors.append(DagError(f"{what} must be a directory path, got {value!r}", at))
        return None


# --- helpers ----------------------------------------------------------------------------------------------------


def is_int(value: Any, minimum: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and minimum <= value <= MAX_COUNT


def is_value(value: Any) -> bool:
    return isinstance(value, (str, int, float, bool))


def value_text(value: Any) -> str:
    return text_of(value)
