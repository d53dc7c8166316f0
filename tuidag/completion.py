"""Shell completion for bash and zsh: `tuidag completion bash|zsh` prints a script to source, and the hidden
`tuidag __complete tasks|runs ...` gives the values only tuidag can know (a DAG's task names, a state dir's run ids).

The script's table (the commands, each one's options, what an option takes, what each positional argument is) is
written from the argument parser itself, walked when the script is printed, so it always matches the parser: a new
option completes once the script is printed again. What an argument takes is told from the parser: its choices; a
path (`type=Path`; `--state-dir` a folder); a task (dest `tasks`/`task`/`from_tasks`); a run (dest `run_id`/`resume`).
Commands, options and choices complete in the shell alone; task names and run ids start tuidag once per TAB.

zsh runs the same bash function through its `bashcompinit` (with `ksharrays` and `shwordsplit` set inside it, so
the function reads its arrays and lists as bash does): one table, one function, for both shells.

Task names come from the model `tuidag run` keeps of the file in the state dir (see model/cache) when there is one,
else from the file itself (YAML and SkyPilot files; never a Python DAG, which would have to be imported and run: its
names come from its latest run). No file on the line: the tasks of the latest run of the state dir. A TAB never
writes anything, and never says anything on a terminal: a file with errors completes nothing.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from .exit_codes import EXIT_OK

SHELLS = ("bash", "zsh")
HIDDEN = "__complete"


def add_parsers(sub: argparse._SubParsersAction) -> None:
    completion = sub.add_parser(
        "completion",
        help='print a shell completion script: eval "$(tuidag completion bash)" in ~/.bashrc (zsh: ~/.zshrc)',
    )
    completion.add_argument("shell", choices=SHELLS, help="the shell the script is for")


# ----------------------------------------------------------------------------------------------------- the table
def value_kind(action: argparse.Action) -> str:
    """What an argument takes: `=word,word...` (its choices), `file`, `dir`, `task`, `run`, or `value` (anything:
    nothing to offer), with a trailing `?` for an option whose value may be left out; "" for an option that takes
    nothing."""
    if action.nargs == 0:
        return ""
    kind = _kind(action)
    return kind + "?" if action.option_strings and action.nargs == "?" else kind


def _kind(action: argparse.Action) -> str:
    if action.choices:
        return "=" + ",".join(map(str, action.choices))
    dest = action.dest
    if dest == "state_dir":
        return "dir"
    if dest in ("tasks", "task", "from_tasks"):
        return "task"
    if dest in ("run_id", "resume"):
        return "run"
    if action.type is Path or action.metavar == "FILE":
        return "file"
    return "value"


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def command_table(parser: argparse.ArgumentParser) -> dict[str, tuple[list[str], dict[str, str], list[str]]]:
    """command -> (its options, option -> what it takes (options that take a value only), its positional
    arguments' kinds, a repeated one marked with a trailing `*`). The top level is the command ""."""
    table = {}
    for name, command in {"": parser, **subcommands(parser)}.items():
        options: list[str] = []
        values: dict[str, str] = {}
        positionals: list[str] = []
        for action in command._actions:
            if isinstance(action, argparse._SubParsersAction):
                continue
            if action.option_strings:
                options += action.option_strings
                kind = value_kind(action)
                if kind:
                    values.update(dict.fromkeys(action.option_strings, kind))
            else:
                kind = value_kind(action) or "value"
                positionals.append(kind + ("*" if action.nargs in ("*", "+") else ""))
        table[name] = (options, values, positionals)
    return table


# ---------------------------------------------------------------------------------------------------- the script
_FUNCTION = r"""
_tuidag_complete() {
    [[ -n ${ZSH_VERSION-} ]] && setopt localoptions ksharrays shwordsplit
    local cur="${COMP_WORDS[COMP_CWORD]}" cmd="" word="" pending="" taken="" kind="" file="" state="" run=""
    local i=1 npos=0 n=0 k
    COMPREPLY=()
    while ((i < COMP_CWORD)); do  # what is on the line before the word being completed
        word="${COMP_WORDS[i]}"
        i=$((i + 1))
        if [[ -n $pending && $taken == *"?" && $word != "=" && -f $word ]]; then
            pending=""  # an option whose value may be left out (`run --resume FILE`): a file is the FILE
        elif [[ -n $pending ]]; then
            [[ $word == "=" ]] && continue  # bash cut `--opt=value` at the =
            case "$pending" in
                --file) file="$word" ;;
                --state-dir) state="$word" ;;
                --run) run="$word" ;;
            esac
            pending=""
            continue
        fi
        if [[ -z $cmd ]]; then
            [[ $word == -* ]] || cmd="$word"
            continue
        fi
        case "$word" in
            --*=*)  # an option and its value in one word
                case "${word%%=*}" in
                    --file) file="${word#*=}" ;;
                    --state-dir) state="${word#*=}" ;;
                    --run) run="${word#*=}" ;;
                esac
                ;;
            -*) _tuidag_kind "$cmd" "$word" && pending="$word" && taken="$_tuidag_it" ;;
            *)
                _tuidag_positional "$cmd" "$npos"
                [[ $_tuidag_it == file && -z $file ]] && file="$word"
                npos=$((npos + 1))
                ;;
        esac
    done
    if [[ -z $cmd ]]; then
        _tuidag_spec ""
        if [[ $cur == -* ]]; then
            COMPREPLY=($(compgen -W "$_tuidag_opts" -- "$cur"))
        else
            COMPREPLY=($(compgen -W "$_tuidag_commands" -- "$cur"))
        fi
        return 0
    fi
    if [[ $cur == "=" && -n $pending ]]; then
        cur=""
    fi
    if [[ -n $pending ]]; then
        kind="${taken%"?"}"
    elif [[ $cur == -* ]]; then
        _tuidag_spec "$cmd"
        COMPREPLY=($(compgen -W "$_tuidag_opts" -- "$cur"))
        return 0
    else
        _tuidag_positional "$cmd" "$npos"
        kind="$_tuidag_it"
    fi
    local -a where=()
    [[ -n $file ]] && where+=(--file "$file")
    [[ -n $state ]] && where+=(--state-dir "$state")
    [[ -n $run ]] && where+=(--run "$run")
    case "$kind" in
        file)
            compopt -o filenames 2>/dev/null
            COMPREPLY=($(compgen -f -- "$cur"))
            ;;
        dir)
            compopt -o filenames 2>/dev/null
            COMPREPLY=($(compgen -d -- "$cur"))
            ;;
        task | run)
            COMPREPLY=($(compgen -W "$("${COMP_WORDS[0]}" __complete "${kind}s" "${where[@]}" 2>/dev/null)" -- "$cur"))
            ;;
        "="*)  # (quoted: zsh reads an unquoted =word as a command's path)
            kind="${kind#=}"
            COMPREPLY=($(compgen -W "${kind//,/ }" -- "$cur"))
            ;;
    esac
    return 0
}

_tuidag_positional() {  # $1 command, $2 index: _tuidag_it = the kind of that positional argument ("" if none)
    _tuidag_spec "$1"
    _tuidag_it=""
    local n=0 k
    for k in $_tuidag_pos; do
        case "$k" in
            *"*") _tuidag_it="${k%?}"; return 0 ;;  # a repeated one takes every position from here
        esac
        if ((n == $2)); then
            _tuidag_it="$k"
            return 0
        fi
        n=$((n + 1))
    done
}
"""


def script(shell: str, parser: argparse.ArgumentParser) -> str:
    """The completion script for `shell`, from the parser's table."""
    table = command_table(parser)
    commands = " ".join(name for name in table if name)
    spec = ["_tuidag_spec() {  # $1 command: _tuidag_opts (its options), _tuidag_pos (its positional arguments)"]
    spec.append('    case "$1" in')
    kinds = ["_tuidag_kind() {  # $1 command, $2 option: _tuidag_it = what the option takes; fails for a flag"]
    kinds += ['    _tuidag_it=""', '    case "$1 $2" in']
    for name, (options, values, positionals) in table.items():
        spec.append(
            f"        {_quoted(name)}) _tuidag_opts={_quoted(' '.join(options))}; "
            f"_tuidag_pos={_quoted(' '.join(positionals))} ;;"
        )
        for option, kind in values.items():
            kinds.append(f"        {_quoted(f'{name} {option}')}) _tuidag_it={_quoted(kind)} ;;")
    spec += ['        *) _tuidag_opts=""; _tuidag_pos="" ;;', "    esac", "}"]
    kinds += ["        *) return 1 ;;", "    esac", "}"]
    body = "\n".join(
        [
            f"_tuidag_commands={_quoted(commands)}",
            "\n".join(spec),
            "\n".join(kinds),
            _FUNCTION.strip("\n"),
        ]
    )
    if shell == "bash":
        head = '# bash completion for tuidag: eval "$(tuidag completion bash)" (in ~/.bashrc)'
        tail = "complete -F _tuidag_complete tuidag"
    else:
        head = (
            '# zsh completion for tuidag: eval "$(tuidag completion zsh)" (in ~/.zshrc)\n'
            "# the bash function below, run by zsh's bashcompinit\n"
            "(( ${+functions[compdef]} )) || { autoload -U +X compinit && compinit; }\n"
            "autoload -U +X bashcompinit && bashcompinit"
        )
        tail = "complete -F _tuidag_complete tuidag"
    return f"{head}\n{body}\n{tail}\n"


def _quoted(text: str) -> str:
    """`text` in single quotes for sh (names and options hold no quote, but a choice might)."""
    return "'" + text.replace("'", "'\\''") + "'"


# ------------------------------------------------------------------------------------------- the dynamic values
def complete(argv: Sequence[str]) -> int:
    """`tuidag __complete tasks|runs [--file FILE] [--state-dir DIR] [--run RUN]`: the values, one a line. Quiet:
    whatever goes wrong, nothing is printed and the exit code is 0 (a TAB must not print on the terminal)."""
    parser = argparse.ArgumentParser(prog=f"tuidag {HIDDEN}", add_help=False)
    parser.add_argument("what", choices=("tasks", "runs"))
    parser.add_argument("--file", type=Path)
    parser.add_argument("--state-dir", type=Path)
    parser.add_argument("--run")
    try:
        args, _ = parser.parse_known_args(argv)
        values = task_names(args.file, args.state_dir, args.run) if args.what == "tasks" else run_ids(args)
        sys.stdout.write("".join(f"{value}\n" for value in values))
        sys.stdout.flush()
    except (Exception, SystemExit):
        pass
    return EXIT_OK


def task_names(dag_file: Path | None, state_dir: Path | None, run_id: str | None = None) -> Iterable[str]:
    """The task names of `dag_file` (from the model `tuidag run` keeps, else the file; a Python file's from its latest
    run), else of the run `run_id`, else of the latest run of the state dir."""
    from .store.runs import RunStore, default_state_dir

    state = state_dir or default_state_dir(dag_file)
    if dag_file is not None and dag_file.suffix != ".py":
        from .model.cache import cached_dag

        dag = cached_dag(dag_file, state / "cache")
        if dag is None:
            from .model.loader import load_dag

            dag = load_dag(dag_file, [])
        return _with_groups(dag.tasks, dag.groups)
    from .store.history import matching, runs_of
    from .store.journal import read_header

    runs = runs_of(RunStore(state), dag_file)
    if run_id:
        runs = matching(runs, run_id)
    if not runs:
        return []
    header = read_header(runs[-1].journal)
    return _with_groups(header.get("tasks") or [], header.get("groups") or {})


def _with_groups(tasks: Iterable[str], groups: Iterable[str]) -> list[str]:
    """Every task, and each matrix task's name (which `cancel` and `rerun` take for its instances)."""
    return list(dict.fromkeys([*groups, *tasks]))


def run_ids(args: argparse.Namespace) -> list[str]:
    """The run ids of the state dir (of `--file`'s DAG with it), the latest first."""
    from .store.history import runs_of
    from .store.runs import RunStore, default_state_dir

    state = args.state_dir or default_state_dir(args.file)
    return [run.run_id for run in reversed(runs_of(RunStore(state), args.file))]
