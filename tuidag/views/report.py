"""`tuidag report`: one self-contained HTML file about a run, the artifact a CI job uploads.

No network and no external assets (inline CSS and SVG, no script), so it opens the same in any browser, offline,
years later. Sections: the run's header, the critical path and the tasks worth making faster, the Gantt chart, the
graph, the table of tasks, and the last lines of each failed task's log. Everything from the run goes through `esc`.
"""

from __future__ import annotations

import json
import time
from typing import Any

from ..model.durations import format_duration
from .report_svg import esc, gantt_svg, graph_svg

STATE_COLOURS = {
    "SUCCEEDED": "#2e9e44",
    "UP_TO_DATE": "#5fafaf",
    "FAILED": "#d43d3d",
    "RETRYING": "#a45ad6",
    "CANCELLED": "#d99a1e",
    "CANCELLING": "#d99a1e",
    "RUNNING": "#2d7fd3",
    "READY": "#1fa88a",
    "SKIPPED": "#aab0b6",
    "UNTARGETED": "#eef0f3",
}
"""Fill of an attempt's bar by how it ended (RETRYING: failed and retried) and of a task's node by its state."""
_CSS = (
    """
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px;color:#1d2125;background:#fff}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #dde1e5}
.meta{color:#4b535b}.meta span{margin-right:18px}.badge{padding:2px 8px;border-radius:10px;color:#fff;font-weight:600}
.o-succeeded{background:#2e9e44}.o-failed,.o-interrupted{background:#d43d3d}.o-running{background:#2d7fd3}
.o-cancelled{background:#a86a00}
.o-other{background:#6c757d}.scroll{overflow:auto;max-height:80vh;border:1px solid #e3e6e9}
table{border-collapse:collapse;font-size:13px}th,td{padding:3px 10px;text-align:left;border-bottom:1px solid #eceef0}
th{background:#f5f6f7;position:sticky;top:0}td.num{text-align:right;font-variant-numeric:tabular-nums}
pre{background:#16191c;color:#e8eaed;padding:10px;overflow:auto;font-size:12px}
ol.path{padding-left:22px;margin:0}.legend span{margin-right:14px}.legend i{display:inline-block;width:18px;
height:10px;margin-right:4px;vertical-align:middle}
svg text{font:11px ui-monospace,Menlo,Consolas,monospace;fill:#1d2125}svg .axis{text-anchor:middle;fill:#4b535b}
svg .label{text-anchor:end}svg .label.crit{font-weight:700}svg .tick{stroke:#e3e6e9}
.attempt{fill:#9aa0a6}.wait{fill:url(#hatch)}rect.crit{stroke:#111;stroke-width:1.5}
.node rect{fill:#dfe3e7;stroke:#8a939c}.node text{fill:#fff}.node.s-SKIPPED text,.node.s-PENDING text,
.node.s-UNTARGETED text,.node.s-QUEUED text{fill:#1d2125}.node.crit rect{stroke:#111;stroke-width:2}
.node.crit text{font-weight:700}
.edge{fill:none;stroke:#9aa3ad;stroke-width:1}.edge.crit{stroke:#111;stroke-width:2.5}
.hatch{background:repeating-linear-gradient(45deg,#eef0f3 0 3px,#9aa3ad 3px 5px)}
"""
    + "".join(
        f".s-{state},.node.s-{state} rect{{fill:{colour}}}td.s-{state}{{color:{colour};font-weight:600}}"
        f"i.s-{state}{{background:{colour}}}"
        for state, colour in STATE_COLOURS.items()
    )
    + """
"""
)


def render_json(facts: dict[str, Any]) -> str:
    return json.dumps(facts, indent=1, allow_nan=False) + "\n"


def render_html(facts: dict[str, Any]) -> str:
    run = facts["run"]
    title = f"{run['dag']} run {run['run_id']}"
    parts = [
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">',
        f"<title>{esc(title)} \u2013 tuidag report</title><style>{_CSS}</style></head><body>",
        _header(run),
        _insight(facts),
        "<h2>Timeline</h2>",
        _legend(),
        f'<div class="scroll">{gantt_svg(facts)}</div>',
        "<h2>Graph</h2>",
        f'<div class="scroll">{graph_svg(facts)}</div>',
        _sweeps(facts),
        "<h2>Tasks</h2>",
        _table(facts),
        _failures(facts),
        f'<p class="meta">Made by tuidag report at {esc(_when(run["reported_at"]))}.</p></body></html>\n',
    ]
    return "".join(parts)


def _when(timestamp: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S %z", time.localtime(timestamp)) if timestamp else "-"


def _header(run: dict[str, Any]) -> str:
    outcome = str(run["outcome"])
    badge = outcome if outcome in ("succeeded", "failed", "cancelled", "interrupted", "running") else "other"
    counts = ", ".join(
        f"{n} {'not a target' if n == 1 else 'not targets'}" if state == "UNTARGETED" else f"{n} {state.lower()}"
        for state, n in sorted(run["counts"].items())
    )
    facts = [
        f"run {esc(run['run_id'])}",
        f"started {esc(_when(run['started_at']))}",
        f"took {esc(format_duration(run['duration']))}",
        f"tasks: {esc(counts) or 'none'}",
        f"max_parallel {esc(run['max_parallel'] or '-')}",
    ]
    if run.get("targets"):  # a run of some tasks only: the others were not part of it
        facts.append("targets " + esc(", ".join(map(str, run["targets"]))))
    if run["capacities"]:
        facts.append("slots " + esc(", ".join(f"{k}={v}" for k, v in run["capacities"].items())))
    if run["host"]:
        facts.append(f"on {esc(run['host'])}")
    if run.get("executor") and run["executor"] != "local":
        facts.append(f"executor {esc(run['executor'])}")
    if run["resumed_from"]:
        facts.append(f"resumed from {esc(run['resumed_from'])}")
    source = f'<div class="meta">{esc(run["source"])}</div>' if run["source"] else ""
    return (
        f'<h1>{esc(run["dag"])} <span class="badge o-{badge}">{esc(outcome)}</span></h1>{source}'
        f'<div class="meta">{"".join(f"<span>{fact}</span>" for fact in facts)}</div>'
    )


def _insight(facts: dict[str, Any]) -> str:
    path = facts["critical_path"]
    if not path:
        return "<h2>Critical path</h2><p>No task ran.</p>"
    length = path[-1]["end"] - path[0]["start"]
    steps = "".join(
        f'<li>{esc(step["task"])} <span class="meta">{esc(format_duration(step["duration"]))}</span></li>'
        for step in path
    )
    text = (
        f"<h2>Critical path</h2><p>The chain of tasks that set the run's length, each waiting for the one "
        f"before it (a dependency, or a thread or resource slot it freed): {len(path):,} "
        f"task{'s' if len(path) != 1 else ''}, {esc(format_duration(length))}, outlined in the timeline and "
        f'the graph.</p><ol class="path">{steps}</ol>'
    )
    if facts["speedups"]:
        items = "".join(
            f"<li>{esc(s['task'])}: the run would have ended {esc(format_duration(s['saved']))} sooner</li>"
            for s in facts["speedups"]
        )
        text += f"<p>Made twice as fast, these tasks would shorten the run most:</p><ol>{items}</ol>"
    else:
        text += "<p>No single task made twice as fast would shorten the run noticeably.</p>"
    return text


def _legend() -> str:
    keys = [
        ("s-SUCCEEDED", "succeeded"),
        ("s-FAILED", "failed"),
        ("s-RETRYING", "failed, retried"),
        ("s-CANCELLED", "cancelled"),
        ("s-RUNNING", "running"),
    ]
    swatches = "".join(f'<span><i class="{cls}"></i>{label}</span>' for cls, label in keys)
    return (
        f'<p class="legend meta">{swatches}<span><i class="hatch"></i>waiting (for a thread, slots, a pause or '
        f"a retry's delay)</span><span>outlined: critical path</span></p>"
    )


def _table(facts: dict[str, Any]) -> str:
    remote = any(task.get("workers") for task in facts["tasks"])  # a run on Dask: which worker ran each attempt
    rows = [
        "<table><thead><tr><th>task</th><th>state</th><th>attempts</th><th>duration</th><th>waited</th>"
        f"<th>exit</th><th>slots</th>{'<th>workers</th>' if remote else ''}<th>reason</th></tr></thead><tbody>"
    ]
    for task in facts["tasks"]:
        workers = ", ".join(f"{n}: {w}" for n, w in task.get("workers", {}).items())
        worker_cell = f"<td>{esc(workers)}</td>" if remote else ""
        state = task["state"] + (" (reused)" if task["reused"] else "")
        rows.append(
            f'<tr><td>{esc(task["name"])}</td><td class="s-{task["state"]}">{esc(state)}</td>'
            f'<td class="num">{task["attempts"]}</td>'
            f'<td class="num">{esc(format_duration(task["duration"]))}</td>'
            f'<td class="num">{esc(format_duration(task["waited"]) if task["waited"] >= 0.05 else "-")}</td>'
            f'<td class="num">{esc("-" if task["exit_code"] is None else task["exit_code"])}</td>'
            f"<td>{esc(task['slots'] or '')}</td>{worker_cell}<td>{esc(task['reason'] or '')}</td></tr>"
        )
    rows.append("</tbody></table>")
    return f'<div class="scroll">{"".join(rows)}</div>'


def _sweeps(facts: dict[str, Any]) -> str:
    """A table per matrix group: its instances by value, with their outcome and duration."""
    groups = [group for group in facts.get("groups") or () if group["instances"]]
    if not groups:
        return ""
    parts = ["<h2>Sweeps</h2>"]
    for group in groups:
        rows = group["instances"]
        done = sum(1 for row in rows if row["state"] in ("SUCCEEDED", "UP_TO_DATE"))
        keys = group["keys"]
        parts.append(f"<h3>{esc(group['name'])}: {done} of {len(rows)} done</h3>")
        head = "".join(f"<th>{esc(key)}</th>" for key in keys)
        parts.append(
            f'<div class="scroll"><table class="sweep"><thead><tr>{head}<th>outcome</th><th>duration</th>'
            "<th>task</th></tr></thead><tbody>"
        )
        for row in rows:
            cells = "".join(f"<td>{esc(row['values'].get(key, ''))}</td>" for key in keys)
            parts.append(
                f'<tr>{cells}<td class="s-{esc(row["state"])}">{esc(row["state"].lower())}</td>'
                f'<td class="num">{esc(format_duration(row["duration"]))}</td><td>{esc(row["task"])}</td></tr>'
            )
        parts.append("</tbody></table></div>")
    return "".join(parts)


def _failures(facts: dict[str, Any]) -> str:
    if not facts["failures"]:
        return ""
    parts = ["<h2>Failures</h2>"]
    for failure in facts["failures"]:
        attempt = f" (attempt {failure['attempt']})" if failure["attempt"] > 1 else ""
        reason = f": {failure['reason']}" if failure["reason"] else ""
        parts.append(f"<h3>{esc(failure['task'])}{esc(attempt)} failed{esc(reason)}</h3>")
        if failure["log_problem"]:
            parts.append(f"<p>{esc(failure['log_problem'])}</p>")
        elif not failure["log"]:
            parts.append("<p>It printed nothing.</p>")
        else:
            lines = "line" if len(failure["log"]) == 1 else f"{len(failure['log'])} lines"
            parts.append(
                f'<p class="meta">The last {lines} of its log:</p><pre>{esc(chr(10).join(failure["log"]))}</pre>'
            )
    return "".join(parts)
