"""The course (course/README.md): solution regions become stubs that name their exercise in the student copy, and
everything else is copied unchanged and runs; the solution earns every point and the stubs none; no shipped file
holds an implementation of an exercise; the stored fixtures are what their references make; the grader survives a
student's syntax error, infinite loop or missing hidden tests; and every planted bug loses points."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "course"))
import adapters  # noqa: E402
from fingerprints import implementations  # noqa: E402
from helpers import two_at_once  # noqa: E402
from make_student_copy import BEGIN, END, LEFT_OUT, exercises, stub_regions, tracked_files  # noqa: E402

EXERCISES = {"ex1-sokoban": "sokoban_move", "ex2-parser": "parse_answer", "ex3-token-rewards": "token_level_rewards",
             "ex4-gae": "compute_gae", "ex5-grpo": "compute_grpo_advantages", "ex6-policy-loss": "policy_loss",
             "ex7-value-loss": "value_loss", "ex8-filter": "select_groups_by_reward_std",
             "ex9-response-mask": "append_reply", "ex10-logprobs": "token_logprobs",
             "ex11-loss-normalizer": "loss_normalizer", "ex12-update": "update"}
from grade import MODULES  # noqa: E402  the exercised modules, each before those that import it
# Functions that hold a second region of an exercise (their fingerprint may or may not show it)
SECOND_REGIONS = {"logprob_and_entropy": "ex10-logprobs", "clipped_step": "ex12-update"}
# The student copy has no solution markers and no course/hidden/: these tests are the instructor's.
instructor_only = pytest.mark.skipif(not (ROOT / "course" / "hidden").is_dir(),
                                     reason="the instructor's repository only (no course/hidden/ here)")


@instructor_only
def test_the_marked_exercises_are_found():
    assert set(exercises()) == set(EXERCISES)
    # the grader copies exactly the files that hold solution regions from a submission
    assert {place.split(":")[0] for place in exercises().values()} == {f"{m}.py" for m in MODULES}


@pytest.mark.parametrize("text, problem", [
    ("def f():\n    # BEGIN SOLUTION a\n    return 1\n", "never closed"),
    ("def f():\n    return 1\n    # END SOLUTION\n", "without BEGIN"),
    ("def f():\n    # BEGIN SOLUTION a\n    # BEGIN SOLUTION b\n    # END SOLUTION\n", "inside another"),
])
def test_malformed_regions_are_refused(text, problem):
    with pytest.raises(ValueError, match=problem):
        stub_regions(text)


@instructor_only
@pytest.mark.slow
def test_the_stored_fixtures_match_their_references_and_the_solution():
    sys.path.insert(0, str(ROOT / "course" / "hidden"))
    import make_fixtures
    assert make_fixtures.check() == []


def shipped_sources():
    """{path: text} of the Python files of the student copy, made in memory as make_student_copy makes them."""
    return {path: stub_regions((ROOT / path).read_text(), path) for path in tracked_files(ROOT)
            if path.endswith(".py") and not path.startswith(LEFT_OUT) and path != "course/make_student_copy.py"}


@instructor_only
@pytest.mark.slow
def test_no_shipped_file_implements_an_exercise():
    """A test that wraps a shipped reference cannot pass: no function of the student copy computes an exercise
    (course/fingerprints.py), visible course tests and the project's tests (tests/) included."""
    found = sorted((path, name, exercise) for path, text in shipped_sources().items()
                   for name, exercise in implementations(text))
    assert found == [], found


@instructor_only
def test_the_fingerprints_recognise_the_solution_and_the_hidden_references():
    """So that the test above can fail: each exercise's solution function, and some hidden test, match it."""
    solved = {name: exercise for module in MODULES
              for name, exercise in implementations((ROOT / f"{module}.py").read_text())}
    assert {EXERCISES[x]: x for x in EXERCISES} == {name: x for name, x in solved.items() if name not in SECOND_REGIONS}
    assert all(SECOND_REGIONS[name] == x for name, x in solved.items() if name in SECOND_REGIONS)
    for exercise in EXERCISES:
        number = exercise.split("-")[0]
        hidden = (ROOT / "course" / "hidden").glob(f"test_{number}_*.py")
        assert any(x == exercise for path in hidden for _, x in implementations(path.read_text())), exercise


# ---------------------------------------------------------------------------------------------- the student copy
@pytest.fixture(scope="module")
def student_copy(tmp_path_factory):
    out = tmp_path_factory.mktemp("course") / "student"
    subprocess.run([sys.executable, "course/make_student_copy.py", str(out)], cwd=ROOT, check=True,
                   capture_output=True, text=True, timeout=120)
    return out


def run_python(copy, code, *args):
    return subprocess.run([sys.executable, "-c", code, *args], cwd=copy, env=ONE_THREAD, capture_output=True,
                          text=True, timeout=600)


def solution_lines():
    """{line: exercise} of the solution regions' lines that give something away: stripped, 20 characters or
    more, not a comment, and found nowhere outside the regions in the project's own modules (a line such as
    `with torch.no_grad():` stands elsewhere in the code anyway)."""
    regions, outside = {}, set()
    for path in tracked_files(ROOT):
        if not path.endswith(".py") or path.startswith("course/"):
            continue
        inside = None
        for line in (ROOT / path).read_text().splitlines():
            if (begin := BEGIN.match(line)) or END.match(line):
                inside = begin and begin[2]
            elif inside:
                regions[line.strip()] = inside
            else:
                outside.add(line.strip())
    return {line: exercise for line, exercise in regions.items()
            if len(line) >= 20 and not line.startswith("#") and line not in outside}


@instructor_only
@pytest.mark.slow
def test_the_student_copy_holds_no_solution_line_nor_hidden_test(student_copy):
    """Every text file of the copy (code, string literals, logs, docs) searched for every telling line of every
    solution region and every check of the hidden tests; the instructor guide and these tests are not in it."""
    telling = solution_lines()
    # the hidden tests' checks: their assert lines, which hold the expected values, but for those the shipped
    # tests make too (`assert torch.isfinite(loss)` gives nothing away)
    shipped = "".join(path.read_text() for path in [*(ROOT / "course" / "tests").glob("test_*.py"),
                                                    *(ROOT / "tests").glob("test_*.py")]
                      if path.name != "test_course.py")
    hidden = {line.strip() for path in (ROOT / "course" / "hidden").glob("test_*.py")
              for line in path.read_text().splitlines()
              if line.strip().startswith("assert ") and line.strip() not in shipped}
    assert len(telling) > 50 and len(hidden) > 50
    found = []
    for path in student_copy.rglob("*"):
        try:
            text = path.read_text(encoding="utf-8") if path.is_file() else ""
        except UnicodeDecodeError:
            continue
        found += [(str(path.relative_to(student_copy)), line) for line in set(telling) | hidden if line in text]
    assert found == []
    assert not (student_copy / "course" / "README.md").exists()
    assert not (student_copy / "tests" / "test_course.py").exists()


# The environment of a process that shares the machine's two cores with another (two_at_once) for work that is
# mostly one-core Python: one thread, since two processes of two threads on two cores wait on each other.
ONE_THREAD = dict(os.environ, OMP_NUM_THREADS="1")


@instructor_only
@pytest.mark.slow
def test_the_student_copy_with_every_exercise_done_passes_its_unit_tests(tmp_path):
    """The copy with the solutions put back (the project's exercised modules over the stubs): the student's
    `pytest tests` collects, and its unit tests pass."""
    copy = tmp_path / "student"
    subprocess.run([sys.executable, "course/make_student_copy.py", str(copy)], cwd=ROOT, check=True,
                   capture_output=True, text=True, timeout=120)
    for module in MODULES:
        shutil.copy(ROOT / f"{module}.py", copy / f"{module}.py")
    # `pytest tests` as two processes at once, each told to leave out the other's half of the test files, so that
    # every file it collects runs in one of them. The largest files, the longest to run, are shared out first, each
    # to the half with fewer bytes so far.
    halves = ([], [])
    for path in sorted((copy / "tests").glob("test_*.py"), key=lambda path: -path.stat().st_size):
        min(halves, key=lambda half: sum(p.stat().st_size for p in half)).append(path)

    def run(left_out):
        return subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-m", "not slow",
                               "tests", *[f"--ignore={path.relative_to(copy)}" for path in left_out]],
                              cwd=copy, env=ONE_THREAD, capture_output=True, text=True, timeout=900)
    for done in two_at_once(run, halves):
        assert done.returncode == 0, done.stdout[-3000:]
        assert " passed" in done.stdout.splitlines()[-1]


# What the tests below run in the copy, each a Python process of its own (in_the_copy): every stub called with
# arguments of the shapes it takes, the untouched parts run, and pytest on the tests of marked and unmarked code.
STUB_CALLS = {"sokoban_move": "({(0, 0), (0, 1)}, set(), (0, 0), 'Right')",
              "parse_answer": "('<think></think><answer>Up</answer>', ['Up'], 1)",
              "token_level_rewards": "(torch.zeros(1), torch.ones(1, 2))",
              "compute_gae": "(torch.zeros(1, 2), torch.zeros(1, 2), torch.ones(1, 2), 1.0, 1.0)",
              "compute_grpo_advantages": "(torch.zeros(2), torch.zeros(2))",
              "policy_loss": "(torch.zeros(1, 2), torch.zeros(1, 2), torch.ones(1, 2), torch.ones(1, 2), 0.2, 0.28)",
              "value_loss": "(torch.zeros(1, 2), torch.zeros(1, 2), torch.ones(1, 2), torch.ones(1, 2), 0.5)",
              "select_groups_by_reward_std": "(torch.zeros(2), torch.zeros(2), 0.5)",
              "append_reply": "([], [], [1], None)",
              "token_logprobs": "(None, torch.zeros(1, 2, dtype=torch.long), torch.ones(1, 1), NS(rollout=NS("
                                "temperature=1.0), algo=NS(logits_chunk=1)))",
              "loss_normalizer": "(torch.ones(1, 2), torch.ones(1, 2), 1, 'token-mean')",
              "update": "(NS(loss_mask=torch.ones(1, 2)), None, None, None, None, None, None, None)"}


def call_the_stubs():
    """Python that calls every stub and prints what it raised."""
    code = ["import torch, envs, starpo, rollout, ragen_mini", "from types import SimpleNamespace as NS"]
    for function, args in STUB_CALLS.items():
        module = next(m for m, name, _ in adapters.EXERCISES.values() if name == function)
        code.append(f"try:\n    {module}.{function}{args}\n    print('{function} returned')\n"
                    f"except NotImplementedError as e:\n    print('{function}', e)")
    return "\n".join(code)


RUN_THE_UNTOUCHED_PARTS = ("import ragen_mini, starpo, torch\nfrom envs import make_env\n"
                           "env = make_env('frozenlake'); env.reset(0); env.step('Up')\n"
                           "env = make_env('bandit'); env.reset(0); env.step(env.actions[0])\n"
                           "print(float(starpo.masked_mean(torch.tensor([[1., 3.]]), torch.ones(1, 2))))")
# Several pytest runs in one process of the copy (torch and transformers are imported once, not once a run, and
# frozen out of the cycle collector's full passes that end each run): each argument list is a pytest.main of its
# own, a session with its own selection, exit code and report (its stdout).
PYTEST_RUNS = """
import contextlib, gc, io, json, sys
import pytest, torch, transformers
gc.freeze()
done = []
for args in json.loads(sys.argv[1]):
    report = io.StringIO()
    with contextlib.redirect_stdout(report):
        code = pytest.main(["-q", "-p", "no:cacheprovider", *args])
    done.append([int(code), report.getvalue()])
print(json.dumps(done))
"""
MARKED_AND_UNMARKED = (  # the tests of the marked functions, of Sokoban's moves and the parser, of unmarked code
    ["tests/test_starpo.py", "-k", "gae or grpo or policy_loss or value_loss or filter or token_level or logprob"],
    ["tests/test_envs.py", "-k", "sokoban or parse"],
    ["tests/test_envs.py", "-k", "frozenlake or bandit_payouts"])


@pytest.fixture(scope="module")
def in_the_copy(student_copy):
    """{what: the finished process} of the three programs above, run in the copy two at a time: each spends
    seconds importing torch."""
    jobs = {"pytest": (PYTEST_RUNS, json.dumps(MARKED_AND_UNMARKED)), "stubs": (call_the_stubs(),),
            "untouched": (RUN_THE_UNTOUCHED_PARTS,)}
    return dict(zip(jobs, two_at_once(lambda job: run_python(student_copy, *job), jobs.values())))


@instructor_only
@pytest.mark.slow
def test_every_stub_raises_and_names_its_exercise(student_copy, in_the_copy):
    done = in_the_copy["stubs"]
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    for exercise, function in EXERCISES.items():
        assert lines[function] == f"exercise {exercise}: implement this (see course/{exercise}.md)", done.stdout
        assert (student_copy / "course" / f"{exercise}.md").is_file(), exercise


@instructor_only
@pytest.mark.slow
def test_the_untouched_parts_run_in_the_copy(student_copy, in_the_copy):
    """Unmarked code is the project's own: FrozenLake and the Bandit play, the trainer imports, unmarked
    starpo works. (Sokoban needs ex1: its moves are the exercise.)"""
    done = in_the_copy["untouched"]
    assert done.returncode == 0 and done.stdout.strip() == "2.0", done.stderr
    assert not (student_copy / "course" / "hidden").exists()
    assert "course/grade.py" in (student_copy / "START_HERE.md").read_text()


@instructor_only
@pytest.mark.slow
def test_tests_of_the_marked_functions_fail_on_the_stubs_and_others_pass(in_the_copy):
    done = in_the_copy["pytest"]
    assert done.returncode == 0, done.stderr[-3000:]
    (code, out), (envs_code, envs_out), (untouched_code, untouched_out) = json.loads(done.stdout.splitlines()[-1])
    assert code == 1 and "NotImplementedError: exercise" in out
    assert "passed" not in out.splitlines()[-1]  # every one of them fails on the stubs
    assert envs_code == 1 and "passed" not in envs_out.splitlines()[-1]
    assert untouched_code == 0, untouched_out[-2000:]


def grade(cwd, *args, timeout=600):
    """course/grade.py run in `cwd` with its reports outside it: (results.json or None, the teacher's report or
    None, the finished process)."""
    out = Path(tempfile.mkdtemp(prefix="grade-test-"))  # never in the graded folder
    done = subprocess.run([sys.executable, "course/grade.py", "--json", str(out / "results.json"), "--teacher-json",
                           str(out / "teacher.json"), *args], cwd=cwd, capture_output=True, text=True, timeout=timeout)
    reports = [json.loads(path.read_text()) if path.exists() else None
               for path in (out / "results.json", out / "teacher.json")]
    shutil.rmtree(out)
    return (*reports, done)


def points(report, part=None):
    rows = [r for r in report["tests"] if part is None or f" {part}: " in r["name"]]
    return sum(r["score"] for r in rows), sum(r["max_score"] for r in rows)


def solution_with(where, module, old, new):
    """A submission folder: the solution's exercised modules, `old` replaced by `new` once in `module`."""
    where.mkdir()
    for name in MODULES:
        text = (ROOT / f"{name}.py").read_text()
        if name == module:
            assert text.count(old) == 1
            text = text.replace(old, new)
        (where / f"{name}.py").write_text(text)
    return where


@pytest.fixture(scope="module")
def gradings(student_copy, tmp_path_factory):
    """{name: grade()'s result} of the two tests below, two gradings at a time, the longest first: a grading
    spends most of its seconds in one process on one core (importing torch, running one exercise's tests), and the
    endless loop burns one core per test until its time limit."""
    where = tmp_path_factory.mktemp("submissions")
    broken = solution_with(where / "syntax", "starpo", "def compute_gae(", "def compute_gae(:")
    looping = solution_with(where / "loop", "starpo", "    # BEGIN SOLUTION ex4-gae\n",
                            "    # BEGIN SOLUTION ex4-gae\n    while True:\n        pass\n")
    jobs = {"solution": (ROOT, "--hidden"), "stubs": (student_copy,),
            "endless loop": (ROOT, "--submission", str(looping), "--only", "ex4-gae", "--timeout", "1"),
            "syntax error": (ROOT, "--submission", str(broken), "--only", "ex1-sokoban", "ex3-token-rewards"),
            "no hidden tests": (student_copy, "--hidden")}
    return dict(zip(jobs, two_at_once(lambda job: grade(*job), jobs.values())))


@instructor_only
@pytest.mark.slow
def test_grading_gives_the_solution_every_point_and_the_stubs_none(gradings):
    """course/grade.py: the solution passes every visible and hidden test of every exercise; in the student copy
    every test fails on the stubs, each named with its message. results.json is Gradescope's, with one row per
    visible test and one per exercise for its hidden tests; the teacher's report has a row per test."""
    (report, teacher, done), (stubs, _, stubs_done) = gradings["solution"], gradings["stubs"]
    assert report is not None, done.stderr
    assert report["score"] == teacher["score"] == sum(points for *_, points in adapters.EXERCISES.values()), done.stdout
    for exercise in EXERCISES:
        rows = [r for r in teacher["tests"] if r["name"].startswith(exercise + " ")]
        assert sum(" visible: " in r["name"] for r in rows) >= 4 and sum(" hidden: " in r["name"] for r in rows) >= 4
        assert all(r["score"] == r["max_score"] > 0 and r["output"] == "" for r in rows), exercise
        [hidden] = [r for r in report["tests"] if r["name"] == f"{exercise} hidden tests"]
        assert hidden["score"] == pytest.approx(sum(r["score"] for r in rows if " hidden: " in r["name"]))
    assert {r["visibility"] for r in report["tests"]} == {"visible", "after_published"}
    assert all(set(r) == {"name", "score", "max_score", "output", "visibility"} for r in report["tests"])

    assert stubs["score"] == 0 and len(stubs["tests"]) >= 4 * len(EXERCISES), stubs_done.stdout
    for row in stubs["tests"]:
        exercise = row["name"].split(" ")[0]
        assert row["score"] == 0 and row["max_score"] > 0 and row["visibility"] == "visible", row
        assert f"NotImplementedError: exercise {exercise}" in row["output"], row
    assert ("FAILED ex4-gae visible: test_the_worked_example: NotImplementedError: exercise ex4-gae"
            in stubs_done.stdout)


@instructor_only
@pytest.mark.slow
def test_the_grader_survives_a_syntax_error_an_infinite_loop_and_no_hidden_tests(gradings):
    report, _, done = gradings["syntax error"]
    assert report is not None, done.stderr
    assert points(report) == (10, 20), done.stdout  # envs.py's exercise keeps its points
    [row] = [r for r in report["tests"] if r["name"].startswith("ex3-token-rewards")]
    assert "could not import" in row["output"] and "SyntaxError" in row["output"] and "starpo.py" in row["output"]
    assert row["max_score"] == 10

    report, _, done = gradings["endless loop"]
    assert report is not None and points(report) == (0, 15), done.stdout
    assert all("time limit" in r["output"] for r in report["tests"]), report

    report, _, done = gradings["no hidden tests"]
    assert done.returncode == 2 and report is None and "Traceback" not in done.stderr
    assert "--hidden needs the hidden tests" in done.stderr and "course/hidden" in done.stderr


# ---------------------------------------------------------------------------------------------- planted bugs
# update()'s actor step, from its comment line to the critic's, and the critic step's last line
_UPDATE = (ROOT / "ragen_mini.py").read_text()
ACTOR_STEP = _UPDATE[_UPDATE.index("            # --- the actor step"):
                     _UPDATE.index("            # --- the critic step")]
CRITIC_STEP_END = '"critic", logged))\n'
MUTANTS = {  # name -> (exercise, [(solution text, mutated text), ...]); each must lose points
    "GAE drops the terminal reward": ("ex4-gae", [
        ("    next_adv = token_rewards.new_zeros(B)  # (B,)\n",
         "    next_adv = token_rewards.new_zeros(B)  # (B,)\n    seen = torch.zeros(B, dtype=torch.bool)\n"),
        ("delta = token_rewards[:, t] +", "delta = torch.where(seen, token_rewards[:, t], 0) +"),
        ("        m = is_step[:, t]\n", "        m = is_step[:, t]\n        seen = seen | m\n")]),
    "GAE loop skips the last token": ("ex4-gae", [("reversed(range(T))", "reversed(range(T - 1))")]),
    "GAE does not skip observation tokens": ("ex4-gae", [
        ("next_value = torch.where(m, values[:, t], next_value)", "next_value = values[:, t]"),
        ("next_adv = torch.where(m, adv_t, next_adv)", "next_adv = adv_t")]),
    "policy-loss metrics not detached": ("ex6-policy-loss", [("    with torch.no_grad():\n", "    if True:\n")]),
    "policy loss x * mask instead of where": ("ex6-policy-loss", [
        ("loss = _aggregate(per_token, loss_mask, loss_normalizer)",
         "loss = (per_token * loss_mask).sum() / (loss_mask.sum().clamp(min=1) if loss_normalizer is None "
         "else max(loss_normalizer, 1))")]),
    "clip low on both sides": ("ex6-policy-loss", [("1.0 + clip_high)", "1.0 + clip_low)")]),
    "a box pushed into a second box": ("ex1-sokoban", [(" or beyond in boxes", "")]),
    "invalid pieces do not break the format": ("ex2-parser", [("bool(actions) and len(actions) == len(pieces)",
                                                               "bool(actions)")]),
    "reward on the first sampled token": ("ex3-token-rewards", [("(loss_mask * positions).argmax(-1)",
                                                                 "loss_mask.argmax(-1)")]),
    "GRPO without the eps in the denominator": ("ex5-grpo", [("centred / (std[group] + eps)", "centred / std[group]")]),
    "value clip fraction counts ties": ("ex7-value-loss", [("(clipped > unclipped)", "(clipped >= unclipped)")]),
    "filter rounds the kept count": ("ex8-filter", [("int(filter_ratio * std.numel())",
                                                     "round(filter_ratio * std.numel())")]),
    "the end-of-turn token gets no loss": ("ex9-response-mask", [
        ("    sampled += [1] * len(response)\n",
         "    sampled += [int(token != chat.end_of_turn_id) for token in response]\n")]),
    "the template's whole closing text after a reply that closed its turn": ("ex9-response-mask", [
        ("    if response and response[-1] == chat.end_of_turn_id:  # the model closed its turn itself\n"
         "        closing = closing[len(chat.tokenizer.convert_ids_to_tokens(chat.end_of_turn_id)):]\n", "")]),
    "a cut reply's closing end of turn counted as sampled": ("ex9-response-mask", [
        ("    ids += response\n", "    if not response or response[-1] != chat.end_of_turn_id:\n"
                              "        response = response + [chat.end_of_turn_id]\n    ids += response\n")]),
    "temperature applied after the log-softmax": ("ex10-logprobs", [
        ("logp = z.gather(-1, targets[:, None]).squeeze(-1) - z.logsumexp(-1)",
         "logp = (logits.float().gather(-1, targets[:, None]).squeeze(-1) - logits.float().logsumexp(-1))"
         ".div(temperature)")]),
    "no temperature": ("ex10-logprobs", [("logits.float() /", "logits.float() + 0 *")]),  # z = logits
    "each state scores its own token, not the next": ("ex10-logprobs", [
        ("flat_hidden, targets = hidden[at], input_ids[:, 1:][at]",
         "flat_hidden, targets = hidden[at], input_ids[:, :-1][at]")]),
    "each micro-batch normalised by its own token count": ("ex11-loss-normalizer", [
        ("return mini_batch_mask.sum().clamp(min=1)", "return micro_batch_mask.sum().clamp(min=1)")]),
    "micro-batch-mean without the number of micro-batches": ("ex11-loss-normalizer", [(" * num_micro_batches", "")]),
    "an empty mini-batch divides by zero": ("ex11-loss-normalizer", [
        ("return mini_batch_mask.sum().clamp(min=1)", "return mini_batch_mask.sum()")]),
    "the gradient clipped after the step": ("ex12-update", [
        ("    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.algo.grad_clip)\n"
         "    if torch.isfinite(grad_norm):\n        optimizer.step()\n",
         "    optimizer.step()\n"
         "    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.algo.grad_clip)\n"
         "    if torch.isfinite(grad_norm):\n        pass\n")]),
    "the actor steps after every micro-batch": ("ex12-update", [
        ("                loss.backward()  # the micro-batch losses add up to the mini-batch's token mean\n",
         "                loss.backward()\n                clipped_step(actor, actor_opt, cfg, 'actor', logged)\n")]),
    "one shuffle for all epochs": ("ex12-update", [
        ("    for _ in range(cfg.algo.ppo_epochs):\n"
         "        order = torch.randperm(B, generator=generator).to(device)\n",
         "    order = torch.randperm(B, generator=generator).to(device)\n    for _ in range(cfg.algo.ppo_epochs):\n")]),
    "the critic steps before the actor": ("ex12-update", [(ACTOR_STEP, ""),
                                                           (CRITIC_STEP_END, CRITIC_STEP_END + ACTOR_STEP)]),
}


def mutated(exercise, patches):
    """[(module name, its source)] of the modules changed by the patches, applied inside the exercise's solution
    regions (each must occur exactly once in them, so that a rewritten solution makes the mutant fail loudly
    rather than vanish), in MODULES' order."""
    pieces = {}  # module -> its source cut at the exercise's region bounds: text, region, text, region, ...
    for name in MODULES:
        lines, cut, start = (ROOT / f"{name}.py").read_text().splitlines(keepends=True), [], 0
        for i, line in enumerate(lines):
            if (m := BEGIN.match(line)) and m[2] == exercise:
                end = next(j for j in range(i, len(lines)) if END.match(lines[j]))
                cut += ["".join(lines[start:i]), "".join(lines[i:end])]
                start = end
        if cut:
            pieces[name] = cut + ["".join(lines[start:])]
    assert pieces, f"no solution region {exercise}"
    changed = set()
    for old, new in patches:
        where = [(name, k) for name, cut in pieces.items() for k in range(1, len(cut), 2) if old in cut[k]]
        assert len(where) == 1 and pieces[where[0][0]][where[0][1]].count(old) == 1, \
            f"mutant patch {old!r} must occur once in {exercise}'s regions"
        name, k = where[0]
        pieces[name][k] = pieces[name][k].replace(old, new)
        changed.add(name)
    return [(name, "".join(pieces[name])) for name in MODULES if name in changed]


# Grades mutants in one process (torch is imported once): each mutant's module replaces the real one in
# sys.modules, the test modules are imported afresh, and grade.py's plugin and its reading of the events score
# each part (the visible and the hidden tests) by the tests' weights. What is imported before the first mutant is
# frozen out of the cycle collector's full passes, which end each pytest.main (as in grade.py's server).
MUTANT_GRADER = """
import gc, json, os, sys, types
import pytest, torch, transformers
root, todo, out = sys.argv[1:4]
sys.path[:0] = [os.path.join(root, "course"), root]
import grade, grading_plugin
gc.freeze()
# Installed packages may live under the root too (a virtual environment in the checkout): never theirs.
installed = tuple(os.path.join(p, "") for p in {sys.prefix, sys.base_prefix})
def own(module):
    file = getattr(module, "__file__", None) or ""
    return (file.startswith(os.path.join(root, "")) and not file.startswith(installed)
            and "site-packages" not in file.split(os.sep))
results = {}
for name, exercise, modules in json.load(open(todo)):
    for loaded in [m for m, module in sys.modules.items()
                   if m.startswith("test_ex") or m not in ("grade", "grading_plugin", "adapters") and own(module)]:
        del sys.modules[loaded]  # the project's modules are imported afresh, the mutants' importers included
    for module, text in modules:
        mutant = types.ModuleType(module)
        mutant.__file__ = os.path.join(root, module + ".py")
        sys.modules[module] = mutant
        exec(compile(text, mutant.__file__, "exec"), mutant.__dict__)
    results[name] = {}
    for part, folder in (("visible", "course/tests"), ("hidden", "course/hidden")):
        sources = grade.read_tests(os.path.join(root, folder), exercise)
        tests = {(f"{folder}/{file}", test): weight for file, source in sources.items()
                 for test, weight in grade.tests_in(source)}
        events = []
        pytest.main(["-q", "-p", "no:cacheprovider", "--noconftest", *[f"{folder}/{file}" for file in sources]],
                    plugins=[grading_plugin.Reporter(lambda **event: events.append(event))])
        passed, _ = grade.outcomes(events, list(tests))
        results[name][part] = [sum(w for key, w in tests.items() if passed.get(key, (False,))[0]), sum(tests.values())]
json.dump(results, open(out, "w"))
"""


@instructor_only
@pytest.mark.slow
def test_every_planted_bug_loses_points_in_the_visible_and_in_the_hidden_tests(tmp_path):
    todo = [(name, exercise, mutated(exercise, patches)) for name, (exercise, patches) in MUTANTS.items()]

    def grade_mutants(half):  # every other mutant, in a process of its own
        (tmp_path / f"todo{half}.json").write_text(json.dumps(todo[half::2]))
        done = subprocess.run([sys.executable, "-c", MUTANT_GRADER, str(ROOT), str(tmp_path / f"todo{half}.json"),
                               str(tmp_path / f"out{half}.json")], cwd=ROOT, env=ONE_THREAD, capture_output=True,
                              text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads((tmp_path / f"out{half}.json").read_text())
    results = {name: parts for graded in two_at_once(grade_mutants, (0, 1)) for name, parts in graded.items()}
    assert set(results) == set(MUTANTS)
    kept = {name: parts for name, parts in results.items()
            if any(score >= maximum or maximum == 0 for score, maximum in parts.values())}
    assert not kept, f"these planted bugs keep every point of the visible or of the hidden tests: {kept}"
    textbook = results["GAE does not skip observation tokens"]  # textbook GAE: at most a third of ex4's points
    assert sum(score for score, _ in textbook.values()) <= sum(top for _, top in textbook.values()) / 3, textbook
