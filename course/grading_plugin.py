"""The pytest plugin course/grade.py loads into each exercise's test process: it writes one JSON line per
event to the file named by $GRADE_RESULTS, at once, so that a process killed at the time limit still
leaves the results of the tests that finished and the name of the one that was running.

A test's weight (its share of the exercise's points) is 1 unless its module's WEIGHTS dict names it:
    WEIGHTS = {"test_the_worked_example": 3}
"""
import json
import os

MESSAGE_CHARS = 1500  # Gradescope shows the output as is: the assertion and its values, not pages of source


def _write(record):
    with open(os.environ["GRADE_RESULTS"], "a") as f:
        f.write(json.dumps(record) + "\n")


def _message(report):
    """The failure's one-line summary (pytest's 'E ...' lines), then its location, cut to MESSAGE_CHARS."""
    crash = getattr(report.longrepr, "reprcrash", None)
    lines = [line[2:] for line in report.longreprtext.splitlines() if line.startswith("E ")]
    text = "\n".join(lines) if lines else (crash.message if crash else report.longreprtext)
    if crash is not None:
        text += f"\n  at {os.path.basename(crash.path)}:{crash.lineno}"
    return text if len(text) <= MESSAGE_CHARS else text[:MESSAGE_CHARS] + "\n  ..."


def pytest_collection_modifyitems(items):
    for item in items:
        weights = getattr(item.module, "WEIGHTS", {}) if getattr(item, "module", None) else {}
        _write({"event": "collected", "test": item.nodeid,
                "weight": weights.get(getattr(item, "originalname", item.name), 1)})


def pytest_collectreport(report):
    if report.failed:  # an import or syntax error in the test file or in the code it imports
        _write({"event": "collect_error", "file": report.nodeid, "message": report.longreprtext})


def pytest_runtest_logstart(nodeid, location):
    _write({"event": "started", "test": nodeid})


def pytest_runtest_logreport(report):
    if report.when == "call" or report.failed:  # a failing setup or teardown fails the test too
        _write({"event": "result", "test": report.nodeid, "passed": report.passed,
                "message": "" if report.passed else _message(report)})
