"""Write the student copy of ragen-mini: the repository with every solution region replaced by a stub.

    python course/make_student_copy.py OUT_DIR

A solution region is marked in the project's own code, inside a function body:

    def compute_gae(token_rewards, values, steps, gamma, lam):
        \"\"\"...the docstring stays: it is the exercise's specification...\"\"\"
        # BEGIN SOLUTION ex4-gae
        ...the reference implementation...
        # END SOLUTION

In the copy the region becomes `raise NotImplementedError("exercise ex4-gae: ... (see course/ex4-gae.md)")`
at the region's indentation, naming the exercise and its handout (so every exercise id needs a handout
course/<id>.md); everything outside the regions is copied unchanged, so the student copy imports and runs
its untouched parts. What would give solutions away is left out (LEFT_OUT: the hidden tests, the
instructor guide, the capstone's answer key and reference runs, the course's and the grader's own tests,
raw logs), and a START_HERE.md tells the student where to begin, how to check their work and what a syntax
error costs.
"""
import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BEGIN = re.compile(r"^(\s*)# BEGIN SOLUTION (\S+)\s*$")
END = re.compile(r"^\s*# END SOLUTION\s*$")
# Left out of the copy: the hidden tests and their reference implementations, the instructor guide (it lists
# every planted bug), the instructor's tools for collecting and grading submissions (they grade with the hidden
# tests, which the copy lacks), the course's own tests and the grader's (they quote solution lines to plant bugs)
# and the raw benchmark logs (a compile log quotes the code it compiled).
LEFT_OUT = ("course/hidden/", "course/README.md", "course/grade_folder.py", "course/make_gradescope.py",
            "course/capstone-answer-key.md", "course/capstone_reference.py", "results/capstone/", "plots/capstone_",
            "tests/test_course.py", "tests/test_course_logistics.py", "tests/test_grader_", "bench/results/")
START_HERE = """# Start here

This is the student copy of ragen-mini. The functions of the exercises raise `NotImplementedError`
naming their exercise; each handout, `course/exN-*.md`, says what to implement and where. Check your
work with

    python course/grade.py                 # points per exercise, and each failing test with its message
    python -m pytest -q course/tests       # the same tests, with pytest's own report
    python course/capstone.py              # all done: the Bandit to >= 0.95 on a CPU, with PPO and with GRPO

`course/grade.py` runs on Linux and macOS (on Windows, in WSL); pytest runs the same tests anywhere.

The project's own test suite (`python -m pytest tests`) fails on the unfinished exercises and passes once
every exercise is done. The capstone's second part, an investigation of one of the paper's findings, is
course/capstone-investigation.md.

## What a syntax error costs

Before it runs any test, the grader imports the four files you edit. A file that does not import (a syntax
error, an exception at import time) or whose import does not finish within a minute scores 0 for every
exercise that needs it, hidden tests included, however good the rest of your work is:

| a syntax error in | scores 0 | points lost |
| --- | --- | --- |
| `envs.py` | ex1, ex2, ex9, ex10, ex11, ex12 | 60 of 130 points |
| `starpo.py` | ex3, ex4, ex5, ex6, ex7, ex8, ex10, ex11, ex12, and ex9's test on SmolLM2 | about 100 of 130 |
| `rollout.py` | ex9, ex10, ex11, ex12 | 40 of 130 points |
| `ragen_mini.py` | ex10, ex11, ex12 | 30 of 130 points |

(rollout.py and ragen_mini.py import envs.py; ragen_mini.py imports starpo.py and rollout.py.)

So before you submit, run `python course/grade.py`: it names the file that does not import, and why.
A test that runs longer than a minute fails (an endless loop costs that test, not the others).

## What to submit

For the exercises, submit the four files you edit, `envs.py`, `starpo.py`, `rollout.py` and `ragen_mini.py`, as
they are at the top of your copy (not in a folder, not as links): only those are graded, with the visible tests
and hidden ones, in a fresh copy of the course, so a change to any other file (a test, the grader) is not seen.
The capstone's part (a) is `python course/capstone.py` run on those same files, so it needs nothing more; for part
(b), submit your one-page report (PDF or Markdown, course/capstone-investigation.md) with the run folders it draws
on, each with its `config.yaml` and `metrics.jsonl`.
"""


def stub_regions(text, path="<text>"):
    """The text with each solution region replaced by a NotImplementedError stub naming its exercise.

    >>> print(stub_regions("def f():\\n    # BEGIN SOLUTION ex1-demo\\n    return 1\\n    # END SOLUTION\\n"))
    def f():
        raise NotImplementedError("exercise ex1-demo: implement this (see course/ex1-demo.md)")
    <BLANKLINE>
    """
    out, inside = [], None
    for number, line in enumerate(text.splitlines(keepends=True), 1):
        begin = BEGIN.match(line)
        if begin:
            if inside:
                raise ValueError(f"{path}:{number}: a solution region opens inside another one")
            inside = begin
            # The stub points to the exercise's own handout, course/<exercise id>.md (the README is the
            # instructor guide).
            out.append(f'{begin[1]}raise NotImplementedError("exercise {begin[2]}: implement this '
                       f'(see course/{begin[2]}.md)")\n')
        elif END.match(line):
            if not inside:
                raise ValueError(f"{path}:{number}: END SOLUTION without BEGIN SOLUTION")
            inside = None
        elif not inside:
            out.append(line)
    if inside:
        raise ValueError(f"{path}: a solution region is never closed")
    return "".join(out)


def exercises(root=ROOT):
    """{exercise id: 'file:line'} of every solution region in the tracked Python files."""
    found = {}
    for path in tracked_files(root):
        if path.endswith(".py") and not path.startswith("course/"):
            with open(os.path.join(root, path)) as f:
                for number, line in enumerate(f, 1):
                    begin = BEGIN.match(line)
                    if begin:
                        found[begin[2]] = f"{path}:{number}"
    return found


def tracked_files(root):
    listing = subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True, check=True).stdout
    return [path for path in listing.splitlines() if os.path.isfile(os.path.join(root, path))]


def make_student_copy(out_dir, root=ROOT):
    os.makedirs(out_dir)
    with open(os.path.join(out_dir, "START_HERE.md"), "w") as f:
        f.write(START_HERE)
    for path in tracked_files(root):
        if path.startswith(LEFT_OUT):
            continue
        target = os.path.join(out_dir, path)
        os.makedirs(os.path.dirname(target) or out_dir, exist_ok=True)
        if path.endswith(".py") and path != "course/make_student_copy.py":
            with open(os.path.join(root, path)) as f:
                text = stub_regions(f.read(), path)
            with open(target, "w") as f:
                f.write(text)
        else:
            shutil.copy2(os.path.join(root, path), target)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: python course/make_student_copy.py OUT_DIR")
    if os.path.exists(sys.argv[1]):
        raise SystemExit(f"error: {sys.argv[1]} exists; give a new folder for the student copy")
    make_student_copy(sys.argv[1])
    print(f"wrote the student copy to {sys.argv[1]}: exercises {', '.join(sorted(exercises()))}")
