"""Content hashes and the stat cache (a file whose size, mtime, inode and device are unchanged is not read again,
except within the mtime granularity), and the decision's reasons, in the user's terms."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any, NamedTuple

from tuidag.model.freshness import NEVER, RESTORE, RUN, UP_TO_DATE, decide, explain
from tuidag.store import hashing
from tuidag.store.hashing import Gate, Hasher, Missing, hash_bytes
from tuidag.store.index import Index


def aged(path: Path, seconds: int = 10) -> None:
    info = path.stat()
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns - seconds * 1_000_000_000))


def test_an_unchanged_file_is_not_read_again_and_a_changed_one_is(tmp_path):
    data = tmp_path / "data.csv"
    data.write_text("a,b\n")
    aged(data)
    index = Index(tmp_path / "state")
    first = Hasher(index)
    assert first.file(str(data)) == hash_bytes(b"a,b\n") and first.files_read == 1
    again = Hasher(index)  # a later run: the same index
    assert again.file(str(data)) == hash_bytes(b"a,b\n") and again.files_read == 0
    data.write_text("a,c\n")  # same size; its mtime moves
    aged(data, 5)
    assert again.file(str(data)) == hash_bytes(b"a,c\n") and again.files_read == 1


def test_a_file_replaced_by_another_with_the_same_size_and_mtime_is_read_again(tmp_path):
    data = tmp_path / "data.csv"
    data.write_text("a,b\n")
    aged(data)
    index = Index(tmp_path / "state")
    Hasher(index).file(str(data))
    info = data.stat()
    replacement = tmp_path / "new.csv"
    replacement.write_text("x,y\n")
    os.utime(replacement, ns=(info.st_atime_ns, info.st_mtime_ns))
    os.replace(replacement, data)  # another inode, same size and mtime
    hasher = Hasher(index)
    assert hasher.file(str(data)) == hash_bytes(b"x,y\n") and hasher.files_read == 1


def test_a_file_modified_within_the_last_second_is_hashed_again_next_time(tmp_path):
    data = tmp_path / "data.csv"
    data.write_text("a,b\n")  # just now: within the mtime granularity of a write that may follow
    index = Index(tmp_path / "state")
    Hasher(index).file(str(data))
    hasher = Hasher(index)
    hasher.file(str(data))
    assert hasher.files_read == 1


def test_a_thread_hashing_a_file_lets_the_checks_of_other_threads_through(tmp_path, monkeypatch):
    """Checks of known files go one thread at a time (the gate); reading a file must not keep the others waiting."""
    data = tmp_path / "big.bin"
    data.write_bytes(b"x" * 4096)
    gate = Gate()
    other_checked = threading.Event()

    def other_check() -> None:
        with gate:
            other_checked.set()

    real_hash_fd = hashing.hash_fd

    def hash_fd_while_another_checks(fd: int) -> str:
        checker = threading.Thread(target=other_check)
        checker.start()
        checker.join(timeout=10)
        return real_hash_fd(fd)

    monkeypatch.setattr(hashing, "hash_fd", hash_fd_while_another_checks)
    with gate:
        digest = Hasher(gate=gate).file(str(data))
    assert other_checked.is_set(), "another thread could not check while this one read a file"
    assert digest == hash_bytes(b"x" * 4096)


def test_an_input_is_named_and_hashed_the_same_however_its_path_is_written(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.csv").write_text("1")
    expected = {"data/a.csv": hash_bytes(b"1")}
    for written in ("data/a.csv", "./data/a.csv", "data//a.csv", "data/../data/a.csv", "data/./a.csv"):
        assert Hasher().inputs(tmp_path, [written]) == expected, written
    assert Hasher().inputs(tmp_path / "data" / "..", ["data/a.csv"]) == expected


def test_inputs_expand_globs_and_folders_and_say_what_is_missing(tmp_path):
    (tmp_path / "data" / "sub").mkdir(parents=True)
    (tmp_path / "data" / "a.csv").write_text("1")
    (tmp_path / "data" / "sub" / "b.csv").write_text("2")
    hasher = Hasher()
    assert list(hasher.inputs(tmp_path, ["data/**/*.csv"])) == ["data/a.csv", "data/sub/b.csv"]
    assert list(hasher.inputs(tmp_path, ["data"])) == ["data/a.csv", "data/sub/b.csv"]
    for pattern, message in (
        ("*.parquet", "input '*.parquet' matches no file"),
        ("x.txt", "input 'x.txt' does not exist"),
    ):
        try:
            hasher.inputs(tmp_path, [pattern])
        except Missing as exc:
            assert str(exc) == message
        else:
            raise AssertionError("no Missing raised")


class Earlier(NamedTuple):
    run_id: str
    facts: dict[str, Any]
    outputs: dict[str, dict[str, str]]
    key: str = ""


def facts(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "algorithm": "sha256",
        "callable": False,
        "definition": {"command": "c1", "workdir": "w", "dependencies": "d", "declared": "x", "all": "a1"},
        "env": {"EPOCHS": "e3"},
        "os_env": {"CUDA_VERSION": "v12"},
        "inputs": {"data/train.csv": "1a2b3c4d5e6f"},
        "deps": {"prepare": {"out/clean.csv": "77777777aaaa"}},
    }
    return {**base, **changes}


def test_the_reason_names_the_first_fact_that_changed():
    then = Earlier("R1", facts(), {})
    assert explain(facts(), None) == NEVER
    assert explain(facts(inputs={"data/train.csv": "3c4d5e6f7a8b"}), then) == (
        "input data/train.csv changed (was 1a2b3c4d…, now 3c4d5e6f…)"
    )
    assert explain(facts(inputs={**facts()["inputs"], "data/new.csv": "99"}), then) == "input data/new.csv is new"
    assert explain(facts(os_env={"CUDA_VERSION": None}), then) == "environment variable CUDA_VERSION was unset"
    assert explain(facts(env={"EPOCHS": "e4"}), then) == "its env EPOCHS changed"
    changed = {**facts()["definition"], "command": "c2", "all": "a2"}
    assert explain(facts(definition=changed), then) == "its command changed"
    code = {**facts()["definition"], "all": "a2"}
    assert explain(facts(definition=code, callable=True), then) == "its code changed"
    assert explain(facts(deps={"prepare": {"out/clean.csv": "88888888bbbb"}}), then) == (
        "output out/clean.csv of its dependency prepare changed (was 77777777…, now 88888888…)"
    )


def test_matching_facts_with_outputs_as_they_were_is_up_to_date_and_missing_ones_restore_only_from_the_cache():
    then = Earlier("R1", facts(), {"out/model.pt": {"out/model.pt": "abcd"}})
    now = {"out/model.pt": {"out/model.pt": "abcd"}}
    assert decide(facts(), now, [then], lambda d: True)[:3] == (UP_TO_DATE, "up to date (run R1)", "R1")
    gone = {"out/model.pt": None}
    assert decide(facts(), gone, [then], lambda d: True)[:2] == (
        RESTORE,
        "output out/model.pt is missing: restored from the cache",
    )
    assert decide(facts(), gone, [then], lambda d: False)[:2] == (
        RUN,
        "output out/model.pt is missing and the cache does not hold it",
    )
    older = Earlier("R0", facts(inputs={"data/train.csv": "0000"}), {"out/model.pt": {"out/model.pt": "ffff"}})
    assert decide(
        facts(inputs={"data/train.csv": "0000"}), {"out/model.pt": {"out/model.pt": "ffff"}}, [then, older], bool
    )[:3] == (UP_TO_DATE, "up to date (run R0)", "R0")  # back to an earlier branch's inputs


def test_blake3_hashes_when_installed_and_sha256_without_it(monkeypatch):
    """The test extra installs `tuidag[fast]`: BLAKE3 is the algorithm, and without the package it is sha256; both
    keep 128 bits."""
    import hashlib

    import blake3

    assert hashing.ALGORITHM == "blake3"
    assert hashing.hash_bytes(b"rows") == blake3.blake3(b"rows").hexdigest()[:32]
    monkeypatch.setattr(hashing, "_fast_hash", None)
    assert hashing.hash_bytes(b"rows") == hashlib.sha256(b"rows").hexdigest()[:32]
