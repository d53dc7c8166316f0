"""`tuidag graph`: the DAG as plain text (layers), Graphviz dot, or Mermaid."""

from __future__ import annotations

import json

from ..model.counts import counted
from ..model.spec import DagSpec
from .terminal_text import terminal_line


def to_text(dag: DagSpec) -> str:
    """One block per longest-path layer; each task lists what it needs."""
    layers: dict[int, list[str]] = {}
    for name in dag.topological_order:
        layers.setdefault(dag.depth[name], []).append(name)
    edges = sum(len(t.depends_on) for t in dag.tasks.values())
    lines = [
        f"{terminal_line(dag.name)}: {counted(len(dag.tasks), 'task')}, {counted(edges, 'edge')}, "
        f"{counted(len(layers), 'layer')}"
    ]
    for depth in sorted(layers):
        lines.append(f"layer {depth}:")
        for name in layers[depth]:
            deps = dag.tasks[name].depends_on
            lines.append(f"  {name}" + (f"  <- {', '.join(deps)}" if deps else ""))
    return "\n".join(lines) + "\n"


def to_dot(dag: DagSpec) -> str:
    lines = [f"digraph {json.dumps(dag.name)} {{", "  rankdir=LR;", "  node [shape=box];"]
    for name in dag.topological_order:
        lines.append(f"  {json.dumps(name)};")
    for name in dag.topological_order:
        for dep in dag.tasks[name].depends_on:
            lines.append(f"  {json.dumps(dep)} -> {json.dumps(name)};")
    return "\n".join(lines) + "\n}\n"


def to_mermaid(dag: DagSpec) -> str:
    ids = {name: f"t{i}" for i, name in enumerate(dag.topological_order)}
    lines = ["flowchart LR"]
    for name, node in ids.items():
        lines.append(f'  {node}["{name}"]')
    for name in dag.topological_order:
        for dep in dag.tasks[name].depends_on:
            lines.append(f"  {ids[dep]} --> {ids[name]}")
    return "\n".join(lines) + "\n"


FORMATS = {"text": to_text, "dot": to_dot, "mermaid": to_mermaid}
