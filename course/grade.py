"""Grade the exercises: run each exercise's tests in a process of its own, print pass/fail and points, write
a JSON report in the format Gradescope's autograder reads.

    python course/grade.py                     # visible tests (course/tests/)
    python course/grade.py --hidden            # also the hidden tests (course/hidden/, instructors only)
    python course/grade.py --json results.json --only ex4-gae --timeout 60

An exercise's points (course/adapters.py) are shared among its tests by weight (a test module's WEIGHTS,
1 by default); a test earns its share when it passes. Each exercise's tests run in a fresh process with a
time limit, so a student's infinite loop, crash or syntax error costs only the exercises it touches: an
import error gives 0 to the exercises of that file and puts the error's first lines in the report.
"""
import argparse
import concurrent.futures
import glob
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from adapters import EXERCISES  # noqa: E402  (it imports no exercise module)

ERROR_LINES = 12  # of an import error's traceback: its last lines name the file, line and error
VISIBILITY = {"visible": "visible", "hidden": "after_published"}  # Gradescope shows hidden results once published


def test_files(exercise, hidden):
    number = exercise.split("-")[0]  # ex4
    files = sorted(glob.glob(os.path.join(HERE, "tests", f"test_{number}_*.py")))
    if hidden:
        files += sorted(glob.glob(os.path.join(HERE, "hidden", f"test_{number}_*.py")))
    return files


def part_of(nodeid):
    return "hidden" if nodeid.replace(os.sep, "/").startswith("course/hidden/") else "visible"


def short(nodeid):
    """course/tests/test_ex4_gae.py::test_x[1] -> test_x[1]"""
    return nodeid.split("::", 1)[-1]


def last_lines(text, n=ERROR_LINES):
    return "\n".join(text.strip().splitlines()[-n:])


def run_exercise(exercise, files, timeout):
    """Run the files' tests in a fresh pytest process; -> (events, exit code or None on timeout, output)."""
    with tempfile.TemporaryDirectory(prefix="grade-") as tmp:
        results = os.path.join(tmp, "results.jsonl")
        env = dict(os.environ, GRADE_RESULTS=results, PYTHONPATH=os.pathsep.join([HERE, ROOT]),
                   PYTHONDONTWRITEBYTECODE="1")
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--noconftest",
                   "-p", "grading_plugin", *[os.path.relpath(f, ROOT) for f in files]]
        try:
            done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
            code, output = done.returncode, done.stdout + done.stderr
        except subprocess.TimeoutExpired as stopped:
            code, output = None, (stopped.stdout or b"").decode(errors="replace") if isinstance(
                stopped.stdout, bytes) else (stopped.stdout or "")
        events = []
        if os.path.exists(results):
            with open(results) as f:
                events = [json.loads(line) for line in f if line.endswith("\n")]
    return events, code, output


def score_exercise(exercise, points, events, code, output, timeout):
    """Gradescope rows of one exercise: one per test (name, score, max_score, output, visibility), or one
    row with max_score = the exercise's points when its tests could not run at all."""
    errors = [e for e in events if e["event"] == "collect_error"]
    collected = [e for e in events if e["event"] == "collected"]
    if errors or not collected:
        if errors:
            message = "\n\n".join(f"could not import {e['file']}:\n{last_lines(e['message'])}" for e in errors)
        elif code is None:
            message = f"the tests did not start within the {timeout:g} s time limit"
        else:
            message = f"no test ran (pytest exit code {code}):\n{last_lines(output)}"
        part = part_of(errors[0]["file"]) if errors else "visible"
        return [{"name": f"{exercise}: could not run its tests", "score": 0.0, "max_score": points,
                 "output": message, "visibility": "visible", "part": part, "passed": False}]
    outcome = {}
    for e in events:
        if e["event"] == "result":
            ok, message = outcome.get(e["test"], (True, ""))
            outcome[e["test"]] = (ok and e["passed"], message or e["message"])
    started = [e["test"] for e in events if e["event"] == "started"]
    total_weight = sum(e["weight"] for e in collected)
    rows = []
    for e in collected:
        test = e["test"]
        if test in outcome:
            passed, message = outcome[test]
        elif code is None and started and started[-1] == test:
            passed, message = False, f"did not finish: the exercise's {timeout:g} s time limit ran out here"
        else:
            passed = False
            message = ("not run: the time limit ran out on an earlier test" if code is None
                       else f"no result (pytest exit code {code}):\n{last_lines(output)}")
        share = points * e["weight"] / total_weight
        part = part_of(test)
        rows.append({"name": f"{exercise} {part}: {short(test)}", "score": share if passed else 0.0,
                     "max_score": share, "output": message, "visibility": VISIBILITY[part],
                     "part": part, "passed": passed})
    return rows


def grade(hidden=False, only=None, timeout=120.0, jobs=None):
    """{exercise: rows}, in EXERCISES' order."""
    if hidden and not glob.glob(os.path.join(HERE, "hidden", "test_*.py")):
        raise SystemExit(f"grade.py: --hidden needs the hidden tests in {os.path.join(HERE, 'hidden')}, and there "
                         "are none. Copy course/hidden/ from the instructor's repository into this copy, or grade "
                         "without --hidden.")
    chosen = [x for x in EXERCISES if only is None or x in only]
    jobs = jobs or min(4, os.cpu_count() or 1)

    def one(exercise):
        files = test_files(exercise, hidden)
        if not files:
            return [{"name": f"{exercise}: could not run its tests", "score": 0.0, "max_score": EXERCISES[exercise][2],
                     "output": f"no test file course/tests/test_{exercise.split('-')[0]}_*.py", "visibility": "visible",
                     "part": "visible", "passed": False}]
        return score_exercise(exercise, EXERCISES[exercise][2], *run_exercise(exercise, files, timeout), timeout)

    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:  # each exercise is a process of its own
        return dict(zip(chosen, pool.map(one, chosen)))


def summary(graded):
    lines = []
    for exercise, rows in graded.items():
        score, maximum = sum(r["score"] for r in rows), EXERCISES[exercise][2]
        failed = [r for r in rows if not r["passed"]]
        lines.append(f"{exercise:18s} {'PASS' if not failed else 'FAIL'}  {score:5.2f} / {maximum}  "
                     f"({len(rows) - len(failed)} of {len(rows)} tests passed)")
        for r in failed:
            first = r["output"].splitlines()[0] if r["output"] else ""
            lines.append(f"    FAILED {r['name']}: {first}")
    total, maximum = sum(r["score"] for rows in graded.values() for r in rows), sum(
        EXERCISES[x][2] for x in graded)
    lines.append(f"total {total:.2f} / {maximum}")
    return "\n".join(lines), total


def gradescope(graded, text, total):
    """Gradescope's results.json: score, output, and tests[] with name, score, max_score, output, visibility."""
    tests = [{key: r[key] for key in ("name", "score", "max_score", "output", "visibility")}
             for rows in graded.values() for r in rows]
    return {"score": round(total, 2), "output": text, "tests": tests}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hidden", action="store_true", help="also run course/hidden/")
    parser.add_argument("--json", metavar="FILE", help="write the report there (Gradescope's results.json format)")
    parser.add_argument("--only", nargs="+", choices=list(EXERCISES), metavar="EXERCISE",
                        help=f"grade these exercises only ({', '.join(EXERCISES)})")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per exercise (default 120)")
    parser.add_argument("--jobs", type=int, help="exercises graded at once (default: up to 4, one per core)")
    args = parser.parse_args()
    graded = grade(args.hidden, args.only, args.timeout, args.jobs)
    text, total = summary(graded)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(gradescope(graded, text, total), f, indent=1)
