"""More bad input, through the real entry points (`ragen_mini.main`, `plots.main`)
where it matters: every case ends in a one-paragraph message that names the key or file and what to do, never a
traceback, and leaves the files it was given as they were (compared byte for byte) and no folder behind.

The run folders here are made by hand (a config.yaml as a run writes it, a checkpoint/state.pt, a weight file,
the tiny actor where one is loaded), not trained, so that every test takes a fraction of a second.
"""
import os
import shutil
import signal
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml
from safetensors.torch import save_file

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import bookkeeping  # noqa: E402
import config  # noqa: E402
import launch  # noqa: E402
import models  # noqa: E402
import plots  # noqa: E402
import ragen_mini  # noqa: E402
import rollout  # noqa: E402
import tiny  # noqa: E402
from helpers import BANDIT, TINY_YAML  # noqa: E402

SMALL = ["train.device=cpu", "rollout.groups=2", "rollout.group_size=4", "rollout.max_new_tokens=8",
         "rollout.max_context=1024", "env.max_turns=2", "algo.mini_batch_size=4", "algo.micro_batch_size=2",
         "eval.num_seeds=4", "eval.every=1", "eval.samples=1", "warmup.steps=0", "train.iterations=1",
         "checkpoint.every=1"]


def exit_message(argv, capsys, main=ragen_mini.main):
    """Run main(argv), which must stop with a message: SystemExit with a text, or a non-zero code with the
    message on stderr or stdout. Any other exception is a traceback, and fails the test."""
    with pytest.raises(SystemExit) as stop:
        main(argv)
    code = stop.value.code
    out = capsys.readouterr()
    message = code if isinstance(code, str) else out.err + out.out
    assert code not in (0, None) and message.strip(), argv
    assert "Traceback" not in message
    return message


def snapshot(folder):
    """Every file under FOLDER -> its bytes: compared before and after, nothing may have changed or appeared."""
    folder = Path(folder)
    return {str(path.relative_to(folder)): path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}


@pytest.fixture
def no_model(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a model was loaded before the input was refused")

    monkeypatch.setattr(launch, "load_models", refuse)
    monkeypatch.setattr(tiny, "build_tokenizer", refuse)


def fake_run(root, state=None, actor=False):
    """A run folder as a 1-iteration tiny run leaves it, made by hand in milliseconds: config.yaml as a run
    writes it, metrics.jsonl, checkpoint/state.pt (STATE laid over a whole one) and checkpoint/actor with a
    weight file that opens (ACTOR: the real tiny actor and tokenizer, loadable, for the tests that load it)."""
    run = Path(root) / "run"
    (run / "checkpoint" / "actor").mkdir(parents=True)
    cfg = config.load_config(TINY_YAML, [*SMALL, f"run_dir={run}"])
    (run / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    (run / "metrics.jsonl").write_text('{"iteration": 0, "eval/success": 0.0}\n{"iteration": 1}\n')
    (run / "samples.md").write_text("\n# Evaluation at iteration 0\n")
    if actor:
        tokenizer, model = models.load_models(config.namespace(cfg), torch.device("cpu"))
        model.save_pretrained(run / "checkpoint" / "actor")
        tokenizer.save_pretrained(run / "checkpoint" / "actor")
    else:
        save_file({"w": torch.zeros(2)}, str(run / "checkpoint" / "actor" / "model.safetensors"))
    whole = {"iteration": 1, "critic": None, "optimizers": {}, "rng": {}}
    torch.save({**whole, **(state or {})}, run / "checkpoint" / "state.pt")
    return run


# ------------------------------------------------------------------------------------------------------
# 1. A config's problems of every kind in one message: unknown keys, types, ranges, rules between keys
# ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("overrides, named", [
    (["algo.mini_batch_size=0", "rollout.temperature=-1", "rollout.group_size=abc"],
     ["'rollout.group_size' must be int", "rollout.temperature=-1.0 is out of range",
      "algo.mini_batch_size=0 is out of range"]),
    (["algo.mini_batch_size=0", "rollout.groupz=3"],
     ["unknown config key 'rollout.groupz'; did you mean 'rollout.groups'?", "algo.mini_batch_size=0 is out of range"]),
    (["rollout.groupz=3", "algo.micro_batch_size=64"],
     ["rollout.groupz", "need algo.micro_batch_size <= algo.mini_batch_size"]),
    (["algo.clip_low=[0.1", "env.kwargs={dim_room: 3}"], ["algo.clip_low", "dim_room"]),
    (["algo=3", "rollout.groups=0", "seed=-1"], ["'algo' is a section", "rollout.groups=0", "seed=-1"]),
    (["env.kwargs=&a {size: 4}", "algo.lam=2"], ["anchor or alias", "algo.lam=2.0 is out of range"]),
])
def test_every_kind_of_problem_is_said_in_one_message(no_model, tmp_path, capsys, overrides, named):
    message = exit_message(["--config", TINY_YAML, f"run_dir={tmp_path / 'run'}", *overrides], capsys)
    assert message.startswith("config error: ") and " problems:\n  - " in message
    for words in named:
        assert words in message
    assert not (tmp_path / "run").exists()


def test_a_config_file_and_the_command_line_are_checked_together(no_model, tmp_path, capsys):
    preset = tmp_path / "mine.yaml"
    preset.write_bytes(b"algo:\n  clip_hihg: 0.3\nrollout:\n  temperature: 0.0\n")
    message = exit_message(["--config", str(preset), "eval.k=0"], capsys)
    assert "3 problems" in message and "algo.clip_high" in message
    assert "rollout.temperature=0.0 is out of range" in message and "eval.k=0 is out of range" in message


@pytest.mark.parametrize("overrides, mistyped, not_said", [
    # the default mini_batch_size (16 in the tiny preset) would be below micro 64: that rule is not checked
    (["algo.mini_batch_size=abc", "algo.micro_batch_size=64"], "algo.mini_batch_size",
     "need algo.micro_batch_size"),
    # 1000 trajectories per mini-batch exceed the default groups' 16: but groups is unknown, so is the count
    (["rollout.groups=many", "algo.mini_batch_size=1000", "algo.micro_batch_size=8"], "rollout.groups", "exceeds"),
    (["rollout.group_size=x", "algo.estimator=grpo", "algo.mini_batch_size=1000"], "rollout.group_size", "exceeds"),
    (["rollout.max_new_tokens=lots", "rollout.min_new_tokens=100"], "rollout.max_new_tokens",
     "min_new_tokens <= rollout.max_new_tokens"),
    (["eval.seed_offset=[1]", "eval.num_seeds=1000000"], "eval.seed_offset", "2**32"),
])
def test_a_mistyped_key_skips_only_the_checks_that_read_it(no_model, tmp_path, capsys, overrides, mistyped,
                                                          not_said):
    """A value of the wrong type leaves the key at its default: a rule between it and another key would judge
    the default, not the user's value, and is skipped; a range problem of another key is still said."""
    message = exit_message(["--config", TINY_YAML, f"run_dir={tmp_path / 'run'}", *overrides,
                            "algo.ppo_epochs=0"], capsys)
    assert f"'{mistyped}' must be" in message and "algo.ppo_epochs=0 is out of range" in message
    assert not_said not in message and "2 problems" in message


# ------------------------------------------------------------------------------------------------------
# 2. A folder with files a run writes that is no run: refused, without advice that would destroy them
# ------------------------------------------------------------------------------------------------------
FOLDERS = {  # what the folder holds besides a README: (file name, bytes)
    "a checkout": [("config.yaml", (ROOT / "config.yaml").read_bytes())],
    "a preset named config.yaml": [("config.yaml", (ROOT / "configs" / "tiny.yaml").read_bytes())],
    "someone's plots": [("plots.png", b"\x89PNG\r\n\x1a\n someone's figure")],
    "someone's metrics": [("metrics.jsonl", b'{"loss": 1}\n'), ("samples.md", b"# notes\n")],
    "a run's config with a comment added": [("config.yaml", yaml.safe_dump(config.load_config(TINY_YAML),
                                                                           sort_keys=False).encode() + b"# mine\n")],
}


@pytest.mark.parametrize("overwrite", ["overwrite=false", "overwrite=true"])
@pytest.mark.parametrize("held", list(FOLDERS))
def test_a_folder_that_is_no_run_is_never_written_over(no_model, tmp_path, capsys, held, overwrite):
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "README.md").write_text("a folder of the user's\n")
    for name, data in FOLDERS[held]:
        (folder / name).write_bytes(data)
    before = snapshot(folder)
    message = exit_message(["--config", TINY_YAML, *SMALL, f"run_dir={folder}", overwrite], capsys)
    assert f"run_dir={folder} holds {FOLDERS[held][0][0]}" in message and "no ragen-mini run folder" in message
    assert "empty or new folder" in message
    assert "--resume" not in message and "start over in it with overwrite=true" not in message
    assert snapshot(folder) == before  # not a byte changed, no lock left


def test_run_dir_dot_in_a_checkout_is_refused_and_the_schema_kept(no_model, tmp_path, capsys, monkeypatch):
    """The user's report: run_dir=. in a checkout advised overwrite=true, which would have replaced the schema
    config.yaml with the run's. Here on a copy of the checkout's files."""
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    for name in ("config.yaml", "README.md"):
        shutil.copy(ROOT / name, checkout / name)
    (checkout / "configs").mkdir()
    shutil.copy(TINY_YAML, checkout / "configs" / "tiny.yaml")
    before = snapshot(checkout)
    monkeypatch.chdir(checkout)
    for overwrite in ("overwrite=false", "overwrite=true"):
        message = exit_message(["--config", "configs/tiny.yaml", *SMALL, "run_dir=.", overwrite], capsys)
        assert "run_dir=. holds config.yaml" in message and "empty or new folder" in message
        assert snapshot(checkout) == before


def test_a_real_run_folder_is_still_offered_resume_and_overwrite(no_model, tmp_path, capsys):
    run = fake_run(tmp_path)
    before = snapshot(run)
    message = exit_message(["--config", TINY_YAML, *SMALL, f"run_dir={run}"], capsys)
    assert f"--resume {run}" in message and "overwrite=true" in message and "already holds a run" in message
    assert snapshot(run) == before


def test_written_by_a_run_tells_a_run_config_from_a_hand_written_one(tmp_path):
    cfg = config.load_config(TINY_YAML)
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    assert bookkeeping.written_by_a_run(str(tmp_path))
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False).replace("\n", "  \n", 1))
    assert not bookkeeping.written_by_a_run(str(tmp_path))  # not byte for byte as a run writes it
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({"run_dir": "", "seed": 0}))
    assert not bookkeeping.written_by_a_run(str(tmp_path))  # not a whole config
    assert not bookkeeping.written_by_a_run(str(ROOT))  # the schema, with its comments
    (tmp_path / "config.yaml").write_bytes(b"\xff\xfe")
    assert not bookkeeping.written_by_a_run(str(tmp_path))


# ------------------------------------------------------------------------------------------------------
# 3. A hand-edited checkpoint: its iteration must be a whole number from 1
# ------------------------------------------------------------------------------------------------------
STATE_ROWS = [  # (id, laid over a whole state.pt, what the message says about it)
    ("negative iteration", {"iteration": -3}, "its iteration is -3"),
    ("iteration 0", {"iteration": 0}, "its iteration is 0"),
    ("iteration as text", {"iteration": "1"}, "its iteration is '1'"),
    ("iteration a float", {"iteration": 1.5}, "its iteration is 1.5"),
    ("iteration a bool", {"iteration": True}, "its iteration is True"),
    ("iteration a tensor", {"iteration": torch.tensor(1)}, "its iteration is tensor(1)"),
    ("no iteration", {"iteration": None}, "its iteration is None"),
]


@pytest.mark.parametrize("flag", ["--resume", "--eval"])
@pytest.mark.parametrize("state, said", [row[1:] for row in STATE_ROWS], ids=[row[0] for row in STATE_ROWS])
def test_a_checkpoint_with_an_impossible_iteration_is_refused(no_model, tmp_path, capsys, flag, state, said):
    run = fake_run(tmp_path, state)
    before = snapshot(run)
    message = exit_message([flag, str(run), *(["train.iterations=2"] if flag == "--resume" else [])], capsys)
    assert f"{flag} {run}: {run / 'checkpoint' / 'state.pt'} is damaged" in message and said in message
    assert snapshot(run) == before  # no metrics row dropped, nothing written


@pytest.mark.parametrize("state", [["iteration", "critic", "optimizers", "rng"], ["rng"]])
def test_a_checkpoint_that_lacks_a_part_is_refused(no_model, tmp_path, capsys, state):
    run = fake_run(tmp_path)
    whole = torch.load(run / "checkpoint" / "state.pt", weights_only=True)
    torch.save({key: value for key, value in whole.items() if key not in state}, run / "checkpoint" / "state.pt")
    message = exit_message(["--resume", str(run)], capsys)
    assert "state.pt is damaged (it lacks " in message and ", ".join(sorted(state)) in message


def test_the_summary_never_offers_a_checkpoint_with_an_impossible_iteration(tmp_path):
    run = fake_run(tmp_path, {"iteration": -3})
    assert bookkeeping.latest_checkpoint(str(run)) is None
    assert bookkeeping.latest_checkpoint(str(fake_run(tmp_path / "b"))).endswith("(iteration 1)")


# ------------------------------------------------------------------------------------------------------
# 4. run_dir: "~" is the home folder; run_dir with --resume or --eval is refused, not ignored
# ------------------------------------------------------------------------------------------------------
def test_a_tilde_in_run_dir_is_the_home_folder(tmp_path, monkeypatch):
    home, cwd = tmp_path / "home", tmp_path / "cwd"
    home.mkdir(), cwd.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(cwd)
    preset = tmp_path / "mine.yaml"
    preset.write_text("run_dir: ~/runs/a\n")
    cfg = config.load_config(str(preset), ["train.device=cpu"])
    assert cfg["run_dir"] == str(home / "runs" / "a")
    run_dir, made = bookkeeping.open_run_folder(config.namespace(cfg), None)
    bookkeeping.release_lock(run_dir)
    assert (home / "runs" / "a").is_dir() and not (cwd / "~").exists()
    assert made == [str(home / "runs" / "a"), str(home / "runs")]


def test_a_tilde_run_dir_under_a_file_is_refused_naming_the_home_path(no_model, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "a_file").write_text("not a folder")
    message = exit_message(["--config", TINY_YAML, "run_dir=~/a_file/run"], capsys)
    assert f"{tmp_path / 'a_file'} is a file" in message


@pytest.mark.parametrize("flag", ["--resume", "--eval"])
def test_a_tilde_in_the_run_folder_of_resume_and_eval_is_the_home_folder(tmp_path, capsys, monkeypatch, flag):
    monkeypatch.setenv("HOME", str(tmp_path))
    message = exit_message([flag, "~/nope"], capsys)
    assert f"{flag} {tmp_path / 'nope'}: no such folder" in message


@pytest.mark.parametrize("flag", ["--resume", "--eval"])
@pytest.mark.parametrize("where", ["ELSEWHERE", "RUN", ""])
def test_run_dir_with_resume_or_eval_is_refused(no_model, tmp_path, capsys, flag, where):
    """It used to be ignored without a word: the run went on in its own folder."""
    run = fake_run(tmp_path)
    before = snapshot(tmp_path)
    given = where.replace("ELSEWHERE", str(tmp_path / "copy")).replace("RUN", str(run))
    message = exit_message([flag, str(run), f"run_dir={given}"], capsys)
    assert f"run_dir={given}: a resumed or evaluated run keeps its own folder, {run}" in message
    assert "copy the whole folder" in message
    assert snapshot(tmp_path) == before


# ------------------------------------------------------------------------------------------------------
# 5. Bandit payouts that make the "risky" arm, whose pulls count as successes, the worse one
# ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs, expected", [
    ("{low_payout: 0.5}", "0.25 x 1 = 0.25 per pull, the safe arm Phoenix 0.5"),
    ("{high_prob: 0.05}", "0.05 x 1 = 0.05 per pull, the safe arm Phoenix 0.1"),
    ("{high_payout: 0.4}", "0.25 x 0.4 = 0.1 per pull, the safe arm Phoenix 0.1"),  # equal is no better
    ("{high_payout: -2, low_payout: -0.1}", "0.25 x -2 = -0.5 per pull, the safe arm Phoenix -0.1"),
    ("{high_prob: 0, low_payout: 0}", "0 x 1 = 0 per pull, the safe arm Phoenix 0"),
    ("{high_name: Tiger, low_name: Sheep, low_payout: 2, high_payout: 4}", "the risky arm Tiger"),
])
def test_bandit_payouts_that_make_the_risky_arm_the_worse_are_refused(no_model, tmp_path, capsys, kwargs, expected):
    message = exit_message(["--config", TINY_YAML, *BANDIT, f"env.kwargs={kwargs}", f"run_dir={tmp_path / 'r'}"],
                           capsys)
    assert "env.kwargs=" in message and expected in message and "high_payout" in message
    assert not (tmp_path / "r").exists()


def test_bandit_payouts_where_the_risky_arm_is_better_pass():
    config.load_config(TINY_YAML, [*BANDIT, "env.kwargs={low_payout: 0.2}"])
    config.load_config(TINY_YAML, [*BANDIT, "env.kwargs={high_prob: 0.5, high_payout: 3, low_payout: 1}"])


# ------------------------------------------------------------------------------------------------------
# 6. YAML anchors and aliases (the billion laughs) in a config file, RUN/config.yaml or an override value
# ------------------------------------------------------------------------------------------------------
def bomb(indent="", levels=9):
    """Nine levels of nine aliases: ~430 bytes that stand for 9**9 (387 million) strings."""
    lines = [f'{indent}a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"{indent}a{i}: &a{i} [{','.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("content", [bomb(), "env:\n  kwargs:\n" + bomb("    "), "algo: &base\n  lam: 0.9\n",
                                     "base: &b {lam: 0.9}\nalgo:\n  <<: *b\n"],
                         ids=["at the top", "in env.kwargs", "an anchor alone", "a merge key"])
def test_a_config_file_with_anchors_or_aliases_is_refused_at_once(no_model, tmp_path, capsys, content):
    path = tmp_path / "user.yaml"
    path.write_text(content)
    started = time.perf_counter()
    message = exit_message(["--config", str(path)], capsys)
    assert time.perf_counter() - started < 2.0 and len(message) < 1000
    assert f"config file {path}: line " in message and "anchor or alias" in message and "write the value out" in message


@pytest.mark.parametrize("use", ["--resume", "--eval", "--export"])
def test_a_run_config_with_an_alias_bomb_is_refused(no_model, tmp_path, capsys, use):
    run = fake_run(tmp_path)
    text = (run / "config.yaml").read_text().replace("  kwargs: {}\n", "  kwargs:\n" + bomb("    "))
    (run / "config.yaml").write_text(text)
    before = snapshot(run)
    argv = ["--export", "ragen", str(run)] if use == "--export" else [use, str(run)]
    started = time.perf_counter()
    message = exit_message(argv, capsys)
    assert time.perf_counter() - started < 5.0 and len(message) < 1000
    assert str(run / "config.yaml") in message and "anchor or alias" in message
    assert snapshot(run) == before


def test_an_override_value_with_an_alias_is_refused():
    with pytest.raises(config.ConfigError, match="the value of 'env.kwargs': line 1 uses a YAML anchor"):
        config.load_config(TINY_YAML, ["env.kwargs=&a {size: 4}"])


# ------------------------------------------------------------------------------------------------------
# 7. plots.py --out FILE in a folder that is not there
# ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("out, said", [
    ("nowhere/x.png", "nowhere does not exist"),
    ("A_FILE/x.png", "a_file is not a folder"),
    ("TMP", "is a folder; give a file name"),
    ("TMP/x.txt", "Format 'txt' is not supported"),
])
def test_plots_out_that_cannot_be_written_says_why(tmp_path, capsys, monkeypatch, out, said):
    run = fake_run(tmp_path)
    (tmp_path / "a_file").write_text("not a folder")
    monkeypatch.chdir(tmp_path)
    out = out.replace("A_FILE", str(tmp_path / "a_file")).replace("TMP", str(tmp_path))
    before = snapshot(tmp_path)
    message = exit_message([str(run), "--out", out], capsys, main=plots.main)
    assert f"--out {out}" in message and said in message
    assert snapshot(tmp_path) == before and not (tmp_path / "nowhere").exists()


# ------------------------------------------------------------------------------------------------------
# 8-9. A model without a chat template, or with one that is broken or tries a sandbox escape
# ------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tokenizer():
    return tiny.build_tokenizer(["State: the box is left. <think> </think> <answer> Up </answer>"] * 10,
                                vocab_size=300)


TEMPLATE_ROWS = [  # (id, template, what the message says)
    ("none, as a base model's", None, "has no chat template"),
    ("sandbox escape", "{{ ''.__class__.__mro__[1].__subclasses__() }}", "SecurityError"),
    ("sandbox escape to os", "{{ cycler.__init__.__globals__.os.mkdir('MARKER') }}", "SecurityError"),
    ("syntax error", "{% for m in messages %}{{ m['content'] }", "TemplateSyntaxError"),
    ("refuses a system message", "{{ raise_exception('System role not supported') }}", "System role not supported"),
    ("writes no messages", "hello", "does not write the messages out"),
]


@pytest.mark.parametrize("template, said", [row[1:] for row in TEMPLATE_ROWS], ids=[row[0] for row in TEMPLATE_ROWS])
def test_a_chat_template_that_cannot_be_used_is_named(tokenizer, tmp_path, template, said):
    tokenizer = tokenizer.__class__(tokenizer_object=tokenizer.backend_tokenizer, eos_token="<|im_end|>",
                                    pad_token="<|endoftext|>",
                                    chat_template=template and template.replace("MARKER", str(tmp_path / "ran")))
    with pytest.raises(config.ConfigError) as error:
        rollout.chat_format(tokenizer)
    assert said in str(error.value) and "the model's tokenizer" in str(error.value)
    assert not (tmp_path / "ran").exists()


def test_a_new_run_of_a_model_without_a_chat_template_says_use_an_instruct_model(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(tiny, "CHATML_TEMPLATE", None)  # the tiny model's tokenizer, as a base model's
    monkeypatch.chdir(tmp_path)
    message = exit_message(["--config", TINY_YAML, *SMALL], capsys)
    assert message.startswith("config error: the model's tokenizer has no chat template")
    assert "Use an instruct model" in message
    assert os.listdir(tmp_path) == []  # neither the run folder nor runs/ is left (11.)


@pytest.mark.parametrize("flag", ["--eval", "--resume"])
@pytest.mark.parametrize("damage, file, said", [
    ("escape", "chat_template.jinja", "the sandbox refused, nothing ran"),
    ("removed", "tokenizer_config.json", "has no chat template"),
])
def test_a_checkpoint_whose_chat_template_cannot_be_used_names_its_file(tmp_path, capsys, flag, damage, file, said):
    run = fake_run(tmp_path, actor=True)
    template = run / "checkpoint" / "actor" / "chat_template.jinja"
    if damage == "escape":
        template.write_text("{{ cycler.__init__.__globals__.os.mkdir('%s') }}" % (tmp_path / "ran"))
    else:
        template.unlink()
    before = snapshot(run)
    message = exit_message([flag, str(run), *(["train.iterations=2"] if flag == "--resume" else [])], capsys)
    assert f"{run / 'checkpoint' / 'actor' / file}" in message and said in message
    assert snapshot(run) == before and not (tmp_path / "ran").exists()


# ------------------------------------------------------------------------------------------------------
# 10. Ctrl-C during --eval
# ------------------------------------------------------------------------------------------------------
@pytest.mark.usefixtures("signals_as_in_a_terminal")
def test_ctrl_c_during_eval_exits_130_with_one_line(tmp_path, capsys, monkeypatch):
    run = fake_run(tmp_path, actor=True)
    before, handler = snapshot(run), signal.getsignal(signal.SIGINT)

    def evaluate_until_ctrl_c(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)
        raise AssertionError("Ctrl-C did not stop the evaluation")

    monkeypatch.setattr(launch, "evaluate", evaluate_until_ctrl_c)
    with pytest.raises(SystemExit) as stop:
        try:
            ragen_mini.main(["--eval", str(run)])
        except KeyboardInterrupt:  # what Python prints with a traceback; here it would also end pytest
            pytest.fail("Ctrl-C during --eval ended in KeyboardInterrupt's traceback")
    assert stop.value.code == 130
    out = capsys.readouterr()
    lines = [line for line in out.out.splitlines() if line.strip() and not line.startswith("CPU:")
             and not line.startswith("loading the actor")]
    assert lines == [f"Ctrl-C: the evaluation of {run} stopped before its end; its result is not in "
                     f"{run / 'eval.jsonl'}"]
    assert "Traceback" not in out.err
    assert snapshot(run) == before
    assert signal.getsignal(signal.SIGINT) is handler  # Ctrl-C is as it was before the evaluation


@pytest.mark.usefixtures("signals_as_in_a_terminal")
def test_a_signal_ignored_before_the_run_stays_ignored():
    """nohup ignores SIGHUP so that a closed terminal does not stop the run: under CtrlC a SIGHUP then does
    nothing, while SIGTERM, not ignored, still stops the run; every handler is as it was afterwards."""
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with bookkeeping.CtrlC() as ctrl_c:
            ctrl_c.training = True
            os.kill(os.getpid(), signal.SIGHUP)
            time.sleep(0.05)
            assert not ctrl_c.pressed and signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.05)
            assert ctrl_c.pressed and ctrl_c.signum == signal.SIGTERM
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN  # the press made no ignored signal live
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL and signal.getsignal(signal.SIGINT) is (
            signal.default_int_handler)
    finally:
        signal.signal(signal.SIGHUP, previous)


# ------------------------------------------------------------------------------------------------------
# 11. A start that fails removes the folders it made, runs/ included, and no others
# ------------------------------------------------------------------------------------------------------
def model_that_does_not_load(*args, **kwargs):
    raise SystemExit("error: cannot load model 'x': stand-in for a download that failed")


@pytest.mark.parametrize("before, run_dir, left", [
    ([], "", []),  # a first run: runs/ made by this start, removed with it
    (["runs/"], "", ["runs"]),  # runs/ was there: it stays, empty as it was
    (["runs/sokoban-1/metrics.jsonl"], "", ["runs", "runs/sokoban-1", "runs/sokoban-1/metrics.jsonl"]),
    ([], "a/b/c", []),  # every folder of the path made here
    (["a/notes.txt"], "a/b/c", ["a", "a/notes.txt"]),
])
def test_a_start_that_fails_removes_the_folders_it_made(tmp_path, capsys, monkeypatch, before, run_dir, left):
    monkeypatch.chdir(tmp_path)
    for path in before:
        if path.endswith("/"):
            (tmp_path / path).mkdir()
        else:
            (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / path).write_text("someone's")
    monkeypatch.setattr(launch, "load_models", model_that_does_not_load)
    message = exit_message(["--config", TINY_YAML, *SMALL, f"run_dir={run_dir}"], capsys)
    assert "cannot load model" in message
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == left
