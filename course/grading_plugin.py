"""The grader's child processes: the only places where a student's code runs while grading. course/grade.py starts
this file as a server, a process of its own,

    python -I -B course/grading_plugin.py FD MODULE...        (FD: its end of a Unix socket to grade.py)

which imports the third-party modules that the exercised MODULEs and their tests need (PRELOAD: torch and
transformers take seconds), never a module of the graded tree, and then forks a fresh child for each job grade.py
sends: first one child checks that the exercised modules import, then one child runs each exercise's visible tests,
and later one its hidden tests. A fork starts with those imports done, where a new interpreter would spend seconds
on them again.

A child reads its job, one JSON line, from its stdin, and tells grade.py what happens over a pipe that grade.py
opened for it, one JSON line per event, sent at once: grade.py times each test by these events and kills the
child when one runs too long, and it alone turns the events into points and writes the reports.

A test passes when the grader's own wrapper around the test function saw it return; an exception out of it
(an assertion, a stub's NotImplementedError, pytest.skip) fails it, with the exception's message. pytest's reports,
hooks and plugins decide nothing, so a hook that rewrites reports earns nothing. What this process cannot do is
stop the student's code, which runs in it, from sending events of its own: course/README.md says what that means.

Events:
    {"event": "importing" | "imported", "module": m}           the import check (job mode "probe")
    {"event": "import_error", "module": m, "message": traceback, "headline": one line, "blocked_by": module or None}
    {"event": "collect_error", "file": path, "message": pytest's report}
    {"event": "started", "test": nodeid}
    {"event": "passed", "test": nodeid}
    {"event": "failed", "test": nodeid, "message": text, "headline": one line}
    {"event": "finished", "code": pytest's exit code}
"""
import ctypes
import functools
import gc
import importlib
import json
import os
import select
import signal
import socket
import sys
import traceback

# What the server imports before it forks any child, for the exercises of each exercised module it serves: the
# third-party modules that the module and its exercises' tests import, {module: its attributes to load}
# (transformers loads a class on first use). torch takes a second to import, transformers' model classes two more.
TESTS = {"pytest": ()}
TORCH = {**TESTS, "numpy": (), "torch": ()}
MODELS = {**TORCH, "transformers": ("AutoModelForCausalLM", "AutoTokenizer")}
PRELOAD = {"envs": TESTS, "starpo": TORCH, "rollout": MODELS, "ragen_mini": MODELS}
REAP_SECONDS = 0.05  # how often the server looks for children that have ended
PR_SET_DUMPABLE = 4  # prctl's option (Linux)
# The first lines pytest writes under an assertion's own message start with this (its explanation of the values)
EXPLANATION = "assert "


class BlockedImport(ImportError):
    """Raised instead of importing a module whose import hung (or ended the process) in the import check."""

    def __init__(self, module, reason):
        super().__init__(f"{module}.py was not imported: {reason}", name=module)


class Blocker:
    """A finder, first on sys.meta_path, that refuses the blocked modules: a test that imports one fails at once
    with the import check's reason, rather than hanging again and costing its own time limit."""

    def __init__(self, blocked):
        self.blocked = blocked  # {module: reason}

    def find_spec(self, name, path=None, target=None):
        if name in self.blocked:
            raise BlockedImport(name, self.blocked[name])
        return None  # the other finders import everything else as usual


def describe(error):
    """(message, headline) of an exception that failed a test; an exception raised while another was being
    handled (pytest.warns' "DID NOT WARN" over a stub's NotImplementedError) names that one too.

    The message is pytest's text for it: for a failed `assert x == y, "why"` the assertion's own message ("why")
    and then pytest's explanation of the values ("assert 1 == 2 ..."). The headline is one line for the summary:
    the assertion's own message when it has one (a tensor's repr joined onto one line), else the explanation's
    first line; for any other exception its type and message."""
    message, headline = describe_one(error)
    context = error.__cause__ or (None if error.__suppress_context__ else error.__context__)
    if context is not None:
        first_message, first_headline = describe_one(context)
        message += f"\n\nraised while handling {first_message}"
        headline += f" (while handling {first_headline})"
    return message, headline


def describe_one(error):
    if isinstance(error, AssertionError):
        text = str(error)
        lines = text.splitlines()
        own = next((i for i, line in enumerate(lines) if line.startswith(EXPLANATION)), len(lines))
        headline = " ".join(lines[:own]).strip() or (lines[own] if own < len(lines) else "")
        return "AssertionError: " + text, " ".join(headline.split()) or "AssertionError"
    if type(error).__name__ == "Skipped":  # pytest.skip(...) inside the test: it earns nothing
        return f"skipped: {error}", f"skipped: {error}"
    text = f"{type(error).__name__}: {error}"
    return text, " ".join(text.split())


def located(message, error, test_file):
    """The message with the line of the test file where the test failed: '... at test_ex4_gae.py:42'."""
    frames = [frame for frame in traceback.extract_tb(error.__traceback__)
              if os.path.abspath(frame.filename) == os.path.abspath(test_file)]
    return message + (f"\n  at {os.path.basename(test_file)}:{frames[-1].lineno}" if frames else "")


class Reporter:
    """The pytest plugin of the test process: reports collection errors, each test's start, and what the wrapper
    around each test function saw. `send(**event)` delivers an event."""

    def __init__(self, send):
        self.send = send

    def pytest_collectreport(self, report):
        if report.failed:  # an import or syntax error in a test file or in the code it imports
            self.send(event="collect_error", file=report.nodeid, message=report.longreprtext)

    def pytest_collection_modifyitems(self, items):
        for item in items:
            item.obj = self.graded(item.obj, item.nodeid, str(item.path))

    def graded(self, test, nodeid, test_file):
        """The test function wrapped: 'passed' when it returns, 'failed' with the message when it raises."""
        @functools.wraps(test)
        def run(*args, **kwargs):
            try:
                result = test(*args, **kwargs)
            except BaseException as error:  # an assertion, the stub's NotImplementedError, pytest.skip, sys.exit
                message, headline = describe(error)
                self.send(event="failed", test=nodeid, message=located(message, error, test_file), headline=headline)
                raise
            self.send(event="passed", test=nodeid)
            return result
        return run

    def pytest_runtest_logstart(self, nodeid, location):
        self.send(event="started", test=nodeid)

    def pytest_runtest_logreport(self, report):
        # A test whose setup fails or skips never reaches its function, so the wrapper reports nothing; say why.
        # A failing teardown fails a test that had passed.
        if report.when != "call" and (report.failed or report.skipped):
            if report.skipped:
                message = f"skipped: {report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr}"
            else:
                message = f"error in the test's {report.when}:\n{report.longreprtext}"
            self.send(event="failed", test=report.nodeid, message=message, headline=message.splitlines()[0])


def probe(modules, send):
    """Import the modules one after another, reporting each: 'importing' first, so that grade.py knows which one
    hangs or ends the process."""
    for module in modules:
        send(event="importing", module=module)
        try:
            importlib.import_module(module)
        except BaseException as error:  # a syntax error, any exception, sys.exit at import time
            blocked_by = error.name if isinstance(error, BlockedImport) else None
            send(event="import_error", module=module, message="".join(traceback.format_exception(error)),
                 headline=describe_one(error)[1], blocked_by=blocked_by)
        else:
            send(event="imported", module=module)


def dumpable(flag):
    """On Linux, make this process dumpable or not: a process that is not cannot be traced, nor its memory read or
    written through /proc, by a process of its user without CAP_SYS_PTRACE."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None).prctl(PR_SET_DUMPABLE, int(flag), 0, 0, 0)


def tell(status, number):
    """Write a number, one line, to a child's status pipe (grade.py may have stopped reading it)."""
    try:
        os.write(status, f"{number}\n".encode())
    except OSError:
        pass


def serve(control, modules):
    """The server: import what the exercises of the exercised modules need (PRELOAD), then fork a child for each
    request grade.py sends over the socket `control`: one byte, with four file descriptors: the child's stdin (its
    job), its report pipe, its stdout and stderr (a file), and a status pipe on which the server writes the child's
    pid and, once it has ended and what it left in its process group is killed, its exit code. Returns only in a
    child, with its report pipe; the server itself ends when grade.py closes the socket.

    The server runs no student code, and a child cannot reach it: the child closes the server's descriptors (the
    socket, the other children's status pipes) before anything else runs in it, and the server is undumpable."""
    dumpable(False)
    # Not on macOS, where a fork after a framework has started (numpy's Accelerate, say) may crash the child: there
    # each child imports what it needs itself
    preload = ({name: attributes for module in modules for name, attributes in PRELOAD[module].items()}
               if sys.platform.startswith("linux") else {})
    for name, attributes in preload.items():
        try:
            module = importlib.import_module(name)
            for attribute in attributes:
                getattr(module, attribute)
        except Exception:  # not installed, or broken: a child that needs it imports it itself, and says why
            pass
    # What is imported now lives as long as the process: out of the cycle collector's full passes, two of which end
    # each child's pytest session and would walk all of torch's and transformers' objects (half a second a child)
    gc.freeze()
    statuses = {}  # pid -> the status pipe of a child that has not ended yet
    while True:
        if select.select([control], [], [], REAP_SECONDS)[0]:
            request, fds, _, _ = socket.recv_fds(control, 1, 4)
            if not request:  # grade.py is done
                sys.exit()
            job, report, output, status = fds
            sys.stdout.flush()  # what the server printed is not for the child to print again
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:  # the child
                control.close()
                for fd in (status, *statuses.values()):
                    os.close(fd)
                dumpable(True)  # the child is as a process started afresh would be
                os.setsid()  # it leads a process group: killed with it when it runs too long, or once it has ended
                for target, fd in ((0, job), (1, output), (2, output)):
                    os.dup2(fd, target)
                os.close(job)
                os.close(output)
                return report
            for fd in (job, report, output):
                os.close(fd)
            tell(status, pid)
            statuses[pid] = status
        for pid in list(statuses):  # tell grade.py of each child that has ended
            if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
                continue
            # Kill what the child left in its process group while its pid is still taken (not yet reaped): once
            # reaped, the pid may name a new process by the time grade.py kills the group
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            _, wait_status = os.waitpid(pid, 0)
            status = statuses.pop(pid)
            tell(status, os.waitstatus_to_exitcode(wait_status))
            os.close(status)


def main():
    """Serve, and in each child read the job from stdin and do it: {"mode": "probe" | "tests", "root": the graded
    tree, "blocked": {module: reason}, "modules": [...] (probe), "tests": [nodeid, ...] and "ini": path (tests)}."""
    report = os.fdopen(serve(socket.socket(fileno=int(sys.argv[1])), sys.argv[2:]), "w")
    job = json.loads(sys.stdin.readline())

    def send(**event):
        report.write(json.dumps(event) + "\n")
        report.flush()  # at once: grade.py times the tests by these events

    # python -I puts neither the working folder nor this script's folder on the path: the graded tree's modules
    # and the course folder (adapters.py) are put there here, and nothing else.
    sys.path[:0] = [os.path.join(job["root"], "course"), job["root"]]
    sys.meta_path.insert(0, Blocker(job["blocked"]))
    if job["mode"] == "probe":
        probe(job["modules"], send)
    else:
        import pytest  # the test mode only: the import check needs no pytest
        code = pytest.main(["-q", "-c", job["ini"], "--rootdir", job["root"], "--noconftest", "-p", "no:cacheprovider",
                            *job["tests"]], plugins=[Reporter(send)])
        send(event="finished", code=int(code))  # what ran has reported; what has not reported did not run
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # at once: all is reported, and Python's own exit would spend a second taking torch apart


if __name__ == "__main__":
    main()
