"""Grade a folder of submissions, one after another, and write one CSV of their points.

    python course/grade_folder.py SUBMISSIONS_DIR --csv grades.csv [--out reports/] [--timeout S] [--user NAME]

Each subfolder of SUBMISSIONS_DIR is one submission (its name is the CSV's first column) holding the exercised files
(envs.py, starpo.py, rollout.py, ragen_mini.py; a missing one costs the exercises that need it, as grade.py says).
Each is graded by course/grade.py in a process of its own, as the instructor grades one submission (course/README.md):
`--submission DIR --hidden --json results.json --teacher-json full.json`, the reports and its printed output written
to OUT/<submission>/. The CSV has a row per submission: its points per exercise (course/adapters.py's order), the
total, and grading_failed, which is empty when grade.py graded it and else says why not (grade.py stopped with an
error, crashed, or ran past --grade-timeout); such a row has no points, and the next submission is graded anyway.
The CSV is rewritten after each submission, so an interrupted run keeps the rows done so far.

--timeout, --import-timeout, --jobs and --user go to grade.py unchanged (--user needs this script to run as root).
"""
import argparse
import csv
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from adapters import EXERCISES  # noqa: E402  (it imports no exercise module)
import grade  # noqa: E402  (for its argument checks and its cleanup of left-over processes; it imports no student code)

FAILED = "grading_failed"
COLUMNS = ["submission", *EXERCISES, "total", FAILED]
ERROR_CHARS = 300  # of a failure's reason in the CSV: the line that says why, not a traceback


class Stop(Exception):
    """A problem with this script's input: printed as one line, and nothing is graded."""


def submissions(folder):
    """The submission folders in the folder, sorted by name; hidden ones (.git, .DS_Store's kin) are not."""
    if not os.path.isdir(folder):
        what = "is not a folder" if os.path.exists(folder) else "no such folder"
        raise Stop(f"{folder}: {what}; give the folder whose subfolders are the submissions")
    found = sorted(name for name in os.listdir(folder)
                   if not name.startswith(".") and os.path.isdir(os.path.join(folder, name)))
    if not found:
        raise Stop(f"{folder} holds no submission folder; put each student's files in a subfolder of their own "
                   "(its name becomes their row in the CSV)")
    return found


def check_csv(path):
    """Stop before grading when the CSV cannot be written (hours of grading would be lost at the end)."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise Stop(f"--csv {path} is a folder; give a file name, e.g. {os.path.join(path, 'grades.csv')}")
    if not os.path.isdir(folder):
        raise Stop(f"--csv {path}: the folder {folder} does not exist; create it or give another path")
    existed = os.path.exists(path)
    try:
        with open(path, "a"):
            pass
    except OSError as error:
        raise Stop(f"--csv {path} cannot be written ({error.strerror}); give a path in a folder you can write")
    if not existed:
        os.remove(path)


def points(report):
    """{exercise: points} from grade.py's full report (--teacher-json): each row's name starts with its exercise."""
    earned = {}
    for test in report["tests"]:
        exercise = test["name"].split(" ")[0].rstrip(":")
        earned[exercise] = earned.get(exercise, 0.0) + float(test["score"])
    missing = [x for x in EXERCISES if x not in earned]
    if missing:
        raise ValueError(f"the report has no row for {', '.join(missing)}")
    return {x: earned[x] for x in EXERCISES}


def number(value):
    """A point count as the CSV shows it: 10, 7.5, 3.33."""
    return format(round(value, 2), "g")


def reason(code, stderr, log):
    """Why grade.py gave no report, in one line: its error line (grade.py stops with one), else its last line."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    why = lines[-1] if lines else f"no message; see {log}"
    why = f"grade.py exited with code {code}: {why}" if code else f"grade.py wrote no report: {why}"
    return why if len(why) <= ERROR_CHARS else why[:ERROR_CHARS] + " ..."


def kill(process):
    """End grade.py and what it started: its process group, then whatever is left (this script is their
    subreaper: grade.py's test processes lead groups of their own)."""
    grade.kill_group(process.pid)
    process.wait()
    grade.stop_leftovers()


def grade_one(submission, out, command, limit):
    """Grade one submission into its report folder. -> ({exercise: points}, None) or (None, why grading failed)."""
    os.makedirs(out, exist_ok=True)
    results, full, log = (os.path.join(out, name) for name in ("results.json", "full.json", "grade.log"))
    for report in (results, full, log):  # last run's reports would pass for this run's; nothing else is removed
        if os.path.isfile(report):
            os.remove(report)
    args = [*command, "--submission", submission, "--hidden", "--json", results, "--teacher-json", full]
    with open(log, "w") as output:
        process = subprocess.Popen(args, stdout=output, stderr=subprocess.PIPE, text=True, cwd=out,
                                   start_new_session=True)
        try:
            _, stderr = process.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            kill(process)
            return None, f"grading ran past --grade-timeout ({limit:g} s) and was stopped"
        grade.stop_leftovers()
        output.write(stderr)
    if process.returncode != 0 or not os.path.isfile(full):
        return None, reason(process.returncode, stderr, log)
    try:
        with open(full) as f:
            return points(json.load(f)), None
    except (OSError, ValueError, KeyError, TypeError) as error:
        return None, f"could not read {full}: {error}"


def write_csv(path, rows):
    """Write the CSV in one step (a reader, or an interrupted run, never leaves half a file)."""
    temporary = f"{path}.{os.getpid()}.tmp"
    with open(temporary, "w", newline="") as f:
        writer = csv.DictWriter(f, COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    os.replace(temporary, path)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folder", metavar="SUBMISSIONS_DIR", help="a folder with one subfolder per submission")
    parser.add_argument("--csv", required=True, metavar="FILE", help="the CSV to write (replaced if it exists)")
    parser.add_argument("--out", metavar="DIR", help="where each submission's reports go, OUT/<submission>/ "
                        "(default: a folder beside the CSV named after it, grades-reports/ for grades.csv)")
    parser.add_argument("--timeout", type=grade.positive, help="seconds one test may run (grade.py's, default 60)")
    parser.add_argument("--import-timeout", type=grade.positive,
                        help="seconds a module's import may take (grade.py's, default 60)")
    parser.add_argument("--jobs", type=grade.count, metavar="N", help="test processes at once (grade.py's)")
    parser.add_argument("--user", metavar="NAME", help="run the student's code as this user (grade.py's; run this "
                        "script as root): see course/README.md")
    parser.add_argument("--grade-timeout", type=grade.positive, default=3600.0, metavar="S",
                        help="seconds one submission's whole grading may take (default 3600)")
    parser.add_argument("--grader", default=os.path.join(HERE, "grade.py"), metavar="SCRIPT",
                        help="the grading script (default: this course's grade.py; the tests give a stand-in)")
    args = parser.parse_args(argv)
    try:
        names = submissions(args.folder)
        check_csv(args.csv)
        out = args.out or os.path.splitext(os.path.abspath(args.csv))[0] + "-reports"
        try:
            os.makedirs(out, exist_ok=True)
            if args.user is not None:  # the student's code, run as that user, must not read or change a report
                os.chmod(out, 0o700)
        except OSError as error:
            raise Stop(f"--out {out} cannot be created ({error.strerror}); give a folder you can write")
    except Stop as error:
        print(f"grade_folder.py: error: {error}", file=sys.stderr)
        raise SystemExit(2)
    passed = []
    for option in ("timeout", "import_timeout", "jobs", "user"):
        if getattr(args, option) is not None:
            passed += [f"--{option.replace('_', '-')}", str(getattr(args, option))]
    command = [sys.executable, os.path.abspath(args.grader), *passed]
    # grade.py's test processes lead process groups of their own: as their subreaper, this script can still end
    # what a submission's grading left running when it had to be stopped, before the next one starts.
    if grade.LIBC is not None:
        grade.LIBC.prctl(grade.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    rows, most = [], sum(p for *_, p in EXERCISES.values())
    for index, name in enumerate(names, 1):
        start = time.monotonic()
        earned, failed = grade_one(os.path.abspath(os.path.join(args.folder, name)), os.path.join(out, name),
                                   command, args.grade_timeout)
        row = {"submission": name, FAILED: failed or ""}
        if earned is not None:
            row.update({x: number(p) for x, p in earned.items()}, total=number(sum(earned.values())))
        rows.append(row)
        write_csv(args.csv, rows)
        status = f"{row['total']} / {most}" if earned is not None else f"FAILED: {failed}"
        print(f"[{index}/{len(names)}] {name}: {status} ({time.monotonic() - start:.0f} s)", flush=True)
    failures = sum(bool(row[FAILED]) for row in rows)
    print(f"wrote {args.csv}: {len(rows)} submissions, {failures} whose grading failed; reports in {out}")


if __name__ == "__main__":
    main()
