"""Handing out and collecting (course/README.md): course/grade_folder.py grades a folder of submissions into one CSV,
a row per submission, and a submission whose grading fails gets a row that says why; course/make_gradescope.py
builds Gradescope's autograder, whose run_autograder gives the solution every point and the untouched student copy
none."""
import csv
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "course"))
from adapters import EXERCISES  # noqa: E402
from grade import MODULES  # noqa: E402
from helpers import two_at_once  # noqa: E402

instructor_only = pytest.mark.skipif(not (ROOT / "course" / "hidden").is_dir(),
                                     reason="the instructor's repository only (no course/hidden/ here)")

# The stand-in for grade.py: it reads what to report from the submission's plan.json, and writes grade.py's full
# report (--teacher-json), its results.json and the arguments it was given (into its working folder, the
# submission's report folder). A plan with "crash" raises; one with "sleep" starts a detached process (its pid in
# the submission's pid file) and sleeps.
FAKE_GRADER = r'''
import json, os, subprocess, sys, time
args = sys.argv[1:]
value = lambda flag: args[args.index(flag) + 1]
with open("argv.json", "w") as f:
    json.dump(args, f)
plan = json.load(open(os.path.join(value("--submission"), "plan.json")))
if "crash" in plan:
    print("grading", flush=True)
    raise RuntimeError(plan["crash"])
if "sleep" in plan:
    left = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    with open(os.path.join(value("--submission"), "pid"), "w") as f:
        f.write(str(left.pid))
    time.sleep(plan["sleep"])
rows = [{"name": name, "score": score, "max_score": score, "output": "", "visibility": "visible"}
        for name, score in plan["rows"]]
report = {"score": sum(score for _, score in plan["rows"]), "output": "", "tests": rows}
for flag in ("--teacher-json", "--json"):
    with open(value(flag), "w") as f:
        json.dump(report, f)
'''


def full_marks(**changed):
    """A plan's rows: every exercise one visible and one hidden row, worth half its points each; changed:
    {exercise: [(row name, score)]} in place of an exercise's two rows."""
    rows = []
    for exercise, (*_, points) in EXERCISES.items():
        rows += changed.get(exercise.replace("-", "_"), [(f"{exercise} visible: test_a", points / 2),
                                                         (f"{exercise} hidden: test_b", points / 2)])
    return rows


def run_folder(*args):
    return subprocess.run([sys.executable, str(ROOT / "course" / "grade_folder.py"), *map(str, args)],
                          capture_output=True, text=True, timeout=120)


@pytest.fixture
def fake_grader(tmp_path):
    path = tmp_path / "fake_grade.py"
    path.write_text(FAKE_GRADER)
    return path


def submission(folder, name, plan):
    where = folder / name
    where.mkdir(parents=True)
    (where / "plan.json").write_text(json.dumps(plan))
    return where


def test_grade_folder_writes_a_row_per_submission_and_one_for_a_failed_grading(tmp_path, fake_grader):
    folder = tmp_path / "submissions"
    submission(folder, "alice", {"rows": full_marks(ex4_gae=[("ex4-gae visible: test_a", 7.5),
                                                             ("ex4-gae hidden: test_b", 0)])})
    submission(folder, "bob", {"crash": "the grader broke"})
    submission(folder, "carol", {"rows": full_marks(ex1_sokoban=[("ex1-sokoban: could not import envs.py", 0)],
                                                    ex2_parser=[("ex2-parser: could not import envs.py", 0)],
                                                    ex5_grpo=[("ex5-grpo visible: test_a", 10 / 3),
                                                              ("ex5-grpo hidden: test_b", 0)])})
    (folder / ".git").mkdir()  # neither a hidden folder nor a file is a submission
    (folder / "notes.txt").write_text("not a submission")
    out = tmp_path / "reports"
    done = run_folder(folder, "--csv", tmp_path / "grades.csv", "--out", out, "--timeout", 5, "--jobs", 1,
                      "--grader", fake_grader)
    assert done.returncode == 0, done.stderr
    with open(tmp_path / "grades.csv", newline="") as f:
        rows = list(csv.reader(f))
    assert rows == [
        ["submission", "ex1-sokoban", "ex2-parser", "ex3-token-rewards", "ex4-gae", "ex5-grpo", "ex6-policy-loss",
         "ex7-value-loss", "ex8-filter", "ex9-response-mask", "ex10-logprobs", "ex11-loss-normalizer", "ex12-update",
         "total", "grading_failed"],
        ["alice", "10", "10", "10", "7.5", "10", "15", "10", "10", "10", "10", "5", "15", "122.5", ""],
        ["bob", "", "", "", "", "", "", "", "", "", "", "", "", "", "grade.py exited with code 1: RuntimeError: the "
         "grader broke"],
        ["carol", "0", "0", "10", "15", "3.33", "15", "10", "10", "10", "10", "5", "15", "103.33", ""],
    ]
    assert "[2/3] bob: FAILED: grade.py exited with code 1" in done.stdout
    # grade.py's own options, as the instructor grades: the submission, the hidden tests, both reports per student
    argv = json.loads((out / "alice" / "argv.json").read_text())
    assert argv[:4] == ["--timeout", "5.0", "--jobs", "1"]
    assert argv[4:] == ["--submission", str(folder / "alice"), "--hidden",
                        "--json", str(out / "alice" / "results.json"), "--teacher-json", str(out / "alice" / "full.json")]
    assert (out / "carol" / "full.json").is_file() and (out / "carol" / "results.json").is_file()
    assert "RuntimeError: the grader broke" in (out / "bob" / "grade.log").read_text()
    assert "grading" in (out / "bob" / "grade.log").read_text()  # its stdout too


@pytest.mark.slow
def test_grade_folder_stops_a_grading_past_its_time_and_what_it_left_running(tmp_path, fake_grader):
    folder = tmp_path / "submissions"
    slow = submission(folder, "slow", {"sleep": 60, "rows": full_marks()})
    submission(folder, "quick", {"rows": full_marks()})
    start = time.monotonic()
    done = run_folder(folder, "--csv", tmp_path / "grades.csv", "--grade-timeout", 2, "--grader", fake_grader)
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - start < 30
    with open(tmp_path / "grades.csv", newline="") as f:
        rows = {row["submission"]: row for row in csv.DictReader(f)}
    assert rows["quick"]["total"] == "130" and rows["quick"]["grading_failed"] == ""
    assert rows["slow"]["total"] == "" and "ran past --grade-timeout (2 s)" in rows["slow"]["grading_failed"]
    assert (tmp_path / "grades-reports" / "quick" / "full.json").is_file()  # the default --out, beside the CSV
    pid = int((slow / "pid").read_text())
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return
    os.kill(pid, signal.SIGKILL)
    pytest.fail("the process the stopped grading started is still running")


def test_grade_folder_bad_input_stops_with_one_line(tmp_path, fake_grader):
    folder = tmp_path / "submissions"
    cases = [((tmp_path / "nowhere", "--csv", tmp_path / "g.csv"), f"{tmp_path / 'nowhere'}: no such folder"),
             ((folder, "--csv", tmp_path / "g.csv"), f"{folder} holds no submission folder")]
    folder.mkdir()
    (folder / "alice.py").write_text("")  # a file, not a submission folder
    for args, message in cases:
        done = run_folder(*args, "--grader", fake_grader)
        [line] = done.stderr.strip().splitlines()
        assert done.returncode == 2 and line.startswith(f"grade_folder.py: error: {message}"), done.stderr
    submission(folder, "alice", {"rows": full_marks()})
    for csv_path, message in [(tmp_path / "no" / "g.csv", f"the folder {tmp_path / 'no'} does not exist"),
                              (folder, "is a folder; give a file name")]:
        done = run_folder(folder, "--csv", csv_path, "--grader", fake_grader)
        [line] = done.stderr.strip().splitlines()
        assert done.returncode == 2 and f"--csv {csv_path}" in line and message in line, done.stderr
    assert not (folder / "alice" / "argv.json").exists() and not list(tmp_path.glob("*-reports"))  # nothing graded


# ---------------------------------------------------------------------------------------------- Gradescope
@pytest.fixture(scope="module")
def autograder(tmp_path_factory):
    """The archive make_gradescope.py builds, unpacked as Gradescope unpacks it: into ROOT/source/, with
    run_autograder copied to ROOT/."""
    where = tmp_path_factory.mktemp("gradescope")
    done = subprocess.run([sys.executable, "course/make_gradescope.py", str(where / "autograder.zip")], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    root = where / "autograder"
    with zipfile.ZipFile(where / "autograder.zip") as archive:
        archive.extractall(root / "source")
        modes = {info.filename: info.external_attr >> 16 for info in archive.infolist()}
    shutil.copy(root / "source" / "run_autograder", root / "run_autograder")
    return root, modes


def run_autograder(root, files):
    """Run the unpacked autograder on a submission of these files. -> (results.json, the finished process)."""
    shutil.rmtree(root / "submission", ignore_errors=True)
    (root / "submission").mkdir()
    for path in files:
        shutil.copy(path, root / "submission")
    # AUTOGRADER_USER empty: the tests may run as root, and this machine has no user of setup.sh's
    env = dict(os.environ, AUTOGRADER_ROOT=str(root), AUTOGRADER_PYTHON=sys.executable, AUTOGRADER_USER="")
    done = subprocess.run(["bash", str(root / "run_autograder")], cwd=root, env=env, capture_output=True,
                          text=True, timeout=600)
    results = root / "results" / "results.json"
    return (json.loads(results.read_text()) if results.exists() else None), done


@instructor_only
@pytest.mark.slow
def test_the_gradescope_archive_has_gradescope_layout_and_no_solution(autograder):
    root, modes = autograder
    source = root / "source"
    assert stat.S_IMODE(modes["setup.sh"]) == stat.S_IMODE(modes["run_autograder"]) == 0o755
    for script in ("setup.sh", "run_autograder"):
        done = subprocess.run(["bash", "-n", str(source / script)], capture_output=True, text=True)
        assert done.returncode == 0, (script, done.stderr)
    setup = (source / "setup.sh").read_text()
    assert "download.pytorch.org/whl/cpu" in setup and "-c \"$RELEASE/constraints.txt\"" in setup
    release = source / "release"
    assert (release / "course" / "grade.py").is_file() and (release / "requirements.txt").is_file()
    assert sorted(p.name for p in (release / "course" / "hidden").glob("test_*.py")) == \
        sorted(p.name for p in (ROOT / "course" / "hidden").glob("test_*.py"))
    for module in MODULES:  # the release's exercised files are the stubs, not the solution
        text = (release / f"{module}.py").read_text()
        assert "BEGIN SOLUTION" not in text and 'raise NotImplementedError("exercise ' in text, module
    for left_out in ("course/README.md", "course/grade_folder.py", "course/make_gradescope.py"):
        assert not (release / left_out).exists(), left_out


@instructor_only
@pytest.mark.slow
def test_run_autograder_gives_the_solution_every_point_and_the_student_copy_none(autograder, tmp_path):
    root, _ = autograder
    copy = tmp_path / "student"
    subprocess.run([sys.executable, "course/make_student_copy.py", str(copy)], cwd=ROOT, check=True,
                   capture_output=True, text=True, timeout=120)
    # the solution and the student copy graded at once, each by an autograder of its own (it keeps the submission
    # and the results in its folder)
    shutil.copytree(root, tmp_path / "autograder")
    (results, done), (stubs, stubs_done) = two_at_once(
        lambda job: run_autograder(*job), [(root, [ROOT / f"{module}.py" for module in MODULES]),
                                           (tmp_path / "autograder", [copy / f"{module}.py" for module in MODULES])])
    assert results is not None, done.stderr
    most = sum(points for *_, points in EXERCISES.values())
    assert results["score"] == most == 130, done.stdout
    assert results["stdout_visibility"] == "hidden" and sum(t["max_score"] for t in results["tests"]) == 130
    assert "total 130.00 / 130" in done.stdout

    assert stubs is not None, stubs_done.stderr
    assert stubs["score"] == 0 and sum(t["max_score"] for t in stubs["tests"]) == 130, stubs_done.stdout
    assert all(t["score"] == 0 for t in stubs["tests"])

    # When grade.py cannot grade (here the release lost the git index it lists its files with), results.json
    # still comes, with 0 points and grade.py's one-line reason.
    (root / "source" / "release" / ".git").rename(root / "source" / "release" / "git-away")
    try:
        results, done = run_autograder(root, [ROOT / f"{module}.py" for module in MODULES])
    finally:
        (root / "source" / "release" / "git-away").rename(root / "source" / "release" / ".git")
    assert results["score"] == 0 and "grading failed (exit code 2)" in results["output"], results
    assert "could not build the release" in results["output"]


# ---------------------------------------------------------------------------------------------------------------
# The capstone's answer key (course/capstone-answer-key.md) and its reference runs (course/capstone_reference.py)
import capstone  # noqa: E402
import capstone_reference  # noqa: E402
import config  # noqa: E402
import models  # noqa: E402
from make_student_copy import LEFT_OUT  # noqa: E402


def test_capstone_measures_by_hand():
    points = [(0, 0.4), (5, 0.85), (10, 0.92), (15, 0.88), (20, 1.0)]
    assert capstone_reference.measures(points) == {"mean success": (0.4 + 0.85 + 0.92 + 0.88 + 1.0) / 5,
                                                   "first >= 0.9": 10, "final success": 1.0}
    assert capstone_reference.measures([(0, 0.5), (5, 0.89)])["first >= 0.9"] is None
    # mean 4, sample sd sqrt(2) = 1.41, one seed never reached it
    assert capstone_reference.spread([3, 5, None]) == "4 +- 1.4 (3-5), 1 never"
    assert capstone_reference.spread([None, None]) == "never"


@pytest.mark.parametrize("cores, load", [(2, 0.0), (16, 0.5), (2, 9.0)])
def test_the_capstone_runs_compute_with_one_thread_on_any_machine(cores, load):
    """Their CPU minutes are a budget (part b) and a bar (part a): a run given a thread per core, which the
    trainer takes on an idle machine, counts every spinning thread's time too."""
    part_a = capstone.command("RUN", [])
    part_b = [*capstone_reference.COMMON, *capstone_reference.SETTINGS["epochs4"]]
    for overrides in (part_a[part_a.index("--config") + 2:], part_b):
        cfg = config.load_config(str(ROOT / capstone_reference.PRESET), overrides)
        assert models.cpu_threads(cfg["train"]["threads"], cores=cores, load=load)[0] == 1


def test_capstone_settings_are_valid_and_each_question_holds_one_idea_apart():
    for setting, overrides in capstone_reference.SETTINGS.items():
        config.load_config(str(ROOT / capstone_reference.PRESET), [*capstone_reference.COMMON, *overrides])
    keys = {setting: {item.split("=")[0] for item in overrides}
            for setting, overrides in capstone_reference.SETTINGS.items()}
    # what each question varies: one key, or the keys of one idea (prompts x samples at one budget; the filter's
    # step-matched control sets the mini-batch to the kept trajectories, and its micro-batch may not be larger)
    allowed = {"filter": {"algo.filter_ratio", "algo.mini_batch_size", "algo.micro_batch_size"},
               "critic": {"algo.estimator"}, "clip": {"algo.clip_high", "algo.ppo_epochs"},
               "group-size": {"rollout.groups", "rollout.group_size"}}
    for question, settings in capstone_reference.QUESTIONS.items():
        assert set().union(*(keys[s] for s in settings)) <= allowed[question], question


def test_the_handouts_example_runs_differ_in_one_setting():
    text = (ROOT / "course" / "capstone-investigation.md").read_text()
    block = text.split("## Run it")[1].split("```bash")[1].split("```")[0]
    shared = dict(line.split("=", 1) for line in block.splitlines() if line.startswith("B="))["B"].strip('"')
    runs = [line.replace("$B", shared).split()[4:] for line in block.splitlines()
            if line.startswith("python ragen_mini.py")]
    assert len(runs) == 2
    settings = [dict(item.split("=", 1) for item in run if not item.startswith("run_dir=")) for run in runs]
    assert {k for k in settings[0].keys() | settings[1].keys() if settings[0].get(k) != settings[1].get(k)} == {
        "algo.filter_ratio"}
    for run in runs:
        config.load_config(str(ROOT / "configs" / "bandit.yaml"), run)


def test_the_answer_key_and_the_reference_runs_stay_out_of_the_student_copy():
    for path in ("course/capstone-answer-key.md", "course/capstone_reference.py", "results/capstone/filter.md",
                 "plots/capstone_filter.png"):
        assert path.startswith(LEFT_OUT), path
    assert not "course/capstone-investigation.md".startswith(LEFT_OUT)


def test_the_answer_keys_tables_are_the_reference_tables():
    key = (ROOT / "course" / "capstone-answer-key.md").read_text()
    for question in capstone_reference.QUESTIONS:
        table = (ROOT / "results" / "capstone" / f"{question}.md").read_text().split("\n\n", 2)[2].strip()
        assert table in key, question
        assert f"plots/capstone_{question}.png" in key and (ROOT / "plots" / f"capstone_{question}.png").is_file()


def test_capstone_reference_stops_at_a_folder_it_did_not_make_and_keeps_it(tmp_path, monkeypatch):
    monkeypatch.setattr(capstone_reference, "RUNS_DIR", str(tmp_path))
    mine = tmp_path / "grpo-seed1"
    mine.mkdir()
    (mine / "metrics.jsonl").write_text('{"iteration": 0, "eval/success": 0.5}\n')
    started = []
    monkeypatch.setattr(capstone_reference, "train", lambda *job: started.append(job))
    for argv in (["critic"], ["critic", "--draw"]):
        with pytest.raises(SystemExit, match="not made by this script"):
            capstone_reference.main(argv)
    assert started == [] and (mine / "metrics.jsonl").read_text() == '{"iteration": 0, "eval/success": 0.5}\n'
