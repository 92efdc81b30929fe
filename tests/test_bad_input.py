"""Bad input through the real entry point, `ragen_mini.main` (what `python ragen_mini.py` runs): every row
ends with a one-paragraph message that names the key, file or value, a non-zero exit and no traceback.
Config rows are refused before any model loads and leave no run folder behind; damaged run folders are
refused when resumed; a full disk says so and where the last complete checkpoint is.
"""
import errno
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import bookkeeping  # noqa: E402
import evaluation  # noqa: E402
import config  # noqa: E402
import launch  # noqa: E402
import plots  # noqa: E402
import ragen_mini  # noqa: E402
import tiny  # noqa: E402
from helpers import BANDIT, TINY_YAML, two_at_once  # noqa: E402

SMALL = ["train.device=cpu", "rollout.groups=2", "rollout.group_size=4", "rollout.max_new_tokens=8",
         "rollout.max_context=1024", "env.max_turns=2", "algo.mini_batch_size=4", "algo.micro_batch_size=2",
         "eval.num_seeds=4", "eval.every=1", "eval.samples=1", "warmup.steps=0", "train.iterations=1",
         "checkpoint.every=1"]


def exit_message(argv, capsys):
    """Run main(argv), which must stop with a message: SystemExit with a text (Python prints it and exits
    with 1) or a non-zero code with the message on stderr (argparse). Any other exception is a traceback."""
    with pytest.raises(SystemExit) as stop:
        ragen_mini.main(argv)
    code = stop.value.code
    message = code if isinstance(code, str) else capsys.readouterr().err
    assert code not in (0, None) and message.strip(), argv
    assert "Traceback" not in message
    return message


# ------------------------------------------------------------------------------------------------------
# Overrides: (overrides, what the message must name). All refused before any model loads.
# ------------------------------------------------------------------------------------------------------
CONFIG_ROWS = [
    # unknown keys and wrong types
    (["algo.clip_hihg=0.3"], "algo.clip_high"),
    (["rollout.group_szie=4"], "rollout.group_size"),
    (["trian.iterations=3"], "train.iterations"),
    (["algo.clip_low=abc"], "algo.clip_low"),
    (["rollout.groups=1.5"], "rollout.groups"),
    (["rollout.think=3"], "rollout.think"),
    (["seed=true"], "seed"),
    (["env.name=[sokoban]"], "env.name"),
    (["algo=3"], "algo"),
    (["env.kwargs=3"], "env.kwargs"),
    (["env.kwargs=[1]"], "env.kwargs"),
    (["algo.filter_largest=2"], "algo.filter_largest"),
    # overrides that are not section.key=value, or whose value is not YAML
    (["env.name"], "env.name"),
    (["=3"], "=3"),
    (["algo.=3"], "algo."),
    (["algo.clip_low=[0.1"], "algo.clip_low"),
    (["env.kwargs={dim_room: 8"], "env.kwargs"),
    (["env.kwargs={dim_room:", "8,", "num_boxes:", "2}"], "env.kwargs"),  # typed unquoted: the shell split it
    (["env.name=sokoban", "8,"], "8,"),
    # settings that cannot run
    (["rollout.groups=4", "rollout.group_size=4", "algo.filter_ratio=0.25", "algo.mini_batch_size=8"], "mini_batch_size"),
    (["algo.mini_batch_size=4", "algo.micro_batch_size=8"], "micro_batch_size"),
    (["algo.micro_batch_size=0"], "micro_batch_size"),
    (["algo.logits_chunk=0"], "logits_chunk"),
    (["rollout.engine=paged"], "rollout.engine"),
    (["algo.estimator=grpo", "rollout.group_size=1", "algo.mini_batch_size=1", "algo.micro_batch_size=1"], "group_size"),
    (["algo.estimator=sarsa"], "algo.estimator"),
    (["env.name=chess"], "env.name"),
    (["train.device=tpu"], "train.device"),
    (["algo.filter_ratio=0"], "filter_ratio"),
    (["algo.ppo_epochs=0"], "ppo_epochs"),
    (["rollout.max_new_tokens=0"], "max_new_tokens"),
    (["rollout.max_new_tokens=30000"], "max_context"),
    (["rollout.max_context=0"], "max_context"),
    (["rollout.min_new_tokens=-1"], "min_new_tokens"),
    (["rollout.stated_max_tokens=0"], "stated_max_tokens"),
    (["rollout.groups=0"], "rollout.groups"),
    (["rollout.group_size=-1"], "rollout.group_size"),
    (["env.max_turns=0"], "env.max_turns"),
    (["env.max_actions=-1"], "env.max_actions"),
    (["eval.num_seeds=0"], "eval.num_seeds"),
    (["eval.samples=-1"], "eval.samples"),
    (["warmup.steps=-1"], "warmup.steps"),
    (["warmup.batch_size=0"], "warmup.batch_size"),
    (["eval.seed_offset=0"], "eval.seed_offset"),
    (["eval.seed_offset=-5"], "eval.seed_offset"),
    (["eval.seed_offset=5000000000"], "eval.seed_offset"),
    (["seed=-1"], "seed"),
    (["seed=99999999999999999999"], "seed"),
    (["eval.every=-1"], "eval.every"),
    (["checkpoint.every=-2"], "checkpoint.every"),
    (["train.time_limit_min=-1"], "train.time_limit_min"),
    (["train.iterations=-1"], "train.iterations"),
    # values that would train wrongly
    (["algo.grad_clip=-1"], "grad_clip"),
    (["algo.grad_clip=0"], "grad_clip"),
    (["algo.actor_lr=0"], "actor_lr"),
    (["algo.actor_lr=-1e-6"], "actor_lr"),
    (["algo.critic_lr=.inf"], "critic_lr"),
    (["algo.actor_lr=.nan"], "actor_lr"),
    (["warmup.lr=0"], "warmup.lr"),
    (["algo.weight_decay=-1"], "algo.weight_decay"),
    (["algo.lam=2"], "algo.lam"),
    (["algo.gamma=.nan"], "algo.gamma"),
    (["algo.clip_high=.nan"], "algo.clip_high"),
    (["algo.kl_coef=.nan"], "algo.kl_coef"),
    (["algo.entropy_coef=.inf"], "algo.entropy_coef"),
    (["algo.dual_clip=.nan"], "algo.dual_clip"),
    (["rollout.temperature=.inf"], "rollout.temperature"),
    (["rollout.temperature=.nan"], "rollout.temperature"),
    (["eval.temperature=.nan"], "eval.temperature"),
    (["train.time_limit_min=.nan"], "train.time_limit_min"),
    # env keywords no env accepts: caught by building, resetting and stepping the env once
    (["env.kwargs={is_slipery: false}", "env.name=frozenlake"], "is_slipery"),
    (["env.kwargs={dim_room: 3}"], "dim_room"),
    (["env.kwargs={dim_room: [2, 2]}"], "dim_room"),
    (["env.kwargs={num_boxes: 0}"], "num_boxes"),
    (["env.kwargs={num_boxes: -1}"], "num_boxes"),
    (["env.kwargs={dim_room: abc}"], "dim_room"),
    (["env.name=frozenlake", "env.kwargs={size: 1}"], "size"),
    (["env.name=frozenlake", "env.kwargs={size: abc}"], "size"),
    ([*BANDIT, "env.kwargs={low_payout: abc}"], "low_payout"),
    ([*BANDIT, "env.kwargs={high_payout: .nan}"], "high_payout"),
    # the reasoning warm-up and its measure
    (["warmup.thoughts=yes"], "warmup.thoughts"),
    (["warmup.env_text=true", "warmup.thought_loss=false"], "warmup.thought_loss"),
    (["rollout.mi_groups=1"], "rollout.mi_groups"),
    (["warmup.thought_temperature=0"], "warmup.thought_temperature"),
    # well-typed but absurd: every number has a range
    (["rollout.temperature=1e-300"], "rollout.temperature"),
    (["rollout.temperature=0.001"], "rollout.temperature"),
    (["algo.actor_lr=1e30"], "algo.actor_lr"),
    (["rollout.groups=100000000000000000000"], "rollout.groups"),
    (["rollout.group_size=5000"], "rollout.group_size"),
    (["rollout.max_context=99999999"], "rollout.max_context"),
    (["eval.num_seeds=10000000"], "eval.num_seeds"),
    (["algo.ppo_epochs=1000"], "algo.ppo_epochs"),
    (["env.max_turns=100000"], "env.max_turns"),
    (["algo.clip_high=50"], "algo.clip_high"),
    (["env.format_penalty=1"], "env.format_penalty"),
    (["warmup.thought_tokens=100000"], "warmup.thought_tokens"),
    (["eval.k=100000"], "eval.k"),
    (["algo.kl_coef=1e9"], "algo.kl_coef"),
    (["train.iterations=1000000000"], "train.iterations"),
    # env keywords: types, bounds that keep the map check under a second, distinct arm names
    (["env.name=frozenlake", "env.kwargs={is_slippery: 'no'}"], "is_slippery"),
    (["env.name=frozenlake", "env.kwargs={is_slippery: 1}"], "is_slippery"),
    (["env.name=frozenlake", "env.kwargs={size: 5000}"], "size"),
    (["env.name=frozenlake", "env.kwargs={p_frozen: 0.1}"], "p_frozen"),
    (["env.name=frozenlake", "env.kwargs={p_frozen: '0.9'}"], "p_frozen"),
    (["env.kwargs={num_boxes: 4}"], "num_boxes"),
    (["env.kwargs={dim_room: 50}"], "dim_room"),
    (["env.kwargs={dim_room: [6, 50]}"], "dim_room"),
    (["env.kwargs={search_depth: 100000}"], "search_depth"),
    (["env.kwargs={spaced_grid: 'yes'}"], "spaced_grid"),
    ([*BANDIT, "env.kwargs={high_name: Dragon, low_name: Dragon}"], "Dragon"),
    ([*BANDIT, "env.kwargs={high_name: ' '}"], "high_name"),
    ([*BANDIT, "env.kwargs={low_name: 3}"], "low_name"),
    ([*BANDIT, "env.kwargs={high_prob: 2}"], "high_prob"),
    # a key given twice in one value
    (["env.kwargs={size: 4, size: 8}", "env.name=frozenlake"], "'size' is given twice"),
    # a run folder that cannot be made
    (["run_dir=/dev/null/run"], "/dev/null"),
    (["run_dir=RUN_DIR/a_file"], "a_file"),
]


@pytest.fixture
def no_model(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a model was loaded before the config was rejected")

    monkeypatch.setattr(launch, "load_models", refuse)
    monkeypatch.setattr(tiny, "build_tokenizer", refuse)


@pytest.mark.parametrize("overrides, named", CONFIG_ROWS, ids=[" ".join(row[0]) for row in CONFIG_ROWS])
def test_bad_override(no_model, tmp_path, capsys, overrides, named):
    (tmp_path / "a_file").write_text("not a folder")
    overrides = [o.replace("RUN_DIR", str(tmp_path)) for o in overrides]
    message = exit_message(["--config", TINY_YAML, f"run_dir={tmp_path / 'run'}", *overrides], capsys)
    assert named in message
    assert not (tmp_path / "run").exists()


def test_every_problem_of_a_config_is_said_in_one_pass(no_model, tmp_path, capsys):
    """Shrinking a preset for a CPU used to take one refused start per problem."""
    preset = tmp_path / "mine.yaml"
    preset.write_bytes(b"algo:\n  clip_hihg: 0.3\n  lam: abc\nrollout:\n  groups: 2\n")
    message = exit_message(["--config", str(preset), "algo.ppo_epochs=x"], capsys)
    assert message.count("\n  - ") == 4 and "4 problems" in message  # groups: 2 keeps 16 trajectories, not 32
    assert "algo.clip_high" in message and "'algo.lam' must be float" in message and "algo.ppo_epochs" in message
    assert "algo.mini_batch_size=32 exceeds the 16 trajectories kept" in message
    message = exit_message(["--config", TINY_YAML, "rollout.groups=2", "rollout.group_size=2", "algo.mini_batch_size=32",
                            "algo.micro_batch_size=64", "algo.lam=2", f"run_dir={tmp_path / 'run'}"], capsys)
    assert "3 problems" in message and "micro_batch_size <= algo.mini_batch_size" in message
    assert "algo.lam=2.0 is out of range" in message and "need algo.micro_batch_size" in message
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("argv, named", [
    (["--bench", "-3"], "--bench"),
    (["--bench", "2", "--bench-tokens", "0"], "--bench-tokens"),
    (["--resume", "RUN_DIR", "--eval", "RUN_DIR"], "--resume and --eval together"),
])
def test_bad_flags_are_named(no_model, tmp_path, capsys, argv, named):
    message = exit_message([a.replace("RUN_DIR", str(tmp_path)) for a in argv], capsys)
    assert named in message


@pytest.mark.parametrize("largest, beyond", [
    (["env.name=frozenlake", "env.kwargs={size: 100, p_frozen: 0.5}"], "env.kwargs={size: 101, p_frozen: 0.5}"),
    (["env.kwargs={dim_room: 12, num_boxes: 2, search_depth: 50}"], "env.kwargs={dim_room: 12, num_boxes: 2, search_depth: 51}"),
])
def test_the_largest_envs_allowed_pass_the_map_check_within_a_second(largest, beyond):
    """The bounds on env sizes are there so that the check before the model loads stays quick (FrozenLake of
    size 5000 spent minutes in it); the largest allowed maps pass it within a second, one step more is refused."""
    import time
    import config

    started = time.perf_counter()
    config.load_config(TINY_YAML, ["train.device=cpu", *largest])
    assert time.perf_counter() - started < 1.0
    with pytest.raises(config.ConfigError):
        config.load_config(TINY_YAML, ["train.device=cpu", *largest[:-1], beyond])


# ------------------------------------------------------------------------------------------------------
# Config files: (file content, what the message must name besides the file)
# ------------------------------------------------------------------------------------------------------
FILE_ROWS = [
    (b"- env\n- algo\n", "mapping"),
    (b"3\n", "mapping"),
    (b"env:\n  name: sokoban  # caf\xe9\n", "UTF-8"),
    (b"\x00\x01\x02\xff", "UTF-8"),
    (b"env: [\n", "YAML"),
    (b"algo: 3\n", "algo"),
    (b"algo:\n  clip_hihg: 0.3\n", "algo.clip_high"),
    (b"3: x\n", "'3'"),
    # a key or a section given twice: YAML alone keeps the last, and the first one's keys would be lost
    (b"algo:\n  actor_lr: 1.0e-4\nalgo:\n  clip_high: 0.3\n", "'algo' is given twice (lines 1 and 3)"),
    (b"algo:\n  clip_high: 0.3\n  clip_high: 0.2\n", "'clip_high' is given twice (lines 2 and 3)"),
    (b"env:\n  kwargs:\n    size: 4\n    size: 5\n", "'size' is given twice"),
]


@pytest.mark.parametrize("content, named", FILE_ROWS)
def test_bad_config_file(no_model, tmp_path, capsys, content, named):
    path = tmp_path / "user.yaml"
    path.write_bytes(content)
    message = exit_message(["--config", str(path)], capsys)
    assert "user.yaml" in message and named in message


@pytest.mark.parametrize("name", ["missing.yaml", "."])
def test_config_path_that_is_not_a_file(no_model, tmp_path, capsys, name):
    message = exit_message(["--config", str(tmp_path / name)], capsys)
    assert str(tmp_path / name) in message


@pytest.mark.slow
def test_messages_reach_the_shell_without_a_traceback(tmp_path):
    """The real command line: the exit code is 1 and stderr holds the message alone."""
    named = {"algo.clip_low=[0.1": "algo.clip_low", "eval.seed_offset=0": "eval.seed_offset"}  # override -> key

    def run(override):
        return subprocess.run([sys.executable, "ragen_mini.py", "--config", TINY_YAML, override], cwd=ROOT,
                              capture_output=True, text=True, timeout=120)
    for key, done in zip(named.values(), two_at_once(run, list(named))):
        assert done.returncode == 1 and "Traceback" not in done.stderr and key in done.stderr


# ------------------------------------------------------------------------------------------------------
# Damaged run folders, refused on --resume
# ------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """A 1-iteration tiny run with its checkpoint."""
    run_dir = tmp_path_factory.mktemp("finished") / "run"
    ragen_mini.main(["--config", TINY_YAML, *SMALL, f"run_dir={run_dir}"])
    return run_dir


def truncate(path, keep):
    data = path.read_bytes()
    path.write_bytes(data[:keep(len(data))])


def nan_weights(path):
    """Every float32 of the weight file's data part set to NaN; the header stays readable."""
    data = bytearray(path.read_bytes())
    header = 8 + int.from_bytes(data[:8], "little")
    data[header:] = b"\x00\x00\xc0\x7f" * ((len(data) - header) // 4)
    path.write_bytes(bytes(data))


DAMAGE_ROWS = [  # (id, damage done to the copied run folder, what the message must name)
    ("state.pt empty", lambda run: (run / "checkpoint/state.pt").write_bytes(b""), "state.pt"),
    ("state.pt truncated", lambda run: truncate(run / "checkpoint/state.pt", lambda n: n // 2), "state.pt"),
    ("state.pt not a checkpoint", lambda run: (run / "checkpoint/state.pt").write_text("hello"), "state.pt"),
    ("state.pt missing", lambda run: (run / "checkpoint/state.pt").unlink(), "checkpoint"),
    ("weights header damaged", lambda run: truncate(run / "checkpoint/actor/model.safetensors", lambda n: 5),
     "model.safetensors"),
    ("weights NaN", lambda run: nan_weights(run / "checkpoint/actor/model.safetensors"), "model.safetensors"),
    ("actor folder missing", lambda run: shutil.rmtree(run / "checkpoint/actor"), "actor"),
    ("config.yaml missing", lambda run: (run / "config.yaml").unlink(), "config.yaml"),
    ("config.yaml damaged", lambda run: (run / "config.yaml").write_text("env: [\n"), "config.yaml"),
    # the run's config is checked as strictly as a new one, and must be whole: an emptied one is not the defaults
    ("config.yaml empty", lambda run: (run / "config.yaml").write_text(""), "config.yaml lacks"),
    ("config.yaml cut", lambda run: truncate(run / "config.yaml", lambda n: n // 3), "config.yaml"),
    ("config.yaml section twice", lambda run: (run / "config.yaml").write_text(
        (run / "config.yaml").read_text() + "algo:\n  actor_lr: 1.0\n"), "'algo' is given twice"),
    ("config.yaml absurd value", lambda run: (run / "config.yaml").write_text(
        (run / "config.yaml").read_text().replace("temperature: 1.0", "temperature: 1.0e-300", 1)),
     "rollout.temperature"),
]


@pytest.mark.slow
@pytest.mark.parametrize("damage, named", [row[1:] for row in DAMAGE_ROWS], ids=[row[0] for row in DAMAGE_ROWS])
def test_damaged_run_folder_is_refused_on_resume(finished_run, tmp_path, capsys, damage, named):
    run_dir = tmp_path / "run"
    shutil.copytree(finished_run, run_dir)
    damage(run_dir)
    message = exit_message(["--resume", str(run_dir), "train.iterations=2"], capsys)
    assert named in message and str(run_dir) in message


@pytest.mark.slow
@pytest.mark.parametrize("flag, override, named", [
    ("--resume", "algo.estimator=grpo", "algo.estimator='grpo'"),
    ("--resume", "model.tokenizer_vocab=4096", "model.tokenizer_vocab=4096"),
    ("--eval", "model.name=random-qwen2.5-0.5b", "model.name='random-qwen2.5-0.5b'"),
])
def test_an_override_may_not_change_what_the_checkpoint_was_built_with(finished_run, capsys, no_model, flag, override,
                                                                        named):
    message = exit_message([flag, str(finished_run), override], capsys)
    assert named in message and "this run was trained with" in message


class Payload:
    """Pickled, it names a function for the loader to call: os.mkdir(marker), a stand-in for any code."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.mkdir, (self.marker,))


@pytest.mark.slow
@pytest.mark.parametrize("use", ["--resume", "--eval", "latest_checkpoint", "describe_os_error"])
def test_a_crafted_state_pt_runs_no_code(finished_run, tmp_path, capsys, use):
    """A state.pt whose pickle would call a function is refused as damaged, and the function never runs, under
    --resume, --eval, the end-of-run summary's look for the latest checkpoint and the OSError message."""
    run_dir, marker = tmp_path / "run", tmp_path / "payload-ran"
    shutil.copytree(finished_run, run_dir)
    state = torch.load(run_dir / "checkpoint" / "state.pt", weights_only=True)
    torch.save({**state, "iteration": Payload(str(marker))}, run_dir / "checkpoint" / "state.pt")
    if use.startswith("--"):
        message = exit_message([use, str(run_dir), *(["train.iterations=2"] if use == "--resume" else [])], capsys)
        assert "state.pt" in message and "damaged" in message
    elif use == "latest_checkpoint":
        assert bookkeeping.latest_checkpoint(str(run_dir)) is None
    else:
        error = OSError(errno.ENOSPC, "No space left on device", str(run_dir / "metrics.jsonl"))
        assert "--resume" not in bookkeeping.describe_os_error(error)
    assert not marker.exists()
    torch.load(run_dir / "checkpoint" / "state.pt", weights_only=False)  # the same file, loaded as a pickle...
    assert marker.exists()  # ...runs the payload: the test's file would have run code


@pytest.mark.parametrize("flag", ["--resume", "--eval"])
def test_resume_or_eval_of_a_folder_that_does_not_exist(tmp_path, capsys, flag):
    message = exit_message([flag, str(tmp_path / "nope")], capsys)
    assert f"{flag} {tmp_path / 'nope'}: no such folder" in message


METRICS_DAMAGE = {  # how the damage is done to metrics.jsonl's bytes: (iteration 0's row, iteration 1's row)
    "partial last line": lambda rows: rows + [b'{"iteration": 2, "rollout/succ'],
    "a number between the rows": lambda rows: rows[:1] + [b"3"] + rows[1:],
    "not UTF-8": lambda rows: rows[:1] + [b'{"iteration": 5, "note": "caf\xe9"}'] + rows[1:],
    "no iteration": lambda rows: rows[:1] + [b'{"rollout/success": 0.5}'] + rows[1:],
    "iteration as text": lambda rows: rows[:1] + [b'{"iteration": "1"}'] + rows[1:],
}


@pytest.mark.slow
@pytest.mark.parametrize("damage", [*METRICS_DAMAGE, "missing"])
def test_resume_mends_metrics_jsonl(finished_run, tmp_path, capsys, damage):
    """A crash while writing leaves a partial last line; an edit can leave any line damaged; a deleted file is
    started again. Either way the run resumes, says which line it left out (kept aside in
    metrics.jsonl.damaged) and metrics.jsonl is whole afterwards."""
    run_dir = tmp_path / "run"
    shutil.copytree(finished_run, run_dir)
    metrics = run_dir / "metrics.jsonl"
    if damage == "missing":
        metrics.unlink()
    else:
        lines = METRICS_DAMAGE[damage](metrics.read_bytes().splitlines())
        metrics.write_bytes(b"\n".join(lines) + b"\n")
        bad = next(number for number, line in enumerate(lines, start=1) if line not in metrics_rows(finished_run))
    ragen_mini.main(["--resume", str(run_dir), "train.iterations=2"])
    out = capsys.readouterr().out
    assert "metrics.jsonl" in out
    iterations = [json.loads(line)["iteration"] for line in metrics.read_text().splitlines()]
    assert iterations == ([0, 1, 2] if damage != "missing" else [2])
    if damage != "missing":
        assert f"line {bad}:" in out and (run_dir / "metrics.jsonl.damaged").read_bytes() == lines[bad - 1] + b"\n"


def metrics_rows(run_dir):
    return (run_dir / "metrics.jsonl").read_bytes().splitlines()


# ------------------------------------------------------------------------------------------------------
# Model files, checked before transformers reads them; a local folder that is missing never goes to the hub
# ------------------------------------------------------------------------------------------------------
def model_folder(root, config_json, weights=True):
    folder = root / "model"
    folder.mkdir()
    (folder / "config.json").write_text(config_json)
    if weights:
        (folder / "model.safetensors").write_bytes(b"")
    return str(folder)


MODEL_ROWS = [  # (id, makes model.name under a folder, what the message must name)
    ("gguf empty", lambda root: str((root / "m.gguf").touch() or root / "m.gguf"), "it is empty"),
    ("gguf is text", lambda root: str((root / "m.gguf").write_text("hello") and root / "m.gguf"), "not b'GGUF'"),
    ("config.json a list", lambda root: model_folder(root, "[1, 2]"), "holds a list"),
    ("config.json not JSON", lambda root: model_folder(root, "{model"), "cannot be read as JSON"),
    ("no weights", lambda root: model_folder(root, '{"model_type": "llama"}', weights=False), "no weights"),
    ("missing folder under an existing one", lambda root: str((root / "models").mkdir() or "models/mine"),
     "no such folder"),
    ("missing path of three parts", lambda root: "models/org/mine", "no such folder"),
]


@pytest.mark.parametrize("make, named", [row[1:] for row in MODEL_ROWS], ids=[row[0] for row in MODEL_ROWS])
def test_bad_model_files_are_refused_before_transformers_reads_them(tmp_path, capsys, monkeypatch, make, named):
    import huggingface_hub.constants
    import models

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(models, "hub_reachable", lambda *args: pytest.fail("a local path was sent to the hub"))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    name = make(tmp_path)
    message = exit_message(["--config", TINY_YAML, "train.device=cpu", f"model.name={name}", f"run_dir={tmp_path / 'run'}"],
                           capsys)
    assert f"model.name={name}" in message and named in message
    assert not (tmp_path / "run").exists()


# ------------------------------------------------------------------------------------------------------
# A full disk, an unwritable folder
# ------------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_full_disk_while_saving_keeps_the_last_checkpoint_and_says_where(tmp_path, capsys, monkeypatch):
    """torch.save on a full disk raises PyTorch's RuntimeError from its zip writer, not an OSError."""
    real_save, saves = torch.save, []

    def save_until_the_disk_fills(obj, path, *args, **kwargs):
        saves.append(path)
        if len(saves) >= 2:
            raise RuntimeError("[enforce fail at inline_container.cc:672] . PytorchStreamWriter failed writing "
                               "file data/3: file write failed")
        return real_save(obj, path, *args, **kwargs)

    monkeypatch.setattr(torch, "save", save_until_the_disk_fills)
    run_dir = tmp_path / "run"
    message = exit_message(["--config", TINY_YAML, *SMALL, "train.iterations=3", f"run_dir={run_dir}"], capsys)
    assert "disk" in message and "free" in message
    assert str(run_dir / "checkpoint") in message and "iteration 1" in message and "--resume" in message
    monkeypatch.setattr(torch, "save", real_save)
    assert torch.load(run_dir / "checkpoint" / "state.pt", weights_only=True)["iteration"] == 1
    assert not (run_dir / "checkpoint.tmp").exists()


@pytest.mark.slow
def test_full_disk_while_writing_metrics_says_so(tmp_path, capsys, monkeypatch):
    def no_space(run_dir):
        raise OSError(errno.ENOSPC, "No space left on device", str(Path(run_dir) / "plots.png"))

    monkeypatch.setattr(plots, "plot_run", no_space)
    run_dir = tmp_path / "run"
    message = exit_message(["--config", TINY_YAML, *SMALL, f"run_dir={run_dir}"], capsys)
    assert "plots.png" in message and "disk is full" in message


class FullAtClose:
    """A file on a full disk: the text goes to the buffer, and the close fails with an OSError that names no file."""

    def __init__(self, f):
        self.f = f

    def write(self, text):
        return self.f.write(text)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.f.close()
        raise OSError(errno.ENOSPC, "No space left on device")


def full_disk_for(monkeypatch, name):
    real_open = open
    for module in (bookkeeping, evaluation):  # the run folder's files; the evaluation's samples
        monkeypatch.setattr(module, "open", lambda path, *args, **kwargs: FullAtClose(real_open(path, *args, **kwargs))
                            if os.path.basename(path) == name else real_open(path, *args, **kwargs), raising=False)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["config.yaml", "samples.jsonl", "samples.md", "metrics.jsonl"])
def test_a_full_disk_at_the_start_names_the_file_and_leaves_nothing_behind(tmp_path, capsys, monkeypatch, name):
    full_disk_for(monkeypatch, name)
    run_dir = tmp_path / "run"
    message = exit_message(["--config", TINY_YAML, *SMALL, f"run_dir={run_dir}"], capsys)
    assert str(run_dir / name) in message and "disk is full" in message
    assert not run_dir.exists()


@pytest.mark.slow
@pytest.mark.parametrize("name", ["eval_samples.jsonl", "eval_samples.md"])
def test_a_full_disk_under_eval_names_the_file_and_leaves_no_empty_one(finished_run, tmp_path, capsys, monkeypatch,
                                                                       name):
    run_dir = tmp_path / "run"
    shutil.copytree(finished_run, run_dir)
    full_disk_for(monkeypatch, name)
    message = exit_message(["--eval", str(run_dir)], capsys)
    assert str(run_dir / name) in message and "disk is full" in message
    assert not (run_dir / name).exists()


@pytest.mark.slow
@pytest.mark.parametrize("overrides, named", [
    (["rollout.max_context=100", "rollout.max_new_tokens=8"], "max_context"),  # the first prompt does not fit
    ([*BANDIT, "rollout.max_context=60", "rollout.max_new_tokens=8"], "max_context"),
])
def test_a_start_that_fails_leaves_no_run_folder(tmp_path, capsys, monkeypatch, overrides, named):
    monkeypatch.chdir(tmp_path)  # with no run_dir, the run would go to runs/<env>-<time>
    message = exit_message(["--config", TINY_YAML, *SMALL, *overrides, "run_dir="], capsys)
    assert named in message
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


@pytest.mark.slow
def test_unwritable_run_folder_says_so(tmp_path, capsys, monkeypatch):
    """A folder the user may not write (checked with a stand-in: the tests may run as root, who may)."""
    def denied(path, *args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied", str(path))

    monkeypatch.setattr(os, "makedirs", denied)
    message = exit_message(["--config", TINY_YAML, *SMALL, f"run_dir={tmp_path / 'run'}"], capsys)
    assert str(tmp_path / "run") in message and "Permission denied" in message and "run_dir" in message


@pytest.mark.parametrize("preset", sorted(p.name for p in (ROOT / "configs").glob("*.yaml")))
def test_every_preset_passes_the_config_checks(preset):
    """A preset with a misspelt key or an impossible setting would stop its own command: none does."""
    cfg = config.namespace(config.load_config(str(ROOT / "configs" / preset), []))
    assert cfg.rollout.groups * cfg.rollout.group_size >= cfg.algo.mini_batch_size


@pytest.mark.slow
@pytest.mark.parametrize("name", ["config.yaml", "metrics.jsonl", "samples.jsonl", "samples.md", "checkpoint",
                                  "checkpoint.tmp"])
def test_a_run_never_writes_through_a_link(tmp_path, capsys, name):
    """A new run in a folder where a file it writes is a symbolic link stops with a message naming the link,
    and the file the link points to is left as it was."""
    run_dir, target = tmp_path / "run", tmp_path / "elsewhere"
    run_dir.mkdir()
    target.write_text("someone else's file")
    (run_dir / name).symlink_to(target)
    message = exit_message(["--config", TINY_YAML, *SMALL, f"run_dir={run_dir}"], capsys)
    assert f"{run_dir / name} is a symbolic link" in message
    assert target.read_text() == "someone else's file"


@pytest.mark.slow
@pytest.mark.parametrize("name", ["eval.jsonl", "eval_samples.jsonl", "eval_samples.md"])
def test_eval_never_writes_through_a_link(finished_run, tmp_path, capsys, name):
    run_dir, target = tmp_path / "run", tmp_path / "elsewhere"
    shutil.copytree(finished_run, run_dir)
    target.write_text("someone else's file")
    (run_dir / name).symlink_to(target)
    message = exit_message(["--eval", str(run_dir)], capsys)
    assert f"{run_dir / name} is a symbolic link" in message and target.read_text() == "someone else's file"


@pytest.mark.slow
def test_a_new_run_never_starts_over_in_another_runs_folder(finished_run, tmp_path, capsys):
    """run_dir naming an existing run is refused, naming --resume and overwrite=true, and the run is left as it
    was; with overwrite=true the new run starts over and nothing of the old one is left."""
    run_dir = tmp_path / "run"
    shutil.copytree(finished_run, run_dir)
    (run_dir / "samples.md").write_text("# the old run's samples\n")
    before = (run_dir / "metrics.jsonl").read_text()
    message = exit_message(["--config", TINY_YAML, *SMALL, f"run_dir={run_dir}"], capsys)
    assert f"--resume {run_dir}" in message and "overwrite=true" in message
    assert (run_dir / "metrics.jsonl").read_text() == before and not (run_dir / "lock").exists()
    ragen_mini.main(["--config", TINY_YAML, *SMALL, f"run_dir={run_dir}", "overwrite=true", "eval.every=0"])
    assert not (run_dir / "samples.md").exists() and not (run_dir / "checkpoint.old").exists()  # nothing of the old run
    assert [json.loads(line)["iteration"] for line in (run_dir / "metrics.jsonl").read_text().splitlines()] == [1]


@pytest.mark.slow
def test_a_second_process_on_one_run_folder_is_refused_and_a_stale_lock_is_taken_over(tmp_path, capsys):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "lock").write_text(str(os.getppid()))  # a live process that is not this one
    message = exit_message(["--config", TINY_YAML, *SMALL, f"run_dir={run_dir}"], capsys)
    assert f"process {os.getppid()}" in message and "in use" in message
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()  # its process id now names no process
    (run_dir / "lock").write_text(str(ended.pid))
    ragen_mini.main(["--config", TINY_YAML, *SMALL, f"run_dir={run_dir}"])
    assert (run_dir / "metrics.jsonl").exists() and not (run_dir / "lock").exists()  # released at the end


@pytest.mark.slow
@pytest.mark.parametrize("killed", ["after the first rename", "before the first rename's copy was whole"])
def test_resume_recovers_from_a_save_killed_between_its_renames(finished_run, tmp_path, capsys, killed):
    """save_checkpoint writes checkpoint.tmp, renames checkpoint to .old, then .tmp to checkpoint. Killed after
    the first rename there is no checkpoint/, but a whole .tmp (the newer) and .old; --resume takes .tmp, or
    .old when .tmp is not whole, and goes on."""
    run_dir = tmp_path / "run"
    shutil.copytree(finished_run, run_dir)
    (run_dir / "checkpoint").rename(run_dir / "checkpoint.old")
    shutil.copytree(run_dir / "checkpoint.old", run_dir / "checkpoint.tmp")
    if killed != "after the first rename":
        (run_dir / "checkpoint.tmp" / "state.pt").unlink()  # state.pt is written last: this copy is not whole
    ragen_mini.main(["--resume", str(run_dir), "train.iterations=2"])
    taken = "checkpoint.tmp" if killed == "after the first rename" else "checkpoint.old"
    assert f"its complete copy {taken} is the checkpoint now" in capsys.readouterr().out
    assert torch.load(run_dir / "checkpoint" / "state.pt", weights_only=True)["iteration"] == 2


@pytest.mark.slow
@pytest.mark.usefixtures("signals_as_in_a_terminal")
def test_a_second_ctrl_c_during_the_save_waits_for_it(tmp_path, monkeypatch):
    """Ctrl-C in iteration 2, then Ctrl-C again while its checkpoint is being written: the save completes,
    then the second Ctrl-C quits (KeyboardInterrupt), and the checkpoint of iteration 2 is whole."""
    import bookkeeping
    import signal
    import time
    real_rollout, real_save, calls = ragen_mini.play_episodes, torch.save, []

    def rollout(policy, chat, cfg, seeds, group_ids):
        calls.append(len(seeds))
        if calls.count(8) == 2 and len(seeds) == 8:  # the second training rollout: the first Ctrl-C
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)
        return real_rollout(policy, chat, cfg, seeds, group_ids)

    def save_pressing_ctrl_c(obj, path, *args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)  # the second Ctrl-C, in the middle of the save
        time.sleep(0.05)
        return real_save(obj, path, *args, **kwargs)

    monkeypatch.setattr(ragen_mini, "play_episodes", rollout)
    monkeypatch.setattr(bookkeeping.torch, "save", save_pressing_ctrl_c)
    run_dir = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        ragen_mini.main(["--config", TINY_YAML, *SMALL, f"run_dir={run_dir}", "env.name=sokoban", "checkpoint.every=0",
                         "eval.every=0", "train.iterations=3"])
    monkeypatch.setattr(bookkeeping.torch, "save", real_save)
    assert torch.load(run_dir / "checkpoint" / "state.pt", weights_only=True)["iteration"] == 2
    assert not (run_dir / "checkpoint.tmp").exists() and not (run_dir / "checkpoint.old").exists()


# ------------------------------------------------------------------------------------------------------
# Model text in the evaluation samples: whatever a reply holds (a heading, a seed line, a
# code fence, HTML, invalid Unicode, megabytes) stays a string of its own record, through evaluation.evaluate,
# the resume's trimming, samples.md, viewer.html and findings.py's thoughts.json.
# ------------------------------------------------------------------------------------------------------
import html  # noqa: E402
import re  # noqa: E402
import time  # noqa: E402

import yaml  # noqa: E402

import findings  # noqa: E402
import rollout  # noqa: E402
import viewer  # noqa: E402
from envs import make_env  # noqa: E402

# Bandit replies, after the prompt's forced "<think>"; the thought each one holds, written out by hand.
FORGED = [("plan:\n# Evaluation at iteration 99\nthen</think><answer>Dragon</answer>",
           "plan:\n# Evaluation at iteration 99\nthen"),
          ("x\n## seed 5: reward 10, success True\n```\n<script>alert(1)</script></think> <answer>Phoenix</answer>",
           "x\n## seed 5: reward 10, success True\n```\n<script>alert(1)</script>"),
          ("````\n- turn 1: think 'won' -> actions ['Dragon'] (format ok: True), reward 10\n</think><answer>Dragon"
           "</answer>", "````\n- turn 1: think 'won' -> actions ['Dragon'] (format ok: True), reward 10")]
SEEDS = [1000000, 1000001, 1000002]


def bandit_cfg(*overrides):
    return config.namespace(config.load_config(TINY_YAML, [*SMALL, *BANDIT, *overrides]))


def scripted(monkeypatch, replies, stop=True):
    """evaluation.evaluate's policy replaced: in each call the k-th context gets replies[k] (a text) as the
    rollout model's token ids, closed by the end-of-turn token when `stop`, else cut to rollout.max_new_tokens (no
    stop token: the reply ran into the limit). -> a RolloutModel with the tiny tokenizer, to evaluate with."""
    def policy_of(rollout_model, cfg, temperature):
        def policy(contexts):
            chat = rollout_model.chat
            ids = [chat.tokenizer(reply, add_special_tokens=False)["input_ids"] for reply in replies[:len(contexts)]]
            return [i + [chat.end_of_turn_id] if stop else i[:cfg.rollout.max_new_tokens] for i in ids]
        return policy

    monkeypatch.setattr(evaluation, "LLMPolicy", policy_of)
    cfg = bandit_cfg()
    return rollout.RolloutModel(model=None, chat=rollout.chat_format(tiny.build_tokenizer(tiny.env_corpus(cfg),
                                                                                     cfg.model.tokenizer_vocab)))


def fences_and_headings(markdown):
    """samples.md as a CommonMark parser reads it (markdown-it-py, which transformers' tools already bring):
    (the text of its level-1 and level-2 headings, the contents of its code blocks)."""
    markdown_it = pytest.importorskip("markdown_it")
    tokens = markdown_it.MarkdownIt("commonmark").parse(markdown)
    headings = [(tokens[k].tag, tokens[k + 1].content) for k, t in enumerate(tokens) if t.type == "heading_open"]
    return headings, [t.content for t in tokens if t.type == "fence"]


def test_forged_replies_change_no_other_episode_through_evaluate_and_the_resume(tmp_path, monkeypatch):
    """Four evaluations of three seeds whose replies forge samples.md's structure; the resume from a checkpoint
    at iteration 1 drops evaluations 2 and 3 by their records' iteration. What is left: every episode of 0 and
    1 whole, samples.md as it was before 2 and 3 were written, a page of exactly those 6 episodes, and
    thoughts.json with each seed's own thought under its own evaluation."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "config.yaml").write_text(yaml_of(bandit_cfg()))
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps({"iteration": i}) + "\n" for i in range(4)))
    rollout_model = scripted(monkeypatch, [reply for reply, _ in FORGED])
    cfg = bandit_cfg(f"eval.num_seeds={len(SEEDS)}", f"eval.samples={len(SEEDS)}")
    for iteration in range(4):
        evaluation.evaluate(rollout_model, cfg, f"Evaluation at iteration {iteration}", str(run_dir / "samples.md"))
        if iteration == 1:
            before = (run_dir / "samples.md").read_text(encoding="utf-8")
    launch.forget_after(str(run_dir), 1)

    records, skipped = viewer.read_samples(str(run_dir / "samples.jsonl"))
    assert skipped == []
    assert [(r["iteration"], r["seed"], r["turns"][0]["reply"], r["turns"][0]["think"]) for r in records] == [
        (iteration, seed, reply, think) for iteration in (0, 1) for seed, (reply, think) in zip(SEEDS, FORGED)]
    markdown = (run_dir / "samples.md").read_text(encoding="utf-8")
    assert markdown == before
    headings, fences = fences_and_headings(markdown)
    assert [text for tag, text in headings if tag == "h1"] == ["Evaluation at iteration 0", "Evaluation at iteration 1"]
    assert [text.split(":")[0] for tag, text in headings if tag == "h2"] == [f"seed {seed}" for seed in SEEDS] * 2
    for reply, _ in FORGED:
        assert fences.count(reply + "\n") == 2  # each reply whole, inside its own code block, once per evaluation

    viewer.write_viewer(str(run_dir))
    page = (run_dir / "viewer.html").read_text(encoding="utf-8")
    assert re.findall(r'<section class="episode" data-eval="(\d)" data-seed="(\d+)">', page) == [
        (str(e), str(seed)) for e in (0, 1) for seed in SEEDS]
    assert page.count("<script") == 1  # the page's own
    assert page.count(html.escape(FORGED[1][0])) == 2

    findings.keep([str(run_dir)], into=str(tmp_path / "kept"))
    assert json.loads((tmp_path / "kept" / "run" / "thoughts.json").read_text()) == {
        f"Evaluation at iteration {i}": {str(seed): [think] for seed, (_, think) in zip(SEEDS, FORGED)} for i in (0, 1)}


def yaml_of(cfg):
    """A namespace config as the YAML a run writes (only its env section matters to the viewer here)."""
    return yaml.safe_dump({"env": {key: value for key, value in vars(cfg.env).items()
                                   if not hasattr(value, "__dict__")}})


def test_a_collapsed_reply_records_its_text_and_why_it_did_not_parse(tmp_path, monkeypatch):
    """A reply that repeats one sentence until rollout.max_new_tokens, with no stop token and no answer tag,
    as a collapsed GRPO run writes every evaluation turn; beside it a reply with an unknown action and one
    that stopped after </think>. The records hold the reply and the reason; the page shows both."""
    sentence = "I should pick the arm that pays. "
    replies = [sentence * 20, "go</think><answer>Griffin</answer>", "go</think> Dragon"]
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "config.yaml").write_text(yaml_of(bandit_cfg()))
    cut = scripted(monkeypatch, replies[:1], stop=False)
    cfg = bandit_cfg("rollout.max_new_tokens=64", "eval.num_seeds=1", "eval.samples=1")
    evaluation.evaluate(cut, cfg, "Evaluation at iteration 0", str(run_dir / "samples.md"))
    stopped = scripted(monkeypatch, replies[1:])
    cfg = bandit_cfg("rollout.max_new_tokens=64", "eval.num_seeds=2", "eval.samples=2")
    evaluation.evaluate(stopped, cfg, "Evaluation at iteration 1", str(run_dir / "samples.md"))
    records, _ = viewer.read_samples(str(run_dir / "samples.jsonl"))
    tokenizer = cut.chat.tokenizer
    collapsed = tokenizer.decode(tokenizer(replies[0], add_special_tokens=False)["input_ids"][:64])
    assert collapsed.startswith(sentence * 2) and len(collapsed) < len(replies[0])  # cut by the limit
    turns = [record["turns"][0] for record in records]
    assert [t["reply"] for t in turns] == [collapsed, *replies[1:]]
    assert [(t["think"], t["answer"], t["actions"], t["format_ok"]) for t in turns] == [
        ("", "", [], False), ("go", "Griffin", [], False), ("", "", [], False)]
    arms = [make_bandit(seed) for seed in (1000000, 1000000, 1000001)]
    assert [t["format_problem"] for t in turns] == [
        "no </think> closes the thought; cut at the token limit: 64 tokens, no stop token",
        f"unknown action (the actions are {', '.join(arms[1].actions)})",
        "no <answer> right after </think>"]
    assert [t["state"] for t in turns] == [env.render() for env in arms]  # the state the model saw
    page = (run_dir / "viewer.html").read_text(encoding="utf-8")
    assert html.escape(collapsed) in page and html.escape(turns[0]["format_problem"]) in page


def make_bandit(seed):
    env = make_env("bandit")
    env.reset(seed)
    return env


def test_megabytes_and_invalid_unicode_pass_the_writing_and_the_trimming(tmp_path):
    """Records written directly (evaluation.write_samples): a 2 MB reply of backticks, headings and HTML and a
    lone surrogate in iteration 2, trimmed away by a resume from iteration 1; the records of 0 and 1 come back
    as they were written, in a few seconds."""
    turn = dict(turn=1, state="#P#", actions_left=10, reply="ok</think><answer>Up</answer>", think="ok",
                answer="Up", actions=["Up"], format_ok=True, format_problem="", reward=-0.1)
    huge = ("```` \n# Evaluation at iteration 0\n## seed 1: reward 9, success True\n<script>x</script>\udc80"
            * 25_000)
    assert len(huge) > 2_000_000

    def record(iteration, episode, reply):
        return dict(title=f"Evaluation at iteration {iteration}", iteration=iteration, episode=episode,
                    seed=1000000 + episode, reward=-0.1, success=False, turns=[{**turn, "reply": reply}])

    written = [record(i, k, reply) for i in range(4) for k, reply in enumerate(["a\udc80b", huge, "plain"])]
    started = time.perf_counter()
    for i in range(4):
        evaluation.write_samples(str(tmp_path / "samples.md"), written[3 * i:3 * i + 3])
    launch.forget_after(str(tmp_path), 1)
    assert time.perf_counter() - started < 5.0
    assert viewer.read_samples(str(tmp_path / "samples.jsonl")) == (written[:6], [])
    markdown = (tmp_path / "samples.md").read_text(encoding="utf-8")
    assert "\udc80" not in markdown and "a\\udc80b" in markdown  # written as the text \udc80
    headings, _ = fences_and_headings(markdown)
    assert [text for tag, text in headings if tag == "h1"] == ["Evaluation at iteration 0", "Evaluation at iteration 1"]
    assert len(headings) == 2 + 6


@pytest.mark.slow
def test_a_forged_heading_survives_a_real_resume(tmp_path, monkeypatch):
    """A forged heading through the entry point: a one-iteration run whose evaluations reply with FORGED, then
    --resume RUN train.iterations=3 with eval.every=2. The resume forgets the evaluation the first call made
    at its end (iteration 1, off the grid) and makes those of iterations 2 and 3: every evaluation left keeps
    all its episodes, each reply whole."""
    scripted(monkeypatch, [reply for reply, _ in FORGED])
    run_dir = tmp_path / "run"
    ragen_mini.main(["--config", TINY_YAML, *SMALL, *BANDIT, "eval.num_seeds=3", "eval.samples=3", "eval.every=2",
                     f"run_dir={run_dir}"])  # train.iterations=1 (SMALL)
    assert [r["iteration"] for r in viewer.read_samples(str(run_dir / "samples.jsonl"))[0]] == [0] * 3 + [1] * 3
    ragen_mini.main(["--resume", str(run_dir), "train.iterations=3"])
    records, skipped = viewer.read_samples(str(run_dir / "samples.jsonl"))
    assert skipped == [] and [(r["iteration"], r["seed"], r["turns"][0]["reply"]) for r in records] == [
        (iteration, seed, reply) for iteration in (0, 2, 3) for seed, (reply, _) in zip(SEEDS, FORGED)]
    headings, _ = fences_and_headings((run_dir / "samples.md").read_text(encoding="utf-8"))
    assert [text for tag, text in headings if tag == "h1"] == [f"Evaluation at iteration {i}" for i in (0, 2, 3)]
    assert len(headings) == 3 + 9


def test_an_older_runs_markdown_is_kept_aside_not_rewritten(tmp_path, capsys):
    """A folder of an older ragen-mini has samples.md and no samples.jsonl: the resume's trimming cannot read
    it (nothing reads markdown), so it keeps it whole as samples.old.md, says so, and writes no records."""
    old = "\n# Evaluation at iteration 0\n\n## seed 7: reward 1, success True\n- turn 1: think 'a' -> ...\n"
    (tmp_path / "samples.md").write_text(old)
    launch.forget_after(str(tmp_path), 1)
    assert (tmp_path / "samples.old.md").read_text() == old
    assert not (tmp_path / "samples.md").exists() and not (tmp_path / "samples.jsonl").exists()
    assert "kept as" in capsys.readouterr().out
