"""The fingerprint of a Python callable: what `--resume` compares to decide whether a callable task's earlier result
still holds, so it must change when what the callable does changes.

The program's own functions and classes are named by their file and qualified name, not by the name their module
was imported under (`__main__` for `python etl.py`, `etl` for `tuidag run etl.py`: either resumes the other).

Covered, read without running any of the program's code (no attribute lookups that could reach a property, no
`repr` of the program's objects, which would also hold memory addresses that differ from run to run):
- the function's code: its bytecode, names, argument layout, exception table and constants, with the code of the
  functions, lambdas and comprehensions nested in it; not its file name or line numbers (moving a function, or
  editing a comment, changes nothing; a docstring is one of its constants and does count);
- its default and keyword-only default values, and the values its closure cells hold;
- the globals its code (and its nested code) names, read from the module's namespace;
- values as data when they are None, bools, numbers, strings, bytes, or (exactly) tuples, lists, dicts, sets and
  frozensets of those (sets in a fixed order, as their hash order changes from run to run): a constant, a
  configuration dict. Past 2,000 items (per global; and in all, for defaults and closures), a container counts by
  its type and length only. A global table of plain data is described once per DAG, not once per task that reads it
  (300 tasks reading a 600-row table: 24 ms in all);
- functions, lambdas, `functools.partial` objects, bound methods and classes that these reach, recursively, when they
  are the program's own (defined outside the Python installation and its site-packages): a helper that changed
  changes every task that calls it. Classes by their methods and plain class attributes; an object with a
  `__call__` method by that method and its attributes.
Not covered: what a library function (standard library, site-packages) or a module does beyond its name (upgrading a
library does not count as a change); objects of any other type (instances of the program's classes, enums,
`OrderedDict`, NumPy arrays, open files...), which count by their type only; what the code reads at run time
(files, the environment, attributes of modules: `config.X` is `config`, a module, by name); a value past the item
limit. Python's bytecode differs between versions, so a new Python version counts as a change.
"""

from __future__ import annotations

import functools
import os
import sys
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeGuard

if TYPE_CHECKING:  # `_sha1` has no stubs; its sha1 is hashlib's
    from hashlib import sha1
else:
    try:  # as in spec.py: hashlib loads OpenSSL
        from _sha1 import sha1
    except ImportError:
        from hashlib import sha1

MAX_ITEMS = 2_000  # values and code objects described per callable: a global holding a big table costs no more
MAX_DEPTH = 64  # nested containers, functions and classes followed
_SCALARS = (type(None), bool, int, float, complex, str, bytes)
_CONTAINERS = (tuple, list, dict, set, frozenset)
_CALLABLES = (
    types.FunctionType,
    functools.partial,
    types.MethodType,
    types.BuiltinFunctionType,
    types.BuiltinMethodType,
)


def callable_fingerprint(func: Callable[..., Any], memo: dict[int, tuple[Any, str | None]] | None = None) -> str:
    """A hash of what `func` does (see the module's docstring for what counts). `memo`, shared by the callables of
    one DAG, keeps what a global container holds, so a table every task reads is described once, not per task."""
    printer = _Printer(memo)
    printer.callable(func)
    return sha1("\0".join(printer.out).encode("utf-8", "backslashreplace")).hexdigest()[:16]


@functools.cache
def _library_folders() -> tuple[str, ...]:
    """Where the Python installation and installed packages live: code from there is a library's, named only."""
    folders = {
        sys.prefix,
        sys.base_prefix,
        sys.exec_prefix,
        sys.base_exec_prefix,
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
    }  # tuidag itself
    return tuple(os.path.join(os.path.realpath(folder), "") for folder in folders if folder)


def _own_code(code: types.CodeType) -> bool:
    """Code of the program's own (followed into), rather than a library's (named only)."""
    file = code.co_filename
    if file.startswith("<"):
        return not file.startswith("<frozen")  # exec'd or typed in: the program's
    return _own_file(file)


class _Printer:
    """Writes a description of a callable and what it reaches into `out`, in an order fixed by the code alone."""

    def __init__(self, memo: dict[int, tuple[Any, str | None]] | None = None) -> None:
        self.memo = memo
        self.calls = 0  # callables met: a description with none depends on nothing but the data (see `shared`)
        self.out: list[str] = []
        self.seen: dict[int, int] = {}  # id of a function or class met -> its number (for cycles)
        self.budget = MAX_ITEMS
        self.depth = 0  # containers and callables being described: a fixed limit, not Python's recursion limit
        # (which would be reached at a point that depends on the caller's stack)

    def _first_visit(self, obj: Any) -> bool:
        number = self.seen.get(id(obj))
        if number is not None:
            self.out.append(f"see {number}")
            return False
        self.seen[id(obj)] = len(self.seen)
        return True

    def callable(self, obj: Any) -> None:
        self.calls += 1
        kind = type(obj)
        if kind is types.FunctionType:
            self.function(obj)
        elif kind is functools.partial:
            self.out.append("partial")
            self.callable(obj.func)
            self.value(obj.args)
            self.value(obj.keywords)
        elif kind is types.MethodType:
            self.out.append(f"method of {_type_name(type(obj.__self__))}")
            self.callable(obj.__func__)
        elif issubclass(kind, type):
            self.klass(obj)
        elif kind in (types.BuiltinFunctionType, types.BuiltinMethodType):
            self.out.append(f"builtin {getattr(obj, '__module__', None)}.{obj.__qualname__}")
        else:
            call = _class_attribute(kind, "__call__")
            self.out.append(f"instance of {_type_name(kind)}")
            if type(call) is types.FunctionType:
                self.callable(call)
                attributes = _instance_dict(obj)
                if attributes is not None:
                    self.value(attributes)

    def function(self, func: types.FunctionType) -> None:
        code = func.__code__
        self.out.append(f"function {_function_name(func)}")
        if not _own_code(code) or not self._first_visit(func):
            return
        self.code(code)
        self.value(func.__defaults__)
        self.value(func.__kwdefaults__)
        for name, cell in zip(code.co_freevars, func.__closure__ or ()):
            self.out.append(f"cell {name}")
            try:
                self.value(cell.cell_contents)
            except ValueError:  # not set yet
                self.out.append("empty")
        namespace = func.__globals__
        for name in sorted(_global_names(code)):
            if name in namespace:
                self.out.append(f"global {name}")
                self.shared(namespace[name])

    def code(self, code: types.CodeType) -> None:
        self.budget -= 1
        self.out.append(
            f"code {code.co_name} {code.co_argcount} {code.co_posonlyargcount} {code.co_kwonlyargcount} "
            f"{code.co_flags} {code.co_code.hex()} {getattr(code, 'co_exceptiontable', b'').hex()}"
        )
        self.out.append(
            " ".join((*code.co_names, "|", *code.co_varnames, "|", *code.co_freevars, "|", *code.co_cellvars))
        )
        for const in code.co_consts:
            if type(const) is types.CodeType:
                self.code(const)
            else:
                self.value(const)

    def klass(self, cls: type) -> None:
        self.out.append(f"class {_type_name(cls)}")
        if not _own_class(cls) or not self._first_visit(cls):
            return
        for name, member in sorted(vars(cls).items()):  # vars() of a class is its own dict: no descriptors run
            member = member.__func__ if type(member) in (staticmethod, classmethod) else member
            if type(member) is types.FunctionType or type(member) in _SCALARS or type(member) in _CONTAINERS:
                self.out.append(f"member {name}")
                self.value(member)

    def shared(self, value: Any) -> None:
        """A global's value. A container is described on its own, with a budget of its own: when it holds plain data
        only, that description depends on nothing else and stands for it (kept in the memo for the other callables
        that read it); one that holds callables is described in line (what they reach depends on what was met)."""
        if type(value) in _CONTAINERS and self.depth < MAX_DEPTH:
            known = self.memo.get(id(value)) if self.memo is not None else None
            if known is None or known[0] is not value:
                alone = _Printer()
                alone.value(value)
                text = (
                    None
                    if alone.calls
                    else "data " + sha1("\0".join(alone.out).encode("utf-8", "backslashreplace")).hexdigest()
                )
                known = (value, text)  # the value is kept alive with its entry, so its id is not reused meanwhile
                if self.memo is not None:
                    self.memo[id(value)] = known
            if known[1] is not None:
                self.out.append(known[1])
                return
        self.value(value)

    def value(self, value: Any) -> None:
        if self.depth >= MAX_DEPTH:
            self.out.append(f"{type(value).__name__} too deep")
            return
        self.depth += 1
        try:
            self._value(value)
        finally:
            self.depth -= 1

    def _value(self, value: Any) -> None:
        kind = type(value)
        self.budget -= 1
        if kind in _SCALARS:
            text = repr(value)
            if len(text) > 256:  # a long string or bytes: its hash stands for it
                text = f"{kind.__name__} {len(text)} {sha1(text.encode('utf-8', 'backslashreplace')).hexdigest()}"
            self.out.append(text)
        elif kind in _CONTAINERS:
            if len(value) > self.budget:  # what is left of the budget can't take it all: its type and length
                self.out.append(f"{kind.__name__} of {len(value)}")
                return
            self.out.append(f"{kind.__name__} {len(value)}")
            if kind is dict:
                for key, item in value.items():
                    self.value(key)
                    self.value(item)
            elif kind in (set, frozenset):
                for text in sorted(self._alone(item) for item in value):  # hash order differs from run to run
                    self.out.append(text)
            else:
                for item in value:
                    self.value(item)
        elif kind is types.CodeType:
            self.code(value)
        elif kind in _CALLABLES or issubclass(kind, type):
            self.callable(value)
        elif kind is types.ModuleType:
            self.out.append(f"module {value.__name__}")
        else:
            self.out.append(f"object {_type_name(kind)}")

    def _alone(self, value: Any) -> str:
        """`value`'s description as one string (to sort a set's items by)."""
        out, self.out = self.out, []
        try:
            self.value(value)
            return "\0".join(self.out)
        finally:
            self.out = out


def _global_names(code: types.CodeType) -> set[str]:
    """Every name the code and the code nested in it look up (some are attributes: only those that are globals of
    the module count)."""
    names = set(code.co_names)
    for const in code.co_consts:
        if type(const) is types.CodeType:
            names |= _global_names(const)
    return names


def _own_class(cls: type) -> bool:
    """A class of the program's own: one from a module whose file is outside the installation's folders."""
    return _own_file(_class_file(cls))


def _class_file(cls: type) -> str | None:
    module = sys.modules.get(cls.__module__)
    file = vars(module).get("__file__") if module is not None else None  # vars(): a module's __getattr__ never runs
    return file if type(file) is str else None


def _own_file(file: str | None) -> TypeGuard[str]:
    return file is not None and not os.path.realpath(file).startswith(_library_folders())


def _function_name(func: types.FunctionType) -> str:
    """The program's own functions by their file and qualified name: the DAG file's module is `__main__` under
    `python etl.py` and `etl` under `tuidag run etl.py`, and a run of one is resumed by the other (the post-mortem's
    `r`). A library's by module and name."""
    file = func.__code__.co_filename
    if _own_code(func.__code__):
        return f"{file if file.startswith('<') else os.path.realpath(file)}:{func.__qualname__}"
    return f"{func.__module__}.{func.__qualname__}"


def _type_name(cls: type) -> str:
    """Like `_function_name`, for classes."""
    file = _class_file(cls)
    if _own_file(file):
        return f"{os.path.realpath(file)}:{cls.__qualname__}"
    return f"{cls.__module__}.{cls.__qualname__}"


def _class_attribute(cls: type, name: str) -> Any:
    """`name` from the class's own dicts along its MRO, as stored (no descriptor runs)."""
    for klass in cls.__mro__:
        if name in vars(klass):
            return vars(klass)[name]
    return None


def _instance_dict(obj: Any) -> dict | None:
    try:
        attributes = object.__getattribute__(obj, "__dict__")
    except AttributeError:
        return None
    return attributes if type(attributes) is dict else None
