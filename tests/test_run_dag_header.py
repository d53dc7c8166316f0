"""The DAG's shape kept in a run's journal header: what viewers, the post-mortem browser and the report draw."""


def test_a_stored_run_gives_back_its_dag_shape_and_a_tampered_header_cannot_make_a_cycle(tmp_path):
    from tuidag.launch import RunSession
    from tuidag.model.resources import Request, resolve
    from tuidag.model.spec import DagSpec, TaskSpec
    from tuidag.store.journal import read_header
    from tuidag.store.run_dag import dag_from_header

    dag = resolve(
        DagSpec(
            "d",
            {
                "a": TaskSpec("a", run="true"),
                "b": TaskSpec("b", run="true", depends_on=("a",), resources={"gpu": Request(2)}),
                "c": TaskSpec("c", run="true", depends_on=("a", "b")),
            },
            resources={"gpu": 2},
            max_parallel=3,
        )
    )
    session = RunSession.create(dag, tmp_path)
    try:
        header = read_header(session.run.journal)
    finally:
        session.scheduler.close()
        session.heartbeat.stop()
        session.journal.close()
    back = dag_from_header(header)
    assert list(back.topological_order) == ["a", "b", "c"]
    assert {n: t.depends_on for n, t in back.tasks.items()} == {"a": (), "b": ("a",), "c": ("a", "b")}
    assert dict(back.resources) == {"gpu": 2} and back.tasks["b"].resources["gpu"].count == 2
    assert back.max_parallel == 3
    tampered = dict(header, deps={"a": ["c"], "c": ["c", "ghost", "a"]})
    assert {n: t.depends_on for n, t in dag_from_header(tampered).tasks.items()} == {"a": (), "b": (), "c": ("a",)}
