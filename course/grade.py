"""Grade the exercises: print each exercise's points and every failing test with its message, and write the report
Gradescope's autograder reads.

    python course/grade.py                      # a student's own check, in their copy: the visible tests
    python course/grade.py --submission DIR --hidden --json results.json     # the instructor's grading
    python course/grade.py --only ex4-gae --timeout 30

How it grades (course/README.md says why, and what it cannot stop):
- In the instructor's repository it builds a fresh tree from the release (the student copy,
  course/make_student_copy.py) and copies in only the exercised files (MODULES) from the submission
  (DIR, or this repository's own solution without --submission). Nothing else a student wrote is ever on
  the path: no sitecustomize.py, conftest.py, pytest.ini or plugin of theirs.
- The student's code runs only in child processes (course/grading_plugin.py), forked from a server that runs
  no student code and that this process starts with `python -I -B`; a child runs pytest with a pytest.ini the
  grader writes, no conftest, no plugin but the grader's own and no PYTEST_* variables. The server imports torch
  and the other heavy modules once, so that a child starts with them rather than spending seconds on them. Each
  child reports over a pipe, test by test; this process alone scores and writes the reports.
- First a child imports the exercised modules one by one, with a time limit: a module that fails or hangs
  costs the exercises that need it once, with one message, and is refused at once in the later children.
- Then each exercise's visible tests run in a child of their own, and only after every one has ended (and
  whatever they left running is killed) the hidden tests, which the grader read before starting any child.
  A test that runs past --timeout is failed, its process killed, and the exercise's remaining tests go on in
  a fresh one. The hidden tests' children come from a server of their own, started after the visible tests'
  server and everything else was killed.
- results.json, which students see, names no hidden test and quotes no message of one, and no visible
  message that quotes the hidden files; --teacher-json writes the full report, and stdout prints it (the
  report tells Gradescope to hide stdout from students).
- --user NAME (grade.py running as root) runs the children as NAME, who must be unable to read this
  repository: what makes the solution and the hidden files unreadable to the student's code, and the grader
  out of its reach. A process boundary alone does not (course/README.md says what the container must do).

An exercise's points (course/adapters.py) are shared among its tests by weight (a test module's WEIGHTS, 1 by
default); a test earns its share when it passes.
"""
import argparse
import ast
import concurrent.futures
import ctypes
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import namedtuple

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from adapters import EXERCISES  # noqa: E402  (it imports no exercise module)

# The exercised modules, each before those that import it (rollout imports envs; ragen_mini imports all three), so
# that the import check blames a hang on the module that hangs, not on one that imports it.
MODULES = ("envs", "starpo", "rollout", "ragen_mini")
PLUGIN = os.path.join("course", "grading_plugin.py")  # the child's program, in the graded tree
PINNED_INI = """[pytest]
markers =
    slow: trains or evaluates whole runs
"""
ERROR_LINES = 12  # of a traceback: its last lines name the file, line and error
MESSAGE_CHARS = 1500  # of a failure's message: the assertion and its values, not pages
HEADLINE_CHARS = 200  # of the summary line's message
REPORT_BYTES = 4_000_000  # what one child may send; more is a flood, and the child is stopped
OUTPUT_CHARS = 4000  # of a child's own stdout and stderr, kept for a message when no test ran
SERVER_SECONDS = 10  # the server tells a child's pid and exit code at once; not within this, it has ended or stopped
SECRET_CHARS = 16  # a line of a hidden file this long, found in a visible message, withholds that message
WITHHELD = "(the grader withheld this message: it quotes the hidden tests)"
VISIBILITY = {"visible": "visible", "hidden": "after_published"}  # Gradescope shows hidden rows once published


class GradingError(Exception):
    """A problem with the grader's input (its arguments, the submission, the repository): one line, no traceback."""


# ---------------------------------------------------------------------------------------------- the tree
def build_tree(submission, workdir):
    """The folder the tests run in, and {module: (why it cannot be graded, in one line)} for the exercised files
    the submission lacks.

    In the instructor's repository (it holds course/hidden/): the release, as make_student_copy writes it, in
    workdir/tree, with the submission's exercised files (MODULES) copied over its stubs; submission None
    grades this repository's own files (the solution). In a student copy: the copy itself."""
    if not os.path.isdir(os.path.join(HERE, "hidden")):
        if submission is not None:
            raise GradingError("--submission needs the instructor's repository (with course/hidden/); in a "
                               "student copy, grade.py grades the copy itself")
        return ROOT, {}
    from make_student_copy import make_student_copy
    tree = os.path.join(workdir, "tree")
    try:
        make_student_copy(tree, ROOT)
    except (OSError, subprocess.CalledProcessError) as error:
        raise GradingError(f"could not build the release from {ROOT} (a git checkout of the course): {error}")
    source, missing = submission or ROOT, {}
    for module in MODULES:
        path = os.path.join(source, f"{module}.py")
        if os.path.islink(path):  # a link could point at the instructor's solution
            missing[module] = (f"{module}.py is a link in the submission; submit the file itself",) * 2
        elif not os.path.isfile(path):
            missing[module] = (f"the submission has no {module}.py (it belongs at the top of the submitted folder)",
                               f"the submission has no {module}.py")
        else:
            shutil.copyfile(path, os.path.join(tree, f"{module}.py"))
    return tree, missing


def read_tests(folder, exercise):
    """{file name: source} of an exercise's test files in the folder (test_ex4_*.py for ex4-gae)."""
    prefix = f"test_{exercise.split('-')[0]}_"
    found = {}
    for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
        if name.startswith(prefix) and name.endswith(".py"):
            with open(os.path.join(folder, name), encoding="utf-8", errors="replace") as f:
                found[name] = f.read()
    return found


def tests_in(source):
    """[(test function name, weight)] of a test file, read from its source (nothing of it runs here): pytest's test
    functions (top-level, named test*), weighted by the module's WEIGHTS dict (1 by default)."""
    tree = ast.parse(source)
    weights = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "WEIGHTS" for t in node.targets):
            weights = ast.literal_eval(node.value)
    return [(node.name, weights.get(node.name, 1)) for node in tree.body
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test")]


# ---------------------------------------------------------------------------------------------- the children
class Place(namedtuple("Place", "tree workdir user")):
    """Where the children run: the graded tree (their working folder), the grader's own folder for the pinned
    pytest.ini and their output, and the user they run as (a pwd entry, or None for this process's user)."""


def as_user(place):
    """subprocess.Popen's arguments for the child's user and environment. The environment is this one without
    PYTEST_* (PYTEST_ADDOPTS, PYTEST_PLUGINS could add plugins or options), with pytest's plugin autoloading off
    (python -I ignores the PYTHON* variables); a child of another user gets that user's name and a home of its
    own in the grader's folder, and no group of this process."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST_")}
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    if place.user is None:
        return {"env": env}
    env.update(HOME=os.path.join(place.workdir, "home"), USER=place.user.pw_name, LOGNAME=place.user.pw_name)
    return {"env": env, "user": place.user.pw_uid, "group": place.user.pw_gid, "extra_groups": []}


def check_user(place, teacher):
    """Make the grader's folder passable for place.user (not listable) and give it a home there; then, as that
    user, run Python in the tree and try to read the instructor's files (teacher: the solution and the hidden
    tests). -> None when the user can run the tests and read none of them, else the problem in one line."""
    os.chmod(place.workdir, 0o711)
    home = os.path.join(place.workdir, "home")
    os.mkdir(home, 0o700)
    os.chown(home, place.user.pw_uid, place.user.pw_gid)
    hidden = os.path.join(HERE, "hidden")
    private = ([os.path.join(ROOT, f"{m}.py") for m in MODULES] +
               [os.path.join(hidden, name) for name in sorted(os.listdir(hidden))]) if teacher else []
    try_to_read = "import sys\nfor path in sys.argv[1:]:\n    try:\n        open(path).close()\n        print(path)\n" \
                  "    except OSError:\n        pass\n"
    name = place.user.pw_name
    try:
        done = subprocess.run([sys.executable, "-I", "-c", try_to_read, *private], cwd=place.tree,
                              capture_output=True, text=True, timeout=120, **as_user(place))
    except (OSError, subprocess.SubprocessError) as error:  # it may not even enter the tree
        return f"user {name} cannot run {sys.executable} in {place.tree}: {error}"
    if done.returncode != 0:
        return f"user {name} cannot run {sys.executable} in {place.tree}: {last_lines(done.stderr, place.tree, 1)}"
    if done.stdout.split():
        return (f"user {name} can read {done.stdout.split()[0]}: make the instructor's repository unreadable to it "
                f"(chmod -R o-rwx {ROOT}, and keep {name} out of its group)")
    return None


class Server:
    """grading_plugin.py's server, which forks the children: a process of place.user, started with `python -I -B`
    in the tree, without PYTEST_* variables, which imports torch and the other heavy modules once and runs no
    student code. One server serves one stage of the grading (`with Server(place, modules) as server:`, modules:
    the exercised modules whose exercises it grades, for what it imports), and is killed at its end."""

    def __init__(self, place, modules):
        self.place = place
        self.control, theirs = socket.socketpair()
        self.output = tempfile.TemporaryFile(dir=place.workdir)  # the server's own: why it ended, if it did
        with theirs:
            self.process = subprocess.Popen(
                [sys.executable, "-I", "-B", os.path.join(place.tree, PLUGIN), str(theirs.fileno()), *sorted(modules)],
                cwd=place.tree, stdin=subprocess.DEVNULL, stdout=self.output, stderr=subprocess.STDOUT,
                pass_fds=[theirs.fileno()], start_new_session=True, **as_user(place))

    def __enter__(self):
        return self

    def __exit__(self, *error):
        kill_group(self.process.pid)
        self.process.wait()
        self.control.close()
        self.output.close()

    def fork(self, job, report, output):
        """Have the server fork a child on the job (a dict, written to the child's stdin), with `report` the write
        end of its report pipe and `output` (a file) its stdout and stderr. -> the Child."""
        job_read, job_write = os.pipe()
        status_read, status_write = os.pipe()
        try:
            socket.send_fds(self.control, [b"f"], [job_read, report, output.fileno(), status_write])
        except OSError:  # the server has ended (the student's code can kill it): the child's output says so
            self.output.seek(0)
            output.write(f"the server that starts the test processes has ended (exit code {self.process.poll()}):\n"
                         .encode() + self.output.read())
        finally:
            os.close(job_read)
            os.close(status_write)
        try:
            os.write(job_write, (json.dumps(job) + "\n").encode())
        except BrokenPipeError:  # it ended before reading the job; its output says why
            pass
        finally:
            os.close(job_write)
        return Child(status_read)


class Child:
    """A child the server forked, as the server tells of it on the status pipe: its pid at once and, once it has
    ended, its exit code (returncode, as Popen's: -N for signal N), then the pipe's end (ended). A server that has
    ended or stopped tells no more: the pid or the exit code stays None."""

    def __init__(self, status):
        self.status, self.told, self.ended = status, b"", False
        self.pid = self.returncode = None

    def read(self, wait, enough):
        """Read what the server tells until enough() or the pipe's end, waiting up to `wait` seconds."""
        deadline = time.monotonic() + wait
        while not (enough() or self.ended) and select.select([self.status], [], [],
                                                              max(0.0, deadline - time.monotonic()))[0]:
            chunk = os.read(self.status, 64)
            self.ended, self.told = not chunk, self.told + chunk
            lines = self.told.split(b"\n")[:-1]
            if lines:
                self.pid = int(lines[0])
            if len(lines) > 1:
                self.returncode = int(lines[1])

    def poll(self, wait=0.0):
        """The exit code, or None while the child runs; waits up to `wait` seconds for it."""
        self.read(wait, lambda: self.returncode is not None)
        return self.returncode


def kill_group(pid):
    """Kill the process and every process of its group (it leads one: start_new_session, or setsid in a child)."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run_child(job, server, first_wait, next_wait):
    """Have the server fork one child on the job, and follow its events. -> (events, ending, exit code, its output's
    end).

    The child has `first_wait` seconds until its first event and `next_wait` from each event to the next, and is
    killed when they run out (ending "timeout"), or when it sends more than REPORT_BYTES ("flood"); else the
    ending is "exited". Lines that are not JSON objects with an "event" are dropped."""
    read_end, write_end = os.pipe()
    with tempfile.TemporaryFile(dir=server.place.workdir) as output:
        child = server.fork(dict(job, root=server.place.tree), write_end, output)
        os.close(write_end)  # the child's copy stays open; when its last holder exits, the pipe reads empty
        events, pending, received = [], b"", 0
        deadline, ending = time.monotonic() + first_wait, None
        while ending is None:
            wait = deadline - time.monotonic()
            if wait <= 0:
                ending = "timeout"
                break
            # Short waits: a process the child started may hold the pipe open after the child has exited.
            if not select.select([read_end], [], [], min(wait, 0.2))[0]:
                if child.poll() is not None and not select.select([read_end], [], [], 0)[0]:
                    ending = "exited"
                continue
            chunk = os.read(read_end, 65536)
            received += len(chunk)
            if not chunk or received > REPORT_BYTES:
                ending = "exited" if not chunk else "flood"
                break
            *lines, pending = (pending + chunk).split(b"\n")
            for line in lines:
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                if isinstance(event, dict) and isinstance(event.get("event"), str):
                    events.append(event)
                    deadline = time.monotonic() + next_wait
        os.close(read_end)
        if ending == "exited":  # give it a moment to exit by itself, so that its exit code is its own
            child.poll(wait=5)
        # Its pid: the server tells it at once, but may still have been importing for the first children, and a
        # flood left the loop above no pause to read it
        child.read(SERVER_SECONDS, lambda: child.pid is not None)
        if child.pid is not None and child.poll() is None:  # an ended child's group the server killed, unreaped
            kill_group(child.pid)
        child.poll(wait=SERVER_SECONDS)  # the server reaps it at once, and tells its exit code
        os.close(child.status)
        output.seek(0, os.SEEK_END)
        output.seek(max(0, output.tell() - OUTPUT_CHARS))
        tail = output.read().decode(errors="replace")
    return events, ending, child.returncode, tail


def last_lines(text, tree, n=ERROR_LINES):
    """The text's last n lines, with the graded tree's path taken out of file names."""
    return "\n".join(text.replace(os.path.join(tree, ""), "").strip().splitlines()[-n:])


def check_imports(modules, server, import_timeout):
    """Import the modules in MODULES' order in a child. -> ({module: None if it imports, else (why not, in one
    line)}, {module: why} of those that hung or ended the process, which the test processes must not import).

    A module whose import hangs or ends the process is blocked, and a fresh child goes on with the modules
    after it; a module that imports a blocked one fails at once, naming it. So a hang costs its time limit once."""
    tree, status, blocked = server.place.tree, {}, {}
    todo = [m for m in MODULES if m in modules]
    while todo:
        events, ending, code, output = run_child({"mode": "probe", "modules": todo, "blocked": blocked}, server,
                                                 import_timeout, import_timeout)
        current = None
        for event in events:
            module = event.get("module")
            if module not in todo or module in status:
                continue
            if event["event"] == "importing":
                current = module
            elif event["event"] == "imported":
                status[module] = None
            elif event["event"] == "import_error":
                by = event.get("blocked_by")
                status[module] = ((f"it imports {by}.py: {blocked[by]}",) * 2 if by in blocked else
                                  (last_lines(str(event.get("message")), tree),
                                   last_lines(str(event.get("headline")), tree, 1)))
        if current is not None and current not in status:  # the child stopped inside this import
            why = (f"its import did not finish within {import_timeout:g} s (an endless loop at import time?)"
                   if ending == "timeout" else f"its import ended the process (exit code {code})")
            status[current], blocked[current] = (why, why), why
        elif not any(m in status for m in todo):  # the child never began: the reason is in its own output
            status.update({m: (f"the import check did not run (exit code {code}):\n{last_lines(output, tree)}",
                               f"the import check did not run (exit code {code})") for m in todo})
        todo = [m for m in todo if m not in status]
    return status, blocked


def run_part(tests, server, blocked, timeout, import_timeout):
    """Run one part (an exercise's visible or its hidden tests) in children. tests: [(file, name)], file relative
    to the tree; blocked: {module: why} of the modules the children must not import.
    -> ({(file, name): (passed, message, headline)}, None), or ({}, why no test could run).

    A test that runs past `timeout`, or during which the child ended, fails, and the tests after it run in a
    fresh child; what a child that finished (or made no progress) left without a result failed too."""
    tree, done = server.place.tree, {}
    while todo := [key for key in tests if key not in done]:
        job = {"mode": "tests", "tests": [f"{file}::{name}" for file, name in todo], "blocked": blocked,
               "ini": os.path.join(server.place.workdir, "pytest.ini")}
        events, ending, code, output = run_child(job, server, import_timeout, timeout)
        errors = [e for e in events if e["event"] == "collect_error"]
        if errors and not done:
            return {}, "\n\n".join(f"could not import {e.get('file')}:\n{last_lines(str(e.get('message')), tree)}"
                                    for e in errors)
        results, current = outcomes(events, todo)
        done.update(results)
        finished = any(e["event"] == "finished" for e in events)
        if current is not None and current not in done and not finished:  # the child stopped inside this test
            why = {"timeout": f"did not finish within the {timeout:g} s time limit of one test",
                   "flood": f"the test process sent the grader more than {REPORT_BYTES // 10 ** 6} MB",
                   "exited": f"the test process ended during this test (exit code {code}; sys.exit or os._exit?)"}
            done[current] = (False, why[ending], why[ending])
        if not done and current is None:  # the first child got to no test
            if ending == "timeout":
                return {}, (f"the tests did not start within {import_timeout:g} s (importing them, and the code "
                            "they import, took longer)")
            return {}, f"no test ran (exit code {code}):\n{last_lines(output, tree)}"
        if finished or not any(key in done for key in todo):  # all that would run ran, or no progress
            why = ("no result: the grader never saw this test's function return or raise" if finished
                   else f"no result: the test process stopped ({ending})")
            done.update({key: (False, why, why) for key in todo if key not in done})
    return done, None


def outcomes(events, tests):
    """What a child's events say of the tests [(file, name)]. -> ({(file, name): (passed, message, headline)} of
    the tests with a result, the last test that started or None). A test passes when it reported 'passed' and no
    'failed' (a failing teardown fails a test that passed); a parametrized one, when all its cases do."""
    seen, current = {}, None  # (file, name) -> [passed, first failure (message, headline) or None]
    for event in events:
        file, _, rest = str(event.get("test")).partition("::")
        key = (file, rest.split("[")[0])
        if key not in tests:
            continue
        outcome = seen.setdefault(key, [False, None])
        if event["event"] == "started":
            current = key
        elif event["event"] == "passed":
            outcome[0] = True
        elif event["event"] == "failed" and outcome[1] is None:
            outcome[1] = (str(event.get("message")), str(event.get("headline")))
    results = {key: (False, *failure) if failure else (True, "", "") for key, (passed, failure) in seen.items()
               if failure or passed}
    return results, current


# ---------------------------------------------------------------------------------------------- grading
def row(exercise, part, name, share, passed, message="", headline=""):
    """One row of the report: the test's name, its share of the points, earned when it passed, and its message
    and headline cut to MESSAGE_CHARS and HEADLINE_CHARS."""
    return {"exercise": exercise, "part": part, "name": f"{exercise} {part}: {name}" if part else f"{exercise}: {name}",
            "score": share if passed else 0.0, "max_score": share, "passed": passed,
            "output": message if len(message) <= MESSAGE_CHARS else message[:MESSAGE_CHARS] + "\n  ...",
            "headline": headline if len(headline) <= HEADLINE_CHARS else headline[:HEADLINE_CHARS] + " ..."}


def sort_out(exercises, parts, modules):
    """({exercise: its one row} of the exercises that cannot run, {exercise: [(part, file, test, weight)]} of those
    that run). parts: {exercise: [(part, file, source)]}; modules: {module: None or (why, headline) it cannot be
    imported}."""
    graded, weights = {}, {}
    for exercise in exercises:
        module, _, points = EXERCISES[exercise]
        try:
            tests, unreadable = [(part, file, name, weight) for part, file, source in parts[exercise]
                                 for name, weight in tests_in(source)], None
        except (SyntaxError, ValueError) as error:  # a student's own check, with a test file they broke
            tests, unreadable = [], f"could not read the test files: {error}"
        if modules.get(module):
            why, headline = modules[module]
            graded[exercise] = [row(exercise, None, f"could not import {module}.py", points, False,
                                    f"could not import {module}.py: {why}", headline)]
        elif not tests:
            why = unreadable or f"no test in course/tests/test_{exercise.split('-')[0]}_*.py"
            graded[exercise] = [row(exercise, None, "no tests", points, False, why, why)]
        else:
            weights[exercise] = tests
    return graded, weights


def grade(exercises, place, hidden, missing, timeout, import_timeout, jobs):
    """{exercise: rows} and {module: None or why it cannot be imported}. hidden: {exercise: {file name: source}},
    read before any child started, or None for the visible tests only. missing: {module: (why, headline)} from
    build_tree. Each row: exercise, part ("visible", "hidden", or None for a row of the whole exercise), name,
    score, max_score, passed, output (the message) and headline (its summary line)."""
    tree = place.tree
    visible = {x: read_tests(os.path.join(tree, "course", "tests"), x) for x in exercises}
    parts = {x: [("visible", f"course/tests/{f}", s) for f, s in visible[x].items()] +
             [("hidden", f"course/hidden/{f}", s) for f, s in (hidden or {}).get(x, {}).items()] for x in exercises}
    needed = {EXERCISES[x][0] for x in exercises} - set(missing)  # the exercised modules there are to import

    def having(part):
        """The exercises that run, and have tests in that part."""
        return [x for x, tests in weights.items() if any(p == part for p, *_ in tests)]

    def run_tests(part, server):
        """{(exercise, part): run_part's result} of each exercise having tests in that part, `jobs` at once."""
        def one(exercise):
            keys = [(file, name) for p, file, name, _ in weights[exercise] if p == part]
            return (exercise, part), run_part(keys, server, blocked, timeout, import_timeout)

        with concurrent.futures.ThreadPoolExecutor(jobs) as pool:  # each part is a process of its own
            return dict(pool.map(one, having(part)))

    with Server(place, needed) as server:  # the import check's children, then the visible tests'
        imported, blocked = check_imports(needed, server, import_timeout)
        modules = {**missing, **imported}
        stop_leftovers(keep=server.process.pid)  # what the student's modules started at import time
        graded, weights = sort_out(exercises, parts, modules)
        results = run_tests("visible", server)
    stop_leftovers()  # nothing a visible child started, nor their server, is running when the hidden tests arrive
    if having("hidden"):
        write_hidden(tree, hidden)
        with Server(place, {EXERCISES[x][0] for x in having("hidden")}) as server:
            results.update(run_tests("hidden", server))
        stop_leftovers()
    remove_hidden(tree)
    for exercise, tests in weights.items():
        points, total = EXERCISES[exercise][2], sum(w for *_, w in tests)
        rows = []
        for part in ("visible", "hidden"):
            if (exercise, part) not in results:
                continue
            done, failed = results[exercise, part]
            shares = [(file, name, points * w / total) for p, file, name, w in tests if p == part]
            if failed:
                rows.append(row(exercise, part, "could not run its tests", sum(s for *_, s in shares), False, failed,
                                failed.splitlines()[0]))
            else:
                rows += [row(exercise, part, name, share, *done[file, name]) for file, name, share in shares]
        graded[exercise] = rows
    return {x: graded[x] for x in exercises}, modules


def write_hidden(tree, hidden):
    """Put the hidden tests into the graded tree, course/hidden/, for the hidden part's children."""
    folder = os.path.join(tree, "course", "hidden")
    os.makedirs(folder, exist_ok=True)
    for files in hidden.values():
        for name, source in files.items():
            with open(os.path.join(folder, name), "w", encoding="utf-8") as f:
                f.write(source)


def remove_hidden(tree):
    """Take the hidden tests out of the graded tree again."""
    if tree != ROOT:  # a student copy has no hidden tests; never delete the instructor's own
        shutil.rmtree(os.path.join(tree, "course", "hidden"), ignore_errors=True)


# ---------------------------------------------------------------------------------------------- processes
LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None
PR_SET_DUMPABLE, PR_SET_CHILD_SUBREAPER = 4, 36


def guard_this_process():
    """On Linux: become the subreaper of everything the children start (a process that detaches itself, by a
    double fork or setsid, is still ours, and stop_leftovers kills it), and make this process undumpable (a
    process without CAP_SYS_PTRACE, even of this user, cannot read its memory or its files through /proc)."""
    if LIBC is not None:
        LIBC.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        LIBC.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)


def orphans():
    """The pids of this process's children: between parts, none but what a child left behind."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                parent = f.read().rsplit(")", 1)[1].split()[1]  # the name, in parentheses, may hold spaces
        except (OSError, IndexError):
            continue  # it ended meanwhile
        if parent == str(os.getpid()):
            found.append(int(pid))
    return found


def stop_leftovers(keep=None):
    """Kill every process the children left running (a detached one rewriting results.json later, say), until
    none is left: each one killed hands its own children to this process. keep: the pid of one to spare (the
    server, whose children run the tests next)."""
    if LIBC is None:
        return
    while left := [pid for pid in orphans() if pid != keep]:
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for pid in left:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass


# ---------------------------------------------------------------------------------------------- reports
def summary(graded, students=False, secrets=()):
    """The printed summary: each exercise's points, then every failing test with its headline. For students
    (results.json): no hidden test's name or message, only how many passed, and no visible message that quotes
    the hidden files."""
    lines = []
    for exercise, rows in graded.items():
        score, maximum = sum(r["score"] for r in rows), EXERCISES[exercise][2]
        failed = [r for r in rows if not r["passed"]]
        lines.append(f"{exercise:18s} {'PASS' if not failed else 'FAIL'}  {score:5.2f} / {maximum}  "
                     f"({len(rows) - len(failed)} of {len(rows)} tests passed)")
        for r in failed:
            if not (students and r["part"] == "hidden"):
                lines.append(f"    FAILED {r['name']}: {scrub(r['headline'], secrets) if students else r['headline']}")
        hidden = [r for r in rows if r["part"] == "hidden"]
        if students and hidden:
            lines.append(f"    hidden tests: {sum(r['passed'] for r in hidden)} of {len(hidden)} passed")
    total = sum(r["score"] for rows in graded.values() for r in rows)
    lines.append(f"total {total:.2f} / {sum(EXERCISES[x][2] for x in graded)}")
    return "\n".join(lines)


def secret_lines(hidden_texts, visible_texts):
    """The lines of the hidden files (tests and references) a visible message must not quote: stripped, at least
    SECRET_CHARS long, and in no visible file."""
    shown = "\n".join(visible_texts)
    lines = {line.strip() for text in hidden_texts for line in text.splitlines()}
    return {line for line in lines if len(line) >= SECRET_CHARS and line not in shown}


def scrub(text, secrets):
    """The text, or WITHHELD when it quotes a secret line."""
    return WITHHELD if any(secret in text for secret in secrets) else text


def gradescope(graded, secrets):
    """Gradescope's results.json, as students see it: score, output (the students' summary), stdout hidden (it
    prints the full report), and tests: one row per visible test (name, score, max_score, output, visibility) and
    one row per exercise for its hidden tests, which says how many passed."""
    tests = []
    for exercise, rows in graded.items():
        tests += [{"name": r["name"], "score": r["score"], "max_score": r["max_score"],
                   "output": scrub(r["output"], secrets), "visibility": "visible"}
                  for r in rows if r["part"] != "hidden"]
        hidden = [r for r in rows if r["part"] == "hidden"]
        if hidden:
            tests.append({"name": f"{exercise} hidden tests", "score": sum(r["score"] for r in hidden),
                          "max_score": sum(r["max_score"] for r in hidden),
                          "output": f"{sum(r['passed'] for r in hidden)} of {len(hidden)} hidden tests passed",
                          "visibility": VISIBILITY["hidden"]})
    total = sum(r["score"] for rows in graded.values() for r in rows)
    return {"score": round(total, 2), "output": summary(graded, students=True, secrets=secrets),
            "stdout_visibility": "hidden", "tests": tests}


def teacher_report(graded, modules):
    """The full report: every row with its name and message, and each exercised module's import check."""
    return {"score": round(sum(r["score"] for rows in graded.values() for r in rows), 2),
            "output": summary(graded), "modules": {m: why and why[0] for m, why in modules.items()},
            "tests": [{"name": r["name"], "score": r["score"], "max_score": r["max_score"], "output": r["output"],
                       "visibility": VISIBILITY[r["part"] or "visible"]} for rows in graded.values() for r in rows]}


def write_json(path, report):
    """Write the report in one step (a reader never sees half a file)."""
    temporary = f"{path}.{os.getpid()}.tmp"
    with open(temporary, "w") as f:
        json.dump(report, f, indent=1)
    os.replace(temporary, path)


def positive(text):
    """An argument that must be a number above 0 (seconds)."""
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be above 0, not {text}")
    return value


def count(text):
    """An argument that must be a whole number, 1 or more."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, not {text}")
    return value


def writable(path):
    """A report's path, whose folder must exist (so that a typo stops the grader before it grades)."""
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise argparse.ArgumentTypeError(f"{path}: the folder {folder} does not exist")
    return os.path.abspath(path)


def main(argv=None):
    """The command line (argv: its arguments, sys.argv's by default): grade, print the full summary, write the
    reports. Bad arguments, or a submission or repository it cannot grade, stop it with one line (exit code 2)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--submission", metavar="DIR", help="the student's folder: its exercised files "
                        f"({', '.join(m + '.py' for m in MODULES)}) are graded (the instructor's repository only)")
    parser.add_argument("--hidden", action="store_true", help="also run the hidden tests (course/hidden/)")
    parser.add_argument("--json", metavar="FILE", type=writable, help="write results.json there (Gradescope's "
                        "format, as students see it)")
    parser.add_argument("--teacher-json", metavar="FILE", type=writable,
                        help="write the full report there: every test's name and message, hidden ones included")
    parser.add_argument("--only", nargs="+", choices=list(EXERCISES), metavar="EXERCISE",
                        help=f"grade these exercises only ({', '.join(EXERCISES)})")
    parser.add_argument("--timeout", type=positive, default=60.0, help="seconds one test may run (default 60)")
    parser.add_argument("--import-timeout", type=positive, default=60.0,
                        help="seconds an exercised module's import, or a part's start, may take (default 60)")
    parser.add_argument("--jobs", type=count, metavar="N",
                        help="test processes at once (default: up to 4, one per core)")
    parser.add_argument("--user", metavar="NAME", help="run the student's code as this user (grade.py runs as root), "
                        "who must not be able to read this repository: see course/README.md")
    args = parser.parse_args(argv)
    if os.name != "posix":  # process groups, SIGKILL and pipes passed to children are POSIX's
        parser.error("the grader runs on Linux or macOS; on Windows, run it in WSL")
    user = None
    if args.user is not None:
        import pwd  # POSIX only, like the grader
        try:
            user = pwd.getpwnam(args.user)
        except KeyError:
            parser.error(f"--user {args.user}: no such user")
        if os.geteuid() != 0:
            parser.error("--user needs grade.py to run as root: it starts the test processes as that user")
    if args.submission is not None and not os.path.isdir(args.submission):
        parser.error(f"--submission {args.submission}: no such folder")
    hidden_folder = os.path.join(HERE, "hidden")
    if args.hidden and not os.path.isdir(hidden_folder):
        parser.error(f"--hidden needs the hidden tests in {hidden_folder}, and there are none. Copy course/hidden/ "
                     "from the instructor's repository into this copy, or grade without --hidden.")
    exercises = [x for x in EXERCISES if args.only is None or x in args.only]
    guard_this_process()
    # Everything this process reads from the hidden folder it reads now, before any student code runs (which
    # could rewrite it): the hidden tests, and every file's text, which no visible message may quote.
    hidden = {x: read_tests(hidden_folder, x) for x in exercises} if args.hidden else None
    hidden_texts = []
    for name in sorted(os.listdir(hidden_folder)) if args.hidden else []:
        if name.endswith(".py"):
            with open(os.path.join(hidden_folder, name), encoding="utf-8") as f:
                hidden_texts.append(f.read())
    with tempfile.TemporaryDirectory(prefix="grade-") as workdir:
        try:
            tree, missing = build_tree(args.submission and os.path.abspath(args.submission), workdir)
        except GradingError as error:
            parser.error(str(error))
        place = Place(tree, workdir, user)
        if user is not None and (problem := check_user(place, teacher=tree != ROOT)):
            parser.error(f"--user: {problem}")
        secrets = set()
        if args.hidden:
            shown = os.path.join(tree, "course", "tests")
            visible_texts = [source for x in exercises for source in read_tests(shown, x).values()]
            secrets = secret_lines(hidden_texts, visible_texts)
            secrets |= {name for files in hidden.values() for source in files.values() for name, _ in tests_in(source)
                        if not any(name in text for text in visible_texts)}
        with open(os.path.join(workdir, "pytest.ini"), "w") as f:
            f.write(PINNED_INI)
        graded, modules = grade(exercises, place, hidden, missing, args.timeout, args.import_timeout,
                                args.jobs or min(4, os.cpu_count() or 1))
        stop_leftovers()
    print(summary(graded))
    if args.teacher_json:
        write_json(args.teacher_json, teacher_report(graded, modules))
    if args.json:
        write_json(args.json, gradescope(graded, secrets))


if __name__ == "__main__":
    main()
