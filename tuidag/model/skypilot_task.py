"""One SkyPilot task document read as SkyPilot reads it (`Task.from_yaml_config` and the task schema), into the
settings of a TaskSpec. Part of the SkyPilot front end (skypilot_loader.py), which reads the documents around it.

What SkyPilot checks is checked here too, even for keys that mean nothing locally, so a file that `sky` refuses is
refused here, located: value types, resource keys, variable names. Values are what SkyPilot makes of them: `envs`
values are `str()` of the YAML value (`true` is "True", `0x10` is "16"), a null one must be given with `--env`,
`$VAR` in `workdir` is filled in from the task's variables and a relative workdir is taken from the folder tuidag
runs in.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from yaml.constructor import ConstructorError, SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from .errors import DagError, Location, Note, did_you_mean
from .resources import Request, kind_problem
from .spec import MAX_COUNT, nul_problem
from .yaml_loader import _Reader
from .yaml_nodes import _INT, _NULL, _STR, _describe, _typed
from .yaml_values import _SKIP

#: Task keys read here; `name` is read by the pipeline reader.
TASK_KEYS = ("name", "setup", "run", "envs", "secrets", "workdir", "num_nodes", "resources")
#: Task keys SkyPilot knows that only matter on a cloud: accepted, with a note.
IGNORED_TASK_KEYS = (
    "file_mounts",
    "file_mounts_mapping",
    "service",
    "pool",
    "event_callback",
    "inputs",
    "outputs",
    "config",
    "volumes",
    "volume_mounts",
    "managed_secrets",
    "api_server_access",
    "_metadata",
)
#: The keys of SkyPilot's resources schema (sky/utils/schemas.py, `get_resources_schema`).
RESOURCE_KEYS = (
    "accelerators",
    "accelerator_args",
    "any_of",
    "autostop",
    "cloud",
    "cpus",
    "disk_size",
    "disk_tier",
    "ephemeral_storage",
    "image_id",
    "infra",
    "instance_type",
    "job_recovery",
    "labels",
    "local_disk",
    "max_hourly_cost",
    "memory",
    "network_tier",
    "ordered",
    "ports",
    "priority",
    "priority_class",
    "region",
    "use_spot",
    "volumes",
    "zone",
    "_cluster_config_overrides",
    "_docker_login_config",
    "_is_image_managed",
    "_no_missing_accel_warnings",
    "_requires_fuse",
)
#: SkyPilot's pattern for variable names (the `envs` schema).
ENV_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
#: How SkyPilot finds variables in `workdir` (`_fill_in_env_vars` in sky/task.py), quirks included.
_ENV_REFERENCE = re.compile(r"\$\{?\b([a-zA-Z_][a-zA-Z0-9_]*)\b\}?")
_MERGE = "tag:yaml.org,2002:merge"


class TaskReader(_Reader):
    """Reads task documents. `env_overrides` are the `--env` values, given to every task as SkyPilot does."""

    def __init__(self, file: str, notes: list[Note], env_overrides: Mapping[str, str]):
        super().__init__(file)
        self.notes = notes
        self.env_overrides = env_overrides

    def note(self, node: Node, message: str) -> None:
        self.notes.append(Note(message, self.at(node)))

    def task_settings(self, fields: dict[str, tuple[Node, Node]], prefix: str) -> tuple[dict[str, Any], int]:
        """The TaskSpec settings of a task's fields (all but `name`), and its accelerator count per node."""
        settings: dict[str, Any] = {}
        envs: dict[str, str | None] = {}
        secrets: dict[str, str] = {}
        gpus = 0
        self.null_values: dict[str, Node] = {}  # envs given as null, where they are
        for key, (knode, value) in fields.items():
            what = prefix + key
            if key in ("name", "downstream", "edges"):
                continue  # read by the pipeline reader
            if key in ("setup", "run"):
                command = self.command(value, what)
                if command is not None:
                    settings[key] = command
            elif key == "envs":
                envs = self.envs(value, what)
            elif key == "secrets":
                secrets = self.secrets(knode, value, what)
            elif key == "num_nodes":
                count = _typed(value, _INT)
                if count is None or count < 1:
                    self.fail(value, f"{what} must be a positive integer, got {_describe(value)}")
                else:
                    self.note(knode, "'num_nodes' is ignored when running locally")
            elif key == "resources":
                retries, gpus, accelerator = self.resources(knode, value, what)
                if retries:
                    settings["retries"] = retries
                if accelerator:  # slots of its name, when a capacity for it is declared (model/resources.py)
                    settings["resources"] = accelerator
            elif key == "workdir":
                continue  # below, once the variables it may use are known
            elif key in IGNORED_TASK_KEYS:
                self.note(knode, f"'{key}' is ignored when running locally")
            else:
                self.fail(knode, f"{prefix}unknown key '{key}'{did_you_mean(key, TASK_KEYS + IGNORED_TASK_KEYS)}")
        envs.update(self.env_overrides)
        for name, env_value in envs.items():
            if env_value is None:
                self.fail(
                    self.null_values[name],
                    f"{prefix}envs value for '{name}' is null: give it with --env "
                    f"{name}=VALUE, or --env {name} to pass on the one tuidag has",
                )
        variables = {name: value for name, value in envs.items() if value is not None}
        variables.update(secrets)
        if "workdir" in fields:
            knode, value = fields["workdir"]
            workdir = self.workdir(knode, value, prefix + "workdir", variables)
            if workdir is not None:
                settings["workdir"] = workdir
        settings["env"] = variables
        return settings, gpus

    # Strings.
    def string(self, node: Node, what: str, expected: str = "a string") -> str | None:
        """A string as SkyPilot's schema wants it (a YAML number or boolean is not one); None for null."""
        if node.tag == _NULL:
            return None
        if not isinstance(node, ScalarNode) or node.tag != _STR:
            self.fail(node, f"{what} must be {expected}, got {_describe(node)}")
            return _SKIP
        if "\0" in node.value:
            self.fail(node, nul_problem(what))
            return _SKIP
        return node.value

    def command(self, node: Node, what: str) -> str | None:
        """A shell command, run with bash like on a SkyPilot node; null or empty means there is none."""
        text = self.string(node, what, "a shell command string")
        return text if text is not _SKIP and text and text.strip() else None

    # Variables.
    def envs(self, node: Node, what: str) -> dict[str, str | None]:
        """Values as SkyPilot makes them: `str()` of the YAML value; None for null (an error unless `--env` gives
        it). The merge key `<<` works as in any YAML mapping."""
        if node.tag == _NULL:
            return {}
        pairs = self.variable_pairs(node, what)
        if pairs is None:
            return {}
        env: dict[str, str | None] = {}
        for name, value in pairs.items():
            if value.tag == _NULL:
                env[name] = None
                self.null_values[name] = value
            else:
                converted = self.value(value, what, name)
                if converted is not None:
                    env[name] = converted
        return env

    def secrets(self, key: Node, node: Node, what: str) -> dict[str, str]:
        """Inline secrets are set like envs; a null one, and the list form (managed secrets, each `secrets:NAME`),
        come from the environment tuidag runs in."""
        if isinstance(node, SequenceNode):
            bad = [
                item
                for item in node.value
                if not (isinstance(item, ScalarNode) and item.tag == _STR and item.value.startswith("secrets:"))
            ]
            for item in bad:
                self.fail(
                    item,
                    f"{what}: a secret in list form must be 'secrets:NAME' (a managed secret), got "
                    f"{_describe(item)}: give inline values as a mapping, NAME: VALUE",
                )
            if not bad:
                self.note(
                    key,
                    "'secrets' as a list of managed secret names is ignored when running locally "
                    "(variables come from the environment tuidag runs in)",
                )
            return {}
        if node.tag == _NULL:
            return {}
        pairs = self.variable_pairs(node, what)
        secrets: dict[str, str] = {}
        for name, value in (pairs or {}).items():
            if value.tag != _NULL:
                converted = self.value(value, what, name)
                if converted is not None:
                    secrets[name] = converted
        return secrets

    def variable_pairs(self, node: Node, what: str) -> dict[str, Node] | None:
        """Name -> value node of a variables mapping, merge keys applied (the mapping's own keys win)."""
        if not isinstance(node, MappingNode):
            self.fail(node, f"{what} must be a mapping of variable names to values, got {_describe(node)}")
            return None
        own = {id(key) for key, _ in node.value if key.tag != _MERGE}
        if len(own) < len(node.value):
            node = MappingNode(node.tag, list(node.value), node.start_mark, node.end_mark, node.flow_style)
            try:
                SafeConstructor().flatten_mapping(node)
            except ConstructorError as exc:
                mark = exc.problem_mark or node.start_mark
                self.errors.append(
                    DagError(f"{what}: {exc.problem}", Location(self.file, mark.line + 1, mark.column + 1))
                )
                return None
        pairs: dict[str, Node] = {}
        first: dict[str, Node] = {}
        for key, value in node.value:
            if not isinstance(key, ScalarNode):
                self.fail(key, f"{what}: variable names must be strings, got {_describe(key)}")
                continue
            name = key.value
            if name in first and id(key) in own and id(first[name]) in own:
                line = first[name].start_mark.line + 1
                self.fail(key, f"duplicate variable '{name}' (first defined on line {line})")
                continue
            if not ENV_NAME.fullmatch(name):
                self.fail(
                    key,
                    f"{what}: variable name {name!r} may only contain letters, digits and '_', "
                    f"and may not start with a digit",
                )
                continue
            first[name] = key
            pairs[name] = value  # a later key wins over a merged one
        return pairs

    def value(self, node: Node, what: str, name: str) -> str | None:
        if not isinstance(node, ScalarNode):
            self.fail(node, f"{what} value for '{name}' must be a string, number or boolean, got {_describe(node)}")
            return None
        if "\0" in node.value:
            self.fail(node, nul_problem(f"{what} value for '{name}'"))
            return None
        try:
            return str(SafeConstructor().construct_object(node))
        except (ValueError, LookupError, ConstructorError):
            return node.value

    # The working directory.
    def workdir(self, key: Node, node: Node, what: str, variables: Mapping[str, str]) -> Path | None:
        """A directory that must exist, with `$VAR` filled in from the task's variables; a relative one is taken
        from the folder tuidag runs in, as `sky` takes it. A git repository (a mapping) is not fetched."""
        if isinstance(node, MappingNode):
            self.note(
                key,
                "'workdir' from a git repository is ignored when running locally: the task runs in the "
                "pipeline file's folder",
            )
            return None
        text = self.string(node, what, "a directory path")
        if text is None or text is _SKIP:
            return None
        filled = _ENV_REFERENCE.sub(lambda match: variables.get(match.group(1), match.group(0)), text)
        path = Path(os.path.normpath(Path.cwd() / Path(filled).expanduser()))
        if not path.is_dir():
            relative = (
                ""
                if Path(filled).expanduser().is_absolute()
                else f" (relative to {Path.cwd()}, where tuidag runs, as for sky)"
            )
            shown = f"{text!r}" + (f" ({filled!r})" if filled != text else "")
            self.fail(node, f"{what}: {shown} is not a directory{relative}")
            return None
        return path

    # Resources.
    def resources(self, key: Node, node: Node, what: str) -> tuple[int, int, dict[str, Request]]:
        """(retries from job_recovery.max_restarts_on_errors, accelerators per node, the accelerator request); the
        rest is noted as ignored."""
        if node.tag == _NULL:
            return 0, 0, {}
        fields = self.resource_fields(node, what)
        if fields is None:
            return 0, 0, {}
        retries = 0
        if "job_recovery" in fields:
            retries = self.job_recovery(*fields["job_recovery"], what + ".job_recovery")
        ignored = [name for name in fields if name != "job_recovery"]
        candidates = [fields]
        for alternative in ("any_of", "ordered"):
            if alternative in fields:
                candidates += self.alternatives(fields[alternative][1], f"{what}.{alternative}")
        gpus, request = 0, {}
        for candidate in candidates:
            if "accelerators" in candidate:
                accelerators = candidate["accelerators"][1]
                gpus = self.accelerator_count(accelerators, what + ".accelerators")
                name = _accelerator_name(accelerators)
                if gpus and name and not kind_problem(name):
                    request = {name: Request(gpus, self.at(accelerators), accelerator=True)}
                break
        if ignored:  # all of it, unless the run has slots for the accelerators (`--resources A100=2`)
            others = [name for name in ignored if name != "accelerators"]
            instead = f"'resources' other than accelerators is ignored when running locally ({', '.join(others)})"
            self.notes.append(
                Note(
                    "'resources' is ignored when running locally",
                    self.at(key),
                    unless_kind=next(iter(request), None),
                    instead=instead if others else None,
                )
            )
        return retries, gpus, request

    def resource_fields(self, node: Node, what: str) -> dict[str, tuple[Node, Node]] | None:
        if not isinstance(node, MappingNode):
            self.fail(node, f"{what} must be a mapping of resource settings, got {_describe(node)}")
            return None
        fields = self.mapping(node, "key")
        for name, (knode, _) in list(fields.items()):
            if name not in RESOURCE_KEYS:
                self.fail(knode, f"{what}: unknown key '{name}'{did_you_mean(name, RESOURCE_KEYS)}")
                del fields[name]
        return fields

    def alternatives(self, node: Node, what: str) -> list[dict[str, tuple[Node, Node]]]:
        if not isinstance(node, SequenceNode):
            self.fail(node, f"{what} must be a list of resource settings, got {_describe(node)}")
            return []
        return [fields for item in node.value if (fields := self.resource_fields(item, what)) is not None]

    def job_recovery(self, key: Node, node: Node, what: str) -> int:
        """SkyPilot restarts a managed job `max_restarts_on_errors` times after user errors: locally, retries."""
        if isinstance(node, ScalarNode) and node.tag == _STR:
            self.note(key, "'job_recovery' is ignored when running locally")
            return 0
        if not isinstance(node, MappingNode):
            self.fail(node, f"{what} must be a recovery strategy name or a mapping, got {_describe(node)}")
            return 0
        retries = 0
        for name, (knode, value) in self.mapping(node, "key").items():
            if name == "max_restarts_on_errors":
                count = _typed(value, _INT)
                if count is None or not 0 <= count <= MAX_COUNT:
                    self.fail(
                        value,
                        f"{what}.max_restarts_on_errors must be an integer from 0 to {MAX_COUNT:,}, "
                        f"got {_describe(value)}",
                    )
                else:
                    retries = count
            else:
                self.note(knode, f"'job_recovery.{name}' is ignored when running locally")
        return retries

    def accelerator_count(self, node: Node, what: str) -> int:
        """GPUs per node of the first accelerator choice: `A100:8`, `A100` (one), `{A100: 8}`, `[A100:8, H100:8]`,
        `{A100:8, H100:8}`; fractions round up, as SkyPilot's count for SKYPILOT_NUM_GPUS_PER_NODE does."""
        if node.tag == _NULL or (not isinstance(node, ScalarNode) and not node.value):
            return 0
        if isinstance(node, SequenceNode):
            return self.accelerator_count(node.value[0], what)
        if isinstance(node, MappingNode):
            name, count = node.value[0]
            if count.tag == _NULL:
                return self.accelerator_count(name, what)
            if isinstance(count, ScalarNode) and (number := _number(count.value)) is not None:
                return math.ceil(number)
            self.fail(count, f"{what}: the count must be a number, got {_describe(count)}")
            return 0
        if isinstance(node, ScalarNode):
            _, colon, count = node.value.partition(":")
            if not colon:
                return 1
            if (number := _number(count)) is not None:
                return math.ceil(number)
        self.fail(node, f"{what} must be NAME or NAME:COUNT (or a list or mapping of them), got {_describe(node)}")
        return 0


def _accelerator_name(node: Node) -> str | None:
    """The name of the first accelerator choice (`A100` of `A100:8`, `{A100: 8}` or `[A100:8, H100:8]`)."""
    while isinstance(node, (SequenceNode, MappingNode)) and node.value:
        node = node.value[0][0] if isinstance(node, MappingNode) else node.value[0]
    if isinstance(node, ScalarNode) and node.tag != _NULL:
        return node.value.partition(":")[0].strip() or None
    return None


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if 0 <= value <= MAX_COUNT else None
