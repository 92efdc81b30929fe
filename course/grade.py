"""Grade the exercises: run each exercise's tests, print pass/fail and points, write a JSON report in the
format Gradescope's autograder reads.

    python course/grade.py                     # visible tests (course/tests/)
    python course/grade.py --hidden            # also the hidden tests (course/hidden/, instructors only)
    python course/grade.py --json results.json

An exercise earns its points (course/adapters.py) when all of its tests pass; partial credit is the
fraction of its tests that pass.
"""
import argparse
import glob
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from adapters import EXERCISES  # noqa: E402


def run_tests(files):
    """(passed, total) of the tests in these files, run in a fresh process."""
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *files],
                          cwd=os.path.dirname(HERE), capture_output=True, text=True)
    counts = dict((word, int(number)) for number, word in re.findall(r"(\d+) (passed|failed|error)", done.stdout))
    passed = counts.get("passed", 0)
    return passed, passed + counts.get("failed", 0) + counts.get("error", 0)


def grade(hidden=False):
    report = []
    for exercise, (_, points) in EXERCISES.items():
        number = exercise.split("-")[0]  # ex4
        files = sorted(glob.glob(os.path.join(HERE, "tests", f"test_{number}_*.py")))
        if hidden:
            files += sorted(glob.glob(os.path.join(HERE, "hidden", f"test_{number}_*.py")))
        passed, total = run_tests(files) if files else (0, 0)
        score = round(points * passed / total, 2) if total else 0.0
        report.append({"name": exercise, "score": score, "max_score": points,
                       "output": f"{passed} of {total} tests passed"})
    return report


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hidden", action="store_true", help="also run course/hidden/")
    parser.add_argument("--json", metavar="FILE", help="write the report there (Gradescope's results.json format)")
    args = parser.parse_args()
    report = grade(args.hidden)
    for row in report:
        status = "PASS" if row["score"] == row["max_score"] else "FAIL"
        print(f"{row['name']:18s} {status}  {row['score']:5.1f} / {row['max_score']}  ({row['output']})")
    total, maximum = sum(r["score"] for r in report), sum(r["max_score"] for r in report)
    print(f"total {total:.1f} / {maximum}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"score": total, "tests": report}, f, indent=1)
