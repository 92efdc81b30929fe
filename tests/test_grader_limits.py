"""course/grade.py's time limits and messages: a test that runs too long (or ends its process) costs that test
alone; an import that hangs costs the exercises that need it once, with one message; the summary line shows the
assertion's own message; the student's handout says what a syntax error costs, and the grader agrees; bad
arguments get one clear line."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import two_at_once
from test_grader_isolation import ROOT, grader, instructor_only, run_grader, submission

PLUGIN_RUN = """
import json, sys
sys.path.insert(0, sys.argv[2])
import pytest
import grading_plugin
events = []
pytest.main(["-q", "-p", "no:cacheprovider", "--noconftest", "--rootdir", sys.argv[1], sys.argv[1]],
            plugins=[grading_plugin.Reporter(lambda **event: events.append(event))])
print(json.dumps(events))
"""
CASES = '''import pytest
import torch


def test_own_message():
    assert [1, 2] == [1, 3], "the lists differ"


def test_tensor_message():
    w = torch.nn.Parameter(torch.arange(4.))
    assert torch.allclose(w, torch.zeros(4)), w


def test_no_message():
    x = 0.5
    assert x == 0.75


def test_stub():
    raise NotImplementedError("exercise ex4-gae: implement this (see course/ex4-gae.md)")


def test_stub_inside_warns():
    with pytest.warns(UserWarning):
        raise NotImplementedError("exercise ex12-update: implement this")


def test_skips():
    pytest.skip("no SmolLM2 here")


@pytest.fixture
def broken():
    raise RuntimeError("the fixture broke")


def test_setup_fails(broken):
    pass


def test_passes():
    assert 1 + 1 == 2
'''


@pytest.mark.slow
def test_each_failure_is_reported_with_the_assertions_own_message(tmp_path):
    """grading_plugin.Reporter's events for each kind of failure: the headline (the summary line) is the
    assertion's own message, joined onto one line, else pytest's explanation, else the exception; a skip fails."""
    (tmp_path / "test_cases.py").write_text(CASES)
    done = subprocess.run([sys.executable, "-c", PLUGIN_RUN, str(tmp_path), str(ROOT / "course")],
                          capture_output=True, text=True, timeout=120)
    events = json.loads(done.stdout.strip().splitlines()[-1])
    failed = {e["test"].split("::")[1]: e for e in events if e["event"] == "failed"}
    passed = [e["test"].split("::")[1] for e in events if e["event"] == "passed"]
    assert passed == ["test_passes"] and len(failed) == 7
    assert failed["test_own_message"]["headline"] == "the lists differ"
    assert "assert [1, 2] == [1, 3]" in failed["test_own_message"]["message"]
    assert failed["test_own_message"]["message"].endswith("at test_cases.py:6")
    assert failed["test_tensor_message"]["headline"] == ("Parameter containing: tensor([0., 1., 2., 3.], "
                                                         "requires_grad=True)")
    assert failed["test_no_message"]["headline"] == "assert 0.5 == 0.75"
    assert failed["test_stub"]["headline"] == ("NotImplementedError: exercise ex4-gae: implement this "
                                               "(see course/ex4-gae.md)")
    assert failed["test_stub_inside_warns"]["headline"].startswith("Failed: DID NOT WARN")
    assert failed["test_stub_inside_warns"]["headline"].endswith(
        "(while handling NotImplementedError: exercise ex12-update: implement this)")
    assert failed["test_skips"]["headline"] == "skipped: no SmolLM2 here"
    assert failed["test_setup_fails"]["headline"] == "error in the test's setup:"
    assert "RuntimeError: the fixture broke" in failed["test_setup_fails"]["message"]


def hang_or_exit(text):
    """compute_gae that loops forever on one visible test's input and ends its process on another's."""
    start = "    # BEGIN SOLUTION ex4-gae\n"
    assert text.count(start) == 1
    return text.replace(start, start + (
        "    if values.shape == (1, 5) and abs(float(values[0, 0]) - 0.3) < 1e-6:  # gamma_lam_one's values\n"
        "        while True:\n            pass\n"
        "    if values.shape == (1, 5) and float(values[0, 0]) == 1.0:  # masked_positions' values\n"
        "        import os\n        os._exit(0)\n"))


def before_the_first_function(lines):
    """An edit of a module's text: LINES put just before its first top-level function."""
    def edit(text):
        first = text.index("\ndef ")
        return text[:first] + "\n" + lines + text[first:]
    return edit


hang_at_import = before_the_first_function("while True:\n    pass\n")
syntax_error = before_the_first_function("def broken(:\n    pass\n")


def clip_after_the_step(text):
    old = ("    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.algo.grad_clip)\n"
           "    if torch.isfinite(grad_norm):\n        optimizer.step()\n")
    assert text.count(old) == 1
    return text.replace(old, "    optimizer.step()\n    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), "
                             "cfg.algo.grad_clip)\n    if torch.isfinite(grad_norm):\n        pass\n")


NEED_STARPO = ["ex1-sokoban", "ex3-token-rewards", "ex4-gae", "ex5-grpo", "ex8-filter", "ex12-update"]
# START_HERE.md's table: for each exercised file, the exercises a syntax error in it zeroes
ZEROED = {"envs": "ex1, ex2, ex9, ex10, ex11, ex12", "starpo": "ex3, ex4, ex5, ex6, ex7, ex8, ex10, ex11, ex12",
          "rollout": "ex9, ex10, ex11, ex12", "ragen_mini": "ex10, ex11, ex12"}
GRADINGS = {  # name -> (the solution's modules edited, grade.py's arguments)
    "import hangs": ({"starpo": hang_at_import},
                     ["--only", *NEED_STARPO, "--jobs", "1", "--import-timeout", "10", "--hidden"]),
    **{f"syntax error in {module}": ({module: syntax_error}, []) for module in ZEROED},
    "clipped after the step": ({"ragen_mini": clip_after_the_step}, ["--only", "ex12-update"]),
    "too long": ({"starpo": hang_or_exit}, ["--only", "ex4-gae", "--timeout", "3"]),
}


@pytest.fixture(scope="module")
def gradings(tmp_path_factory):
    """{name: run_grader's result} of every grading above, two at a time (the longest first): a grading spends
    most of its time in one process on one core, importing torch or running one exercise's tests."""
    where = tmp_path_factory.mktemp("gradings")

    def grade(name):
        edit, args = GRADINGS[name]
        return run_grader(submission(where / name, solved=grader.MODULES, edit=edit), *args)
    return dict(zip(GRADINGS, two_at_once(grade, GRADINGS)))


@instructor_only
@pytest.mark.slow
def test_a_test_that_runs_too_long_or_ends_its_process_costs_only_itself(gradings):
    """One of ex4's tests loops forever and another ends the test process: each fails with its reason, the tests
    after them run in fresh processes and pass, and the whole takes about one time limit."""
    report, teacher, done, seconds = gradings["too long"]
    rows = {r["name"].split(": ")[1]: r for r in teacher["tests"]}
    assert rows["test_gamma_lam_one_gives_reward_to_go_minus_value"]["output"] == (
        "did not finish within the 3 s time limit of one test")
    assert rows["test_masked_positions_get_zero"]["output"].startswith("the test process ended during this test")
    assert [name for name, r in rows.items() if r["score"] == 0] == [
        "test_gamma_lam_one_gives_reward_to_go_minus_value", "test_masked_positions_get_zero"]
    assert report["score"] == pytest.approx(15 * 12 / 14, abs=0.01)  # weights 1 and 1 of 14 lost
    assert "FAILED ex4-gae visible: test_gamma_lam_one_gives_reward_to_go_minus_value: did not finish" in done.stdout
    assert seconds < 60, seconds


@instructor_only
@pytest.mark.slow
def test_an_import_that_hangs_costs_its_exercises_once(gradings):
    """starpo.py loops forever at import: the import check waits its limit once, then every exercise that needs
    starpo.py (ragen_mini.py's too) gets 0 with one message, one at a time (--jobs 1) and without waiting again;
    envs.py's exercise keeps its points."""
    report, teacher, done, seconds = gradings["import hangs"]
    assert seconds < 35, seconds  # five exercises waiting 10 s each would take 50
    rows = {r["name"]: r for r in teacher["tests"]}
    for exercise in NEED_STARPO[1:5]:
        row = rows[f"{exercise}: could not import starpo.py"]
        assert row["score"] == 0 and row["max_score"] == grader.EXERCISES[exercise][2]
        assert row["output"] == ("could not import starpo.py: its import did not finish within 10 s (an endless "
                                 "loop at import time?)")
    assert rows["ex12-update: could not import ragen_mini.py"]["output"].startswith(
        "could not import ragen_mini.py: it imports starpo.py: its import did not finish within 10 s")
    assert sum(r["score"] for r in teacher["tests"] if r["name"].startswith("ex1-sokoban")) == pytest.approx(10)
    assert report["score"] == 10 and teacher["modules"]["envs"] is None


@instructor_only
@pytest.mark.slow
def test_the_summary_line_shows_the_assertions_own_message(gradings):
    """ex12 with the gradient clipped after the step fails `assert torch.allclose(actor.w...), actor.w`: the
    summary line shows the weights the student's update left, not just 'AssertionError: Parameter...'."""
    report, _, done, _ = gradings["clipped after the step"]
    [line] = [line for line in report["output"].splitlines() if "test_the_gradient_is_clipped_before_the_step" in line]
    assert line.endswith(": Parameter containing: tensor([0., 3., 4., 0., 0., 0., 0., 0.], requires_grad=True)")


@instructor_only
@pytest.mark.slow
def test_the_handout_says_what_a_syntax_error_costs_and_the_grader_agrees(gradings):
    """START_HERE.md's table: for each exercised file, the exercises a syntax error in it zeroes; the grader,
    given the solution with that one error, zeroes exactly those (and starpo.py's takes one test of ex9)."""
    from make_student_copy import START_HERE
    for module, listed in ZEROED.items():
        _, teacher, done, _ = gradings[f"syntax error in {module}"]
        assert f"| `{module}.py` | {listed}" in START_HERE
        scores = {x: sum(r["score"] for r in teacher["tests"] if r["name"].startswith(x + " ") or
                         r["name"].startswith(x + ":")) for x in grader.EXERCISES}
        assert [x.split("-")[0] for x, score in scores.items() if score == 0] == listed.split(", "), done.stdout
        lost = sum(grader.EXERCISES[x][2] for x in scores) - teacher["score"]
        assert f"{lost:.0f} of 130 points" in START_HERE or module == "starpo" and lost < 105, (module, lost)
        assert f"SyntaxError: invalid syntax ({module}.py, line" in done.stdout


@pytest.mark.parametrize("args, message", [
    (["--submission", "/no/such/folder"], "--submission /no/such/folder: no such folder"),
    (["--timeout", "0"], "argument --timeout: must be above 0, not 0"),
    (["--import-timeout", "nan"], "argument --import-timeout: must be above 0, not nan"),
    (["--jobs", "0"], "argument --jobs: must be 1 or more, not 0"),
    (["--json", "/no/such/folder/results.json"], "the folder /no/such/folder does not exist"),
    (["--only", "ex99"], "argument --only: invalid choice: 'ex99'"),
])
def test_bad_arguments_get_one_clear_line(args, message):
    done = subprocess.run([sys.executable, str(ROOT / "course" / "grade.py"), *args], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr, done.stderr


@instructor_only
def test_a_student_copy_cannot_grade_another_folder(tmp_path):
    from make_student_copy import make_student_copy
    copy = tmp_path / "student"
    make_student_copy(str(copy))
    done = subprocess.run([sys.executable, "course/grade.py", "--submission", str(tmp_path)], cwd=copy,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "--submission needs the instructor's repository" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert not Path(copy / "course" / "hidden").exists()
