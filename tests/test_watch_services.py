"""Service tasks under `tuidag run --watch`, headless, as a user runs them: a real tuidag process, real servers, real
edits; the services' processes checked with psutil."""

from __future__ import annotations

import signal
import sys

import psutil
import pytest

from dags import alive, read_pids, wait_until
from slowness import patience
from watching import free_port, lines, watching

PY = sys.executable


def test_a_service_stays_up_across_generations_and_its_users_run_against_it(tmp_path):
    port = free_port()
    (tmp_path / "page.txt").write_text("one\n")
    fetch = f"import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:{port}/page.txt').read().decode())"
    dag = f"""
tasks:
  web:
    run: echo $$ >> web.pids; exec {PY} -m http.server {port} --bind 127.0.0.1
    service: true
    ready_when: {{http: "http://127.0.0.1:{port}/page.txt", interval: 50ms}}
  test:
    run: {PY} -c "{fetch}" >> fetched
    depends_on: [web]
    inputs: [page.txt]
"""
    fetched = tmp_path / "fetched"
    with watching(tmp_path, dag) as run:
        wait_until(lambda: lines(fetched) == ["one"] and run.said("[test] --> SUCCEEDED"), timeout=30)
        (web,) = read_pids(tmp_path / "web.pids")
        (tmp_path / "page.txt").write_text("two\n")
        wait_until(lambda: lines(fetched) == ["one", "two"] and run.count("[test] --> SUCCEEDED") == 2, timeout=30)
        assert alive(*web) and len(lines(tmp_path / "web.pids")) == 1  # the same server served both rounds
        assert run.generations() == ["tuidag: gen 2: page.txt changed -> test"]
        assert run.count("[web] --> ready") == 1 and not run.said("[web] --> CANCELLING")
        # each round's end is said though the service keeps the run going (the engine's `settled` event)
        ended = "1 task: 1 succeeded · 1 service up · watching for changes"
        wait_until(lambda: run.count(ended) == 2, timeout=10)
        assert [line.split(" ended")[0] for line in run.output().splitlines() if line.endswith(ended)] == [
            "tuidag: gen 1",
            "tuidag: gen 2",
        ]
        assert run.stop() == 128 + signal.SIGTERM
    assert not alive(*web)


def test_a_service_whose_input_changes_is_restarted_and_its_dependents_wait_for_it_to_be_ready_again(tmp_path):
    # Each attempt of svc says it is up a moment after it starts, with its number in `up`; `use` copies `up`, and
    # fails if it runs while the new attempt is starting (no `up` yet): marks "1 2" means it waited both times.
    (tmp_path / "svc.conf").write_text("1\n")
    dag = """
tasks:
  svc:
    run: echo $$ >> svc.pids; rm -f up; sleep 0.5; echo $TUIDAG_ATTEMPT > up; echo up; exec sleep 120
    service: true
    ready_when: {log: "^up$", interval: 50ms}
    inputs: [svc.conf]
  use:
    run: cat up >> marks
    depends_on: [svc]
  other:
    run: echo other >> others
"""
    marks = tmp_path / "marks"
    with watching(tmp_path, dag) as run:
        wait_until(lambda: lines(marks) == ["1"] and lines(tmp_path / "others") == ["other"], timeout=30)
        (first,) = read_pids(tmp_path / "svc.pids")
        (tmp_path / "svc.conf").write_text("2\n")
        wait_until(lambda: lines(marks) == ["1", "2"], timeout=30)
        assert not alive(*first)
        second = read_pids(tmp_path / "svc.pids")[-1]
        assert alive(*second)
        wait_until(lambda: run.said("[svc] --> CANCELLED"), timeout=10)  # printed in the printer's next round
        assert run.generations() == ["tuidag: gen 2: svc.conf changed -> svc, use"]
        cancelled = [line for line in run.output().splitlines() if line.startswith("[svc] --> CANCELLED")]
        assert len(cancelled) == 1 and cancelled[0].endswith(": restarted: gen 2: svc.conf changed")
        assert lines(tmp_path / "others") == ["other"]  # not downstream of the service: not run again
        journal = run.journal()
        run.stop()
    moves = [(r["task"], r["to"], r.get("attempt")) for r in journal if r.get("type") == "task"]
    queued = [i for i, move in enumerate(moves) if move[:2] == ("use", "QUEUED")]
    assert len(queued) == 2 and queued[1] > moves.index(("svc", "READY", 2))  # queued once svc was ready again
    assert not alive(*second)


# A server that takes `argv[2]` seconds to stop once told, then notes when it did (so a server stopped at the same
# time as another, not after it, notes a time after the other heard it).
SERVER = """\
import signal, sys, time
def bye(*_):
    time.sleep(float(sys.argv[2]))
    open(sys.argv[1] + '.stopped', 'w').write(repr(time.time())); sys.exit(0)
signal.signal(signal.SIGTERM, bye)
open(sys.argv[1] + '.pids', 'a').write(f'{__import__("os").getpid()}\\n')
print('up', flush=True)
while True: time.sleep(1)
"""


@pytest.mark.parametrize("how", ["SIGTERM", "SIGINT", "tuidag stop"])
def test_ending_watch_mode_stops_the_services_in_reverse_dependency_order_and_leaves_nothing(tmp_path, how):
    (tmp_path / "server.py").write_text(SERVER)
    (tmp_path / "c.txt").write_text("1\n")
    dag = f"""
kill_grace: 5s
tasks:
  db:
    run: exec {PY} server.py db 0
    service: true
    ready_when: {{log: "^up$", interval: 50ms}}
  api:
    run: exec {PY} server.py api 0.5
    service: true
    ready_when: {{log: "^up$", interval: 50ms}}
    depends_on: [db]
  client:
    run: echo $$ >> client.pids; sleep 120 & echo $! >> client.pids; wait
    depends_on: [api]
    inputs: [c.txt]
"""
    earlier = {p.pid for p in psutil.Process().children(recursive=True)}  # e.g. an earlier test's forkserver
    with watching(tmp_path, dag) as run:
        wait_until(lambda: len(lines(tmp_path / "client.pids")) == 2, timeout=30)
        refs = [*read_pids(tmp_path / "db.pids"), *read_pids(tmp_path / "api.pids")]
        refs += read_pids(tmp_path / "client.pids")
        if how == "tuidag stop":
            stop = run.tuidag("stop")
            assert stop.returncode == 0, stop.stderr
            code = run.proc.wait(timeout=patience(30))
            assert code == 1  # the client was cancelled: the run's own outcome
        else:
            sig = signal.Signals[how]
            assert run.stop(sig) == 128 + sig
    assert [ref for ref in refs if alive(*ref)] == []
    api_gone = float((tmp_path / "api.stopped").read_text())
    db_heard = float((tmp_path / "db.stopped").read_text())
    assert api_gone < db_heard  # the api, which uses the db, was gone before the db was told to stop
    left = [p for p in psutil.Process().children(recursive=True) if p.pid not in earlier]
    assert not [p for p in left if p.status() != psutil.STATUS_ZOMBIE]
