"""The course's student copy (course/make_student_copy.py): solution regions become stubs that name their
exercise, everything else is copied unchanged and runs; the project's own tests of the marked
functions fail on the stubs, and the tests of unmarked code still pass in the copy."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "course"))
from make_student_copy import exercises, stub_regions  # noqa: E402

EXERCISES = {"ex1-sokoban": "sokoban_move", "ex2-parser": "parse_answer", "ex3-token-rewards": "token_level_rewards",
             "ex4-gae": "compute_gae", "ex5-grpo": "compute_grpo_advantages", "ex6-policy-loss": "policy_loss",
             "ex7-value-loss": "value_loss", "ex8-filter": "select_groups_by_reward_std"}


def test_the_marked_exercises_are_found():
    assert set(exercises()) == set(EXERCISES)


@pytest.mark.parametrize("text, problem", [
    ("def f():\n    # BEGIN SOLUTION a\n    return 1\n", "never closed"),
    ("def f():\n    return 1\n    # END SOLUTION\n", "without BEGIN"),
    ("def f():\n    # BEGIN SOLUTION a\n    # BEGIN SOLUTION b\n    # END SOLUTION\n", "inside another"),
])
def test_malformed_regions_are_refused(text, problem):
    with pytest.raises(ValueError, match=problem):
        stub_regions(text)


@pytest.fixture(scope="module")
def student_copy(tmp_path_factory):
    out = tmp_path_factory.mktemp("course") / "student"
    subprocess.run([sys.executable, "course/make_student_copy.py", str(out)], cwd=ROOT, check=True,
                   capture_output=True, text=True, timeout=120)
    return out


def run_python(copy, code):
    return subprocess.run([sys.executable, "-c", code], cwd=copy, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_every_stub_raises_and_names_its_exercise(student_copy):
    calls = {"sokoban_move": "({(0, 0), (0, 1)}, set(), (0, 0), 'Right')",
             "parse_answer": "('<think></think><answer>Up</answer>', ['Up'], 1)",
             "token_level_rewards": "(torch.zeros(1), torch.ones(1, 2))",
             "compute_gae": "(torch.zeros(1, 2), torch.zeros(1, 2), torch.ones(1, 2), 1.0, 1.0)",
             "compute_grpo_advantages": "(torch.zeros(2), torch.zeros(2))",
             "policy_loss": "(torch.zeros(1, 2), torch.zeros(1, 2), torch.ones(1, 2), torch.ones(1, 2), 0.2, 0.28)",
             "value_loss": "(torch.zeros(1, 2), torch.zeros(1, 2), torch.ones(1, 2), torch.ones(1, 2), 0.5)",
             "select_groups_by_reward_std": "(torch.zeros(2), torch.zeros(2), 0.5)"}
    for exercise, function in EXERCISES.items():
        module = "envs" if function in ("sokoban_move", "parse_answer") else "starpo"
        done = run_python(student_copy, f"import torch, {module}\n{module}.{function}{calls[function]}")
        assert done.returncode == 1 and f"NotImplementedError: exercise {exercise}:" in done.stderr, function
        assert f"(see course/{exercise}.md)" in done.stderr, function  # the student's handout, not the guide
        assert (student_copy / "course" / f"{exercise}.md").is_file(), exercise


@pytest.mark.slow
def test_the_untouched_parts_run_in_the_copy(student_copy):
    """Unmarked code is the project's own: FrozenLake and the Bandit play, the trainer imports, unmarked
    starpo works. (Sokoban needs ex1: its moves are the exercise.)"""
    done = run_python(student_copy, "import ragen_mini, starpo, torch\nfrom envs import make_env\n"
                                    "env = make_env('frozenlake'); env.reset(0); env.step('Up')\n"
                                    "env = make_env('bandit'); env.reset(0); env.step(env.actions[0])\n"
                                    "print(float(starpo.masked_mean(torch.tensor([[1., 3.]]), torch.ones(1, 2))))")
    assert done.returncode == 0 and done.stdout.strip() == "2.0", done.stderr
    assert not (student_copy / "course" / "hidden").exists()
    assert "course/grade.py" in (student_copy / "START_HERE.md").read_text()


@pytest.mark.slow
def test_tests_of_the_marked_functions_fail_on_the_stubs_and_others_pass(student_copy):
    stubbed = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_starpo.py",
                              "-k", "gae or grpo or policy_loss or value_loss or filter or token_level"],
                             cwd=student_copy, capture_output=True, text=True, timeout=300)
    assert stubbed.returncode == 1 and "NotImplementedError: exercise" in stubbed.stdout
    assert "passed" not in stubbed.stdout.splitlines()[-1]  # every one of them fails on the stubs
    stubbed = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_envs.py",
                              "-k", "sokoban or parse"], cwd=student_copy, capture_output=True, text=True, timeout=300)
    assert stubbed.returncode == 1 and "passed" not in stubbed.stdout.splitlines()[-1]
    untouched = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_envs.py",
                                "-k", "frozenlake or bandit_payouts"],
                               cwd=student_copy, capture_output=True, text=True, timeout=300)
    assert untouched.returncode == 0, untouched.stdout[-2000:]


@pytest.mark.slow
def test_grading_gives_the_solution_every_point_and_the_stubs_none(student_copy, tmp_path):
    """course/grade.py: the solution passes every visible and hidden test of every exercise; in the student
    copy each exercise scores 0 (no test passes on a stub). The JSON report is Gradescope's format."""
    solution = subprocess.run([sys.executable, "course/grade.py", "--hidden", "--json", str(tmp_path / "solution.json")],
                              cwd=ROOT, capture_output=True, text=True, timeout=600)
    report = json.loads((tmp_path / "solution.json").read_text())
    assert [row["name"] for row in report["tests"]] == list(EXERCISES), solution.stdout
    assert all(row["score"] == row["max_score"] > 0 for row in report["tests"]), solution.stdout
    assert all(int(row["output"].split(" of ")[1].split()[0]) >= 6 for row in report["tests"])  # visible + hidden
    assert report["score"] == sum(row["max_score"] for row in report["tests"])
    student = subprocess.run([sys.executable, "course/grade.py", "--json", str(tmp_path / "student.json")],
                             cwd=student_copy, capture_output=True, text=True, timeout=600)
    report = json.loads((tmp_path / "student.json").read_text())
    assert all(row["score"] == 0 and row["output"].startswith("0 of ") for row in report["tests"]), student.stdout
    assert not any(row["output"] == "0 of 0 tests passed" for row in report["tests"])  # the tests did run
