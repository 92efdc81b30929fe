"""course/grade.py against a student who attacks it: every attack that steers a naive grader (pytest run on the
submission, results written by a plugin in the student's process) earns nothing.

Each attack sits in a submission whose exercises are untouched stubs (worth 0), or in one that fails some hidden
tests, and is graded as the instructor grades (--submission, from this repository). Where it can be shown, a
control first proves the attack works where the grader's defences are missing (plain pytest on the same files),
so that a test here fails if its attack stops working rather than passing for nothing."""
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "course"))
import grade as grader  # noqa: E402
from helpers import two_at_once  # noqa: E402
from make_student_copy import make_student_copy, stub_regions  # noqa: E402

instructor_only = pytest.mark.skipif(not (ROOT / "course" / "hidden").is_dir(),
                                     reason="the instructor's repository only (no course/hidden/ here)")


def submission(where, solved=(), files=None, edit=None):
    """A submission folder holding the exercised modules as the student copy has them (stubs), those in `solved`
    as the solution; `files` {relative path: text} beside them; `edit` {module: function(text) -> text}."""
    where.mkdir(parents=True, exist_ok=True)
    for module in grader.MODULES:
        text = (ROOT / f"{module}.py").read_text()
        text = text if module in solved else stub_regions(text)
        (where / f"{module}.py").write_text((edit or {}).get(module, lambda t: t)(text))
    for path, text in (files or {}).items():
        (where / path).parent.mkdir(parents=True, exist_ok=True)
        (where / path).write_text(text)
    return where


def run_grader(folder, *args, timeout=600):
    """course/grade.py --submission folder, its reports outside the folder.
    -> (results.json as students see it or None, the teacher's report or None, the process, seconds taken)."""
    out = Path(os.environ.get("TMPDIR", "/tmp")) / f"grader-{os.getpid()}-{time.monotonic_ns()}"
    out.mkdir()
    started = time.monotonic()
    done = subprocess.run([sys.executable, str(ROOT / "course" / "grade.py"), "--submission", str(folder),
                           "--json", str(out / "results.json"), "--teacher-json", str(out / "teacher.json"), *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    seconds = time.monotonic() - started
    reports = [json.loads(path.read_text()) if path.exists() else None
               for path in (out / "results.json", out / "teacher.json")]
    shutil.rmtree(out)
    return (*reports, done, seconds)


def at_once(*jobs):
    """[job() for job in jobs], two at a time: an attack's control and its grading are processes of their own,
    each mostly on one core."""
    return two_at_once(lambda job: job(), jobs)


def plain_pytest(copy, test_file, pythonpath="."):
    """pytest run as a student might, in a copy, with `pythonpath` on PYTHONPATH: -> how many tests passed."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", test_file], cwd=copy,
                          env=dict(env, PYTHONPATH=pythonpath), capture_output=True, text=True, timeout=300)
    last = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    return int(last.split(" passed")[0].split()[-1]) if " passed" in last else 0


@pytest.fixture(scope="module")
def student_copy(tmp_path_factory):
    out = tmp_path_factory.mktemp("release") / "student"
    make_student_copy(str(out))
    return out


# A pytest plugin that makes every test pass: the test function is never called, and its report says passed.
CHEAT = '''import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    return True


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    report.outcome, report.longrepr = "passed", None
'''
# A course/grading_plugin.py of the student's: it speaks the grader's protocol (a server that forks a child for each
# job grade.py sends) and says every test passed.
FAKE_GRADING_PLUGIN = '''import json, os, socket, sys
control = socket.socket(fileno=int(sys.argv[1]))
while True:
    _, (job, report, output, status), _, _ = socket.recv_fds(control, 1, 4)
    if os.fork() == 0:
        job = json.loads(os.fdopen(job).readline())
        out = os.fdopen(report, "w")
        for module in job.get("modules", []):
            out.write(json.dumps({"event": "imported", "module": module}) + "\\n")
        for test in job.get("tests", []):
            out.write(json.dumps({"event": "started", "test": test}) + "\\n")
            out.write(json.dumps({"event": "passed", "test": test}) + "\\n")
        out.write(json.dumps({"event": "finished", "code": 0}) + "\\n")
        out.close()
        os._exit(0)
    for fd in (job, report, output, status):
        os.close(fd)
'''
STRAY_FILES = {  # attack -> (files in the submission, how a control runs them: a PYTHONPATH for plain pytest)
    "sitecustomize.py and a plugin at the root": (
        {"sitecustomize.py": 'import os\nos.environ["PYTEST_ADDOPTS"] = "-p cheat"\n', "cheat.py": CHEAT}, "."),
    "course/pytest.ini with addopts = -p plugin": (
        {"course/pytest.ini": "[pytest]\naddopts = -p plugin\n", "course/plugin.py": CHEAT,
         "pytest.ini": "[pytest]\naddopts = -p plugin\n", "conftest.py": CHEAT}, "course"),
    "grading_plugin.py at the root and in course/": (
        {"grading_plugin.py": FAKE_GRADING_PLUGIN, "course/grading_plugin.py": FAKE_GRADING_PLUGIN}, None),
}


@instructor_only
@pytest.mark.slow
@pytest.mark.parametrize("attack", STRAY_FILES)
def test_files_beside_the_exercised_ones_are_never_used(attack, student_copy, tmp_path):
    """The grader builds its tree from the release and takes only the exercised modules from the submission, runs
    with python -I, its own pytest.ini, no conftest and no plugin but its own: stray files earn nothing."""
    files, pythonpath = STRAY_FILES[attack]
    control = tmp_path / "control"
    shutil.copytree(student_copy, control)
    for path, text in files.items():
        (control / path).write_text(text)
    if pythonpath is None:  # the student's own grader, run in their copy, says what the fake plugin says
        attacked, graded = at_once(lambda: run_grader_in_copy(control),
                                   lambda: run_grader(control, "--only", "ex5-grpo", "--hidden"))
        report, _, done, _ = attacked
        assert report["score"] == 10, done.stdout[-2000:]
    else:  # plain pytest with the files on its path passes every stubbed test
        passed, graded = at_once(lambda: plain_pytest(control, "course/tests/test_ex5_grpo.py", pythonpath),
                                 lambda: run_grader(control, "--only", "ex5-grpo", "--hidden"))
        assert passed >= 4

    report, teacher, done, _ = graded
    assert report is not None, done.stderr[-2000:]
    assert report["score"] == 0 and teacher["score"] == 0, done.stdout[-2000:]
    assert all("NotImplementedError: exercise ex5-grpo" in row["output"] for row in teacher["tests"]), teacher


def run_grader_in_copy(copy):
    """A student copy's own course/grade.py, run in the copy, visible tests of ex5-grpo only."""
    out = copy / "results.json"
    done = subprocess.run([sys.executable, "course/grade.py", "--only", "ex5-grpo", "--json", str(out)], cwd=copy,
                          capture_output=True, text=True, timeout=300)
    return json.loads(out.read_text()), None, done, None


MARK_PASSED = '''

def _mark_every_test_passed():
    import gc
    import sys
    if "pytest" not in sys.modules:
        return
    import pytest

    class MarkPassed:
        @pytest.hookimpl(tryfirst=True)
        def pytest_pyfunc_call(self, pyfuncitem):
            return True

        @pytest.hookimpl(hookwrapper=True)
        def pytest_runtest_makereport(self, item, call):
            outcome = yield
            report = outcome.get_result()
            report.outcome, report.longrepr = "passed", None

    for found in gc.get_objects():
        if type(found).__name__ == "Config" and hasattr(found, "pluginmanager"):
            if not found.pluginmanager.has_plugin("mark-passed"):
                found.pluginmanager.register(MarkPassed(), "mark-passed")


_mark_every_test_passed()
'''


@instructor_only
@pytest.mark.slow
def test_a_pytest_hook_registered_from_starpo_py_earns_nothing(student_copy, tmp_path):
    """starpo.py registers a plugin that skips every test function and reports it passed: pytest believes it,
    the grader does not (a test passes when the grader's wrapper saw its function return)."""
    control = tmp_path / "control"
    shutil.copytree(student_copy, control)
    (control / "starpo.py").write_text((control / "starpo.py").read_text() + MARK_PASSED)
    folder = submission(tmp_path / "submission", edit={"starpo": lambda text: text + MARK_PASSED})
    passed, (report, teacher, done, _) = at_once(
        lambda: plain_pytest(control, "course/tests/test_ex5_grpo.py"),
        lambda: run_grader(folder, "--only", "ex5-grpo", "ex4-gae", "--hidden"))
    assert passed >= 4
    assert report["score"] == 0 and teacher["score"] == 0, done.stdout[-2000:]
    assert len(teacher["tests"]) >= 16  # every visible and hidden test ran, and none passed


PATCH_THE_WRITER = '''

def _patch_the_graders_writer():
    import sys
    try:
        import grading_plugin
    except ImportError:
        return
    for plugin in {grading_plugin, sys.modules.get("grading_plugin"), sys.modules.get("__main__")} - {None}:
        real = getattr(plugin, "_write", None)
        if real is not None:
            plugin._write = lambda record, real=real: real(dict(record, passed=True) if "passed" in record else record)


_patch_the_graders_writer()
'''


@instructor_only
@pytest.mark.slow
def test_patching_the_grading_plugins_writer_from_starpo_py_earns_nothing(graded_attacks):
    """A plugin that writes each result with a function of its own (grading_plugin._write) could have it replaced
    from starpo.py by one that writes "passed": true. Results travel as events the parent judges; there is no
    such writer to replace."""
    report, teacher, done, _ = graded_attacks["the writer patched"]
    assert report["score"] == 0 and teacher["score"] == 0, done.stdout[-2000:]
    assert all("NotImplementedError: exercise ex5-grpo" in row["output"] for row in teacher["tests"]), teacher


def rewrite_later(marker, targets):
    """starpo.py code that, at import, starts a detached process (a double fork and a new session) which notes
    its pid in `marker`, waits 3 s, and writes a full score into each target."""
    return f'''

def _rewrite_the_results_later():
    import json
    import os
    import time
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            with open({str(marker)!r}, "a") as f:
                f.write(f"{{os.getpid()}}\\n")
            time.sleep(3)
            for target in {[str(t) for t in targets]!r}:
                with open(target, "w") as f:
                    json.dump({{"score": 130.0, "output": "every test passed", "tests": []}}, f)
            os._exit(0)
        os._exit(0)


_rewrite_the_results_later()
'''


@instructor_only
@pytest.mark.slow
def test_a_detached_process_cannot_rewrite_the_results_after_the_grader(tmp_path):
    """starpo.py starts a detached process that rewrites results.json seconds later. The grader is the subreaper
    of everything its children start, and kills what is left before it writes its reports."""
    results = tmp_path / "out" / "results.json"
    results.parent.mkdir()
    control_marker, control_target = tmp_path / "control-pids", tmp_path / "control.json"
    control = submission(tmp_path / "control", edit={"starpo": lambda t: t + rewrite_later(control_marker,
                                                                                         [control_target])})
    marker = tmp_path / "pids"
    folder = submission(tmp_path / "submission", edit={"starpo": lambda t: t + rewrite_later(marker, [results])})

    def attack_unguarded():
        subprocess.run([sys.executable, "-c", "import starpo"], cwd=control, check=True, timeout=120)
        deadline = time.monotonic() + 60
        while not control_target.exists() and time.monotonic() < deadline:
            time.sleep(0.5)
    _, done = at_once(attack_unguarded, lambda: subprocess.run(
        [sys.executable, str(ROOT / "course" / "grade.py"), "--submission", str(folder), "--only", "ex5-grpo",
         "--json", str(results)], cwd=ROOT, capture_output=True, text=True, timeout=600))
    assert json.loads(control_target.read_text())["score"] == 130  # unguarded, the attack works
    assert done.returncode == 0, done.stderr[-2000:]
    pids = [int(line) for line in marker.read_text().split()]
    assert pids  # the attack ran: the probe and the test processes imported starpo.py
    time.sleep(4)  # past the 3 s the detached processes wait
    assert not [pid for pid in pids if Path(f"/proc/{pid}").exists()], "a detached process outlived the grader"
    assert json.loads(results.read_text())["score"] == 0


def note_what_it_holds(marker):
    """starpo.py code that, at import, appends to `marker` one line per process: what each of its open file
    descriptors is (readlink of /proc/self/fd/N: "pipe:[inode]", "socket:[inode]", a path)."""
    return f'''

def _note_what_this_process_holds():
    import os
    held = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            held.append(os.readlink(f"/proc/self/fd/{{fd}}"))
        except OSError:  # the listing's own descriptor, closed by now
            pass
    with open({str(marker)!r}, "a") as f:
        f.write("\\t".join(held) + "\\n")


_note_what_this_process_holds()
'''


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="reads /proc (Linux)")
@pytest.mark.slow
def test_a_test_process_holds_nothing_of_the_graders_but_its_own_pipes(tmp_path):
    """A child is forked from the server, which holds the socket grade.py asks for children on and the status pipe
    of every child that runs. The child closes them before any student code runs: starpo.py, imported in the
    import check and in two exercises' test processes running at once, finds no socket among its descriptors,
    and no pipe but its job's and its report's."""
    marker = tmp_path / "held"
    folder = submission(tmp_path / "submission", edit={"starpo": lambda t: t + note_what_it_holds(marker)})
    report, _, done, _ = run_grader(folder, "--only", "ex5-grpo", "ex8-filter", "--jobs", "2")
    assert report is not None, done.stderr[-2000:]
    processes = [line.split("\t") for line in marker.read_text().splitlines()]
    assert len(processes) >= 3  # the import check and the two exercises' test processes
    for held in processes:
        assert not [target for target in held if target.startswith("socket:")], held
        assert len({target for target in held if target.startswith("pipe:")}) <= 2, held


def hidden_reader(where):
    """starpo.py code, `where` "at import" or "in a test", that reads every file of the instructor's course/hidden/
    (it knows where the grader lives) and of the graded tree's, prints it and raises it as an assertion."""
    read = f'''

def _hidden_text():
    import glob
    import os
    found = []
    for folder in (os.path.join(os.getcwd(), "course", "hidden"), {str(ROOT / "course" / "hidden")!r}):
        for path in sorted(glob.glob(os.path.join(folder, "*.py"))):
            with open(path) as f:
                found.append(f.read())
    return "\\n".join(found)
'''
    if where == "at import":
        return read + "\n\nprint(_hidden_text())\nraise AssertionError(_hidden_text())\n"
    return read + '''

def compute_gae(*args, **kwargs):
    print(_hidden_text())
    raise AssertionError(_hidden_text())
'''


def hidden_giveaways():
    """What students must never see of the hidden tests: their test names, their assert lines (the expected
    values) and the reference functions' definitions in make_fixtures.py."""
    found = set()
    for path in (ROOT / "course" / "hidden").glob("*.py"):
        for line in path.read_text().splitlines():
            line = line.strip()
            if line.startswith(("def test", "assert ")) and len(line) >= 20 or path.name == "make_fixtures.py" and (
                    line.startswith("def ")):
                found.add(line.split("(")[0] if line.startswith("def ") else line)
    shipped = "".join(p.read_text() for p in (ROOT / "course" / "tests").glob("test_*.py"))
    return {line for line in found if line not in shipped}


def appended(code):
    """An edit of a module's text: CODE put at its end."""
    return lambda text: text + code


def gae_through_observations(text):
    """starpo.py's GAE stepping through observation tokens too: the textbook loop."""
    for old, new in (("next_value = torch.where(m, values[:, t], next_value)", "next_value = values[:, t]"),
                     ("next_adv = torch.where(m, adv_t, next_adv)", "next_adv = adv_t")):
        assert text.count(old) == 1
        text = text.replace(old, new)
    return text


READERS = ["at import", "in a test"]
ATTACKS = {  # the attacks with no control: name -> (submission()'s keywords, grade.py's arguments)
    "the writer patched": ({"edit": {"starpo": appended(PATCH_THE_WRITER)}}, ["--only", "ex5-grpo", "--hidden"]),
    **{f"hidden files read {where}": ({"solved": grader.MODULES, "edit": {"starpo": appended(hidden_reader(where))}},
                                      ["--only", "ex4-gae", "--hidden"]) for where in READERS},
    "GAE through observations": ({"solved": grader.MODULES, "edit": {"starpo": gae_through_observations}},
                                 ["--only", "ex4-gae", "--hidden"]),
}


@pytest.fixture(scope="module")
def graded_attacks(tmp_path_factory):
    """{attack: run_grader's result} of ATTACKS, two at a time: a grading spends most of its seconds in one process
    on one core."""
    where = tmp_path_factory.mktemp("attacks")

    def grade(name):
        keywords, args = ATTACKS[name]
        return run_grader(submission(where / name, **keywords), *args)
    return dict(zip(ATTACKS, two_at_once(grade, ATTACKS)))


@instructor_only
@pytest.mark.slow
@pytest.mark.parametrize("where", READERS)
def test_hidden_files_read_by_student_code_never_reach_students(where, graded_attacks):
    """The hidden tests are not in the graded tree while the visible tests run; student code that finds the
    instructor's copy and raises its text (or prints it) has that text withheld from every message students see.
    The teacher's report keeps it, which shows that the attack did read the files."""
    report, teacher, done, _ = graded_attacks[f"hidden files read {where}"]
    assert report is not None, done.stderr[-2000:]
    giveaways = hidden_giveaways()
    assert len(giveaways) > 50
    shown = json.dumps(report)
    assert [line for line in giveaways if line in shown] == []
    assert grader.WITHHELD in shown
    assert any(line in json.dumps(teacher) for line in giveaways)
    assert report["score"] == 0


@instructor_only
@pytest.mark.slow
def test_results_json_shows_students_no_hidden_test_name_or_message(graded_attacks):
    """A GAE that does not skip observation tokens fails hidden tests: the teacher's report names them with their
    messages; results.json gives each exercise's hidden tests one row (how many passed, the points), and hides the
    grader's stdout, which prints the full report."""
    report, teacher, done, _ = graded_attacks["GAE through observations"]
    hidden = [r for r in teacher["tests"] if r["visibility"] == "after_published"]
    failed = [r for r in hidden if r["score"] < r["max_score"]]
    assert len(hidden) >= 4 and failed and all(r["output"] for r in failed)
    assert any(" hidden: " in line for line in done.stdout.splitlines() if "FAILED" in line)  # stdout: in full
    shown = json.dumps(report)
    names = [r["name"].split(": ", 1)[1] for r in hidden]
    assert [n for n in names if n in shown] == [] and [r["output"] for r in failed if r["output"] in shown] == []
    [row] = [r for r in report["tests"] if r["visibility"] == "after_published"]
    assert row["name"] == "ex4-gae hidden tests"
    assert row["max_score"] == pytest.approx(sum(r["max_score"] for r in hidden))
    assert row["score"] == pytest.approx(sum(r["score"] for r in hidden)) and row["score"] < row["max_score"]
    assert row["output"] == f"{len(hidden) - len(failed)} of {len(hidden)} hidden tests passed"
    assert report["stdout_visibility"] == "hidden"
    assert report["score"] == teacher["score"] < 15


@instructor_only
@pytest.mark.slow
def test_a_link_to_the_solution_is_refused(tmp_path):
    """A submitted starpo.py that is a link (to where the instructor's solution lives, say) is not followed."""
    folder = submission(tmp_path / "submission")
    (folder / "starpo.py").unlink()
    (folder / "starpo.py").symlink_to(ROOT / "starpo.py")
    report, teacher, done, _ = run_grader(folder, "--only", "ex5-grpo")
    assert report["score"] == 0, done.stdout
    [row] = report["tests"]
    assert "starpo.py is a link in the submission" in row["output"]


ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0,
                               reason="needs root (--user starts the test processes as another user)")


@pytest.mark.parametrize("user, message", [
    pytest.param("no-such-user-here", "--user no-such-user-here: no such user", id="unknown user"),
    pytest.param("root", "--user needs grade.py to run as root", id="not root",
                 marks=pytest.mark.skipif(os.geteuid() == 0, reason="runs as root")),
    pytest.param("root", f"--user: user root can read {ROOT / 'envs.py'}", id="a user who can read the solution",
                 marks=[ROOT_ONLY, instructor_only]),
])
def test_the_user_option_refuses_a_user_that_would_not_be_isolated(user, message):
    """--user NAME runs the student's code as NAME, and only when NAME can run Python in the tree and read neither
    the solution nor the hidden tests; anything else stops the grader with one line."""
    done = subprocess.run([sys.executable, str(ROOT / "course" / "grade.py"), "--user", user, "--only", "ex1-sokoban"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr, done.stderr


@ROOT_ONLY
def test_children_run_as_the_given_user(tmp_path):
    """The import check run through Place(user=...): the server, and so the child, gets the user's uid, name and a
    home of its own."""
    import pwd
    user = pwd.getpwuid(os.geteuid())
    place = grader.Place(str(ROOT), str(tmp_path), user)
    env = grader.as_user(place)
    assert env["user"] == user.pw_uid and env["extra_groups"] == [] and env["env"]["HOME"] == str(tmp_path / "home")
    assert not any(key.startswith("PYTEST_") for key in env["env"] if key != "PYTEST_DISABLE_PLUGIN_AUTOLOAD")
    with grader.Server(place, {"envs"}) as server:
        status, blocked = grader.check_imports({"envs"}, server, 60)
    assert status == {"envs": None} and blocked == {}


@pytest.mark.slow
def test_what_a_child_starts_in_its_group_ends_with_it(tmp_path):
    """envs.py, imported in the import check, forks a process that stays in the child's process group and would
    sleep a minute: it is killed as the child ends, while the server still serves (not only at the stage's end)."""
    tree, marker = tmp_path / "tree", tmp_path / "pid"
    (tree / "course").mkdir(parents=True)
    shutil.copy(ROOT / grader.PLUGIN, tree / grader.PLUGIN)
    (tree / "envs.py").write_text(f"import os, time\nif os.fork() == 0:\n"
                                  f"    open({str(marker)!r}, 'w').write(str(os.getpid()))\n"
                                  f"    time.sleep(60)\n    os._exit(0)\n")
    (tmp_path / "work").mkdir()
    with grader.Server(grader.Place(str(tree), str(tmp_path / "work"), None), {"envs"}) as server:
        status, _ = grader.check_imports({"envs"}, server, 60)
        pid = int(marker.read_text())
        deadline = time.monotonic() + 10
        while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert status == {"envs": None} and not Path(f"/proc/{pid}").exists(), "the child's leftover outlived it"
