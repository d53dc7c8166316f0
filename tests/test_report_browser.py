"""The report in a real headless Chromium (Debian's `chromium`; .ci/run installs it): it loads with no console
errors, and its SVG has one bar per attempt, counted in the page's DOM after it loaded."""

from __future__ import annotations

import pytest

from browser import Browser, chromium
from stored_runs import Plan, write_run
from tuidag.views.report import render_html
from tuidag.views.report_facts import report_facts

pytestmark = [
    pytest.mark.skipif(chromium() is None, reason="no chromium (apt-get install chromium)"),
    pytest.mark.xdist_group("report_browser"),
]  # one worker: the module-scoped fixtures are made once


@pytest.fixture(scope="module")
def browser():
    b = Browser()
    yield b
    b.close()


def a_run(state):
    """Forty tasks in four layers; every seventh fails once and is retried, the last one fails for good (its
    dependents are skipped), and a name and a log try to inject markup."""
    plans, deps = {}, {}
    for i in range(40):
        name = f"t{i}" if i != 13 else "</svg><script>console.error('injected')</script>"
        layer = i // 10
        start = layer * 10.0 + (i % 10) * 0.3
        attempts = [(start, start + 2), (start + 3, start + 6)] if i % 7 == 0 else [(start, start + 4)]
        final = "FAILED" if i == 39 else "SUCCEEDED"
        plans[name] = Plan(start - 0.5, attempts, final)
        if layer:
            deps[name] = [list(plans)[(layer - 1) * 10 + (i % 10)]]
    plans["after-failure"] = Plan(50, [], "SKIPPED")
    deps["after-failure"] = ["t39"]
    return write_run(
        state,
        "20260101-000000-000-beef",
        plans,
        deps=deps,
        dag="browser-test",
        logs={"t39": "<script>console.error('from the log')</script>\n\x1b[31mfailed\x1b[0m\n"},
    )


def test_the_report_loads_without_errors_and_draws_a_bar_per_attempt(tmp_path, browser):
    facts = report_facts(a_run(tmp_path), now=100)
    attempts = sum(1 for s in facts["segments"] if s["kind"] == "running")
    assert attempts == 40 + 6  # t0, t7, ..., t35 ran twice
    page = tmp_path / "report.html"
    page.write_text(render_html(facts), encoding="utf-8")
    browser.open(page.as_uri())
    assert browser.errors() == []
    counts = browser.evaluate("""[
        document.querySelectorAll('svg.gantt rect.attempt').length,
        document.querySelectorAll('svg.gantt rect.wait').length,
        document.querySelectorAll('svg.gantt rect.attempt.crit').length,
        document.querySelectorAll('svg.graph g.node').length,
        document.querySelectorAll('script').length,
        document.querySelectorAll('table tbody tr').length,
        document.querySelector('pre').textContent]""")
    waits = sum(1 for s in facts["segments"] if s["kind"] == "waiting")
    assert counts[:2] == [attempts, waits] and counts[2] > 0
    assert counts[3:6] == [41, 0, 41]
    assert counts[6] == "<script>console.error('from the log')</script>\nfailed"


def test_the_error_check_sees_errors(tmp_path, browser):
    """The check above could pass by seeing nothing: a page with a missing image and a console error fails it."""
    page = tmp_path / "bad.html"
    page.write_text('<html><body><img src="missing.png"><script>console.error("boom")</script></body></html>')
    browser.open(page.as_uri())
    errors = browser.errors()
    assert "console: boom" in errors and any("missing.png" in e or "ERR_FILE_NOT_FOUND" in e for e in errors)
