"""train.log_to (run_log.py): TensorBoard and W&B get what metrics.jsonl holds, the config and the evaluation
samples. Every expectation is read here from the run folder's own files (metrics.jsonl, samples.jsonl,
config.yaml, parsed with json and yaml), and TensorBoard's event files are read back with TensorBoard's own
reader; W&B is a stand-in module that records its calls, so no package and no network is needed for it."""
import importlib.machinery
import json
import math
import sys
import types
from pathlib import Path

import numpy as np
import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import evaluation  # noqa: E402
import launch  # noqa: E402
import ragen_mini  # noqa: E402
import run_log  # noqa: E402
from config import ConfigError, load_config  # noqa: E402
from helpers import TINY_YAML  # noqa: E402

# Small everything (tests/test_trainer.py's SMALL, on the one-turn Bandit): an evaluation every iteration
SMALL = ["model.name=tiny", "train.device=cpu", "rollout.groups=2", "rollout.group_size=4",
         "rollout.max_new_tokens=8", "rollout.max_context=1024", "env.name=bandit", "env.max_turns=1",
         "env.max_actions_per_turn=1", "env.max_actions=1", "algo.mini_batch_size=4",
         "algo.micro_batch_size=2", "eval.num_seeds=4", "eval.every=1", "eval.samples=2", "warmup.steps=0",
         "train.iterations=2", "checkpoint.every=0"]
TEXT_TAG = "eval/samples/text_summary"  # torch's add_text("eval/samples", ...) adds /text_summary


def run(tmp_path, *overrides):
    run_dir = tmp_path / "run"
    ragen_mini.main(["--config", TINY_YAML, *SMALL, f"run_dir={run_dir}", *overrides])
    return run_dir


def read_rows(run_dir):
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]


def read_records(run_dir):
    return [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines() if line.strip()]


def numbers(row):
    """The row's metrics: every number but the iteration, which is the step."""
    return {key: value for key, value in row.items() if key != "iteration" and isinstance(value, (int, float))}


def flatten(tree, prefix=""):
    out = {}
    for key, value in tree.items():
        if isinstance(value, dict) and key != "kwargs":
            out.update(flatten(value, f"{prefix}{key}."))
        else:
            out[prefix + key] = value
    return out


def read_tensorboard(run_dir):
    """RUN_DIR/tensorboard read back by TensorBoard's own readers, every event kept (by default they sample):
    event_accumulator for the scalars, and plugin_event_accumulator, the one TensorBoard's server reads with,
    for the text and the hyperparameters (the older reader hides a resume's purged steps only for scalars,
    images and the like, not for text)."""
    from tensorboard.backend.event_processing import event_accumulator, plugin_event_accumulator

    scalars = event_accumulator.EventAccumulator(str(run_dir / "tensorboard"),
                                                 size_guidance={event_accumulator.SCALARS: 0})
    plugins = plugin_event_accumulator.EventAccumulator(
        str(run_dir / "tensorboard"), size_guidance=plugin_event_accumulator.STORE_EVERYTHING_SIZE_GUIDANCE)
    scalars.Reload()
    plugins.Reload()
    return scalars, plugins


def check_tensorboard_equals_the_run_folder(run_dir):
    acc, plugins = read_tensorboard(run_dir)
    rows = read_rows(run_dir)
    # every number of every row, at its iteration, once: float32, as TensorBoard stores a scalar
    expected = {}
    for row in rows:
        for key, value in numbers(row).items():
            expected.setdefault(key, []).append((row["iteration"], value))
    assert sorted(acc.Tags()["scalars"]) == sorted(expected)
    for key, points in expected.items():
        logged = [(event.step, event.value) for event in acc.Scalars(key)]
        assert [step for step, _ in logged] == [step for step, _ in points], key
        for (_, got), (_, want) in zip(logged, points):
            assert got == np.float32(want) or (math.isnan(got) and math.isnan(want)), (key, got, want)
    # the config as hyperparameters, section.key names, as config.yaml holds them
    from tensorboard.plugins.hparams import plugin_data_pb2

    content = plugins.PluginTagToContent("hparams")["_hparams_/session_start_info"]
    hparams = plugin_data_pb2.HParamsPluginData.FromString(content).session_start_info.hparams
    config = flatten(yaml.safe_load((run_dir / "config.yaml").read_text()))
    assert set(hparams) == set(config)
    for key, value in config.items():
        if isinstance(value, bool):
            assert hparams[key].string_value == str(value).lower(), key
        elif isinstance(value, (int, float)):
            assert hparams[key].number_value == value, key
        elif isinstance(value, str):
            assert hparams[key].string_value == value, key
        else:
            assert json.loads(hparams[key].string_value) == value, key
    # each evaluation's sampled episodes as text, once, at its iteration
    records = read_records(run_dir)
    texts = {event.step: event.tensor_proto.string_val[0].decode() for event in plugins.Tensors(TEXT_TAG)}
    assert [event.step for event in plugins.Tensors(TEXT_TAG)] == [row["iteration"] for row in rows
                                                                if "eval/success" in row]
    for step, text in texts.items():
        mine = [record for record in records if record["iteration"] == step]
        assert mine and text == evaluation.samples_markdown(mine)
        for record in mine:
            assert f"## seed {record['seed']}: reward {record['reward']:g}" in text
            assert all(turn["reply"] in text for turn in record["turns"])
    return acc


@pytest.mark.slow
def test_tensorboard_holds_metrics_jsonl_and_follows_it_through_a_resume(tmp_path, monkeypatch):
    """A run of 3 iterations whose last checkpoint (at iteration 3) is never written, as in a crash: it holds
    iteration 2's. TensorBoard equals metrics.jsonl then, and again after --resume, which drops row 3 from
    metrics.jsonl and trains iteration 3 again: the old step 3 (and 2, which the resume logs again) must be
    hidden, not shown twice (SummaryWriter's purge_step)."""
    real_save = launch.save_checkpoint
    monkeypatch.setattr(launch, "save_checkpoint",
                        lambda run_, iteration: None if iteration == 3 else real_save(run_, iteration))
    run_dir = run(tmp_path, "train.log_to=tensorboard", "train.iterations=3", "checkpoint.every=2")
    first = check_tensorboard_equals_the_run_folder(run_dir)
    old_step_3 = [event.value for event in first.Scalars("perf/iteration_s") if event.step == 3]
    assert [row["iteration"] for row in read_rows(run_dir)] == [0, 1, 2, 3] and len(old_step_3) == 1
    monkeypatch.undo()
    ragen_mini.main(["--resume", str(run_dir)])
    assert len(list((run_dir / "tensorboard").glob("events.out.tfevents.*"))) == 2  # one per process
    after = check_tensorboard_equals_the_run_folder(run_dir)
    assert [row["iteration"] for row in read_rows(run_dir)] == [0, 1, 2, 3]
    new_step_3 = [event.value for event in after.Scalars("perf/iteration_s") if event.step == 3]
    assert new_step_3 == [np.float32(read_rows(run_dir)[3]["perf/iteration_s"])]


def fake_wandb():
    """A stand-in for the wandb package: init() returns a run that records what it is given."""
    calls = types.SimpleNamespace(init=[], log=[], finished=0)
    module = types.ModuleType("wandb")
    module.__spec__ = importlib.machinery.ModuleSpec("wandb", None)  # find_spec finds it installed

    class Table:
        def __init__(self, columns):
            self.columns, self.data = columns, []

        def add_data(self, *row):
            self.data.append(list(row))

    def finish():
        calls.finished += 1

    def init(**kwargs):
        calls.init.append(kwargs)
        return types.SimpleNamespace(log=lambda data, step=None: calls.log.append((step, data)), finish=finish)

    module.init, module.Table = init, Table
    return module, calls


def no_wandb_key(monkeypatch, tmp_path):
    for name in ("WANDB_MODE", "WANDB_API_KEY", "WANDB_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))


@pytest.mark.slow
def test_wandb_gets_the_rows_the_config_and_the_samples(tmp_path, monkeypatch, capsys):
    """With no API key and no WANDB_MODE, W&B logs offline (said in one line) into RUN_DIR; every row of
    metrics.jsonl is logged at its iteration, the config as W&B's config, each evaluation's episodes as a
    table; the run is finished once."""
    module, calls = fake_wandb()
    monkeypatch.setitem(sys.modules, "wandb", module)
    no_wandb_key(monkeypatch, tmp_path)
    run_dir = run(tmp_path, "train.log_to=wandb")
    assert "train.log_to=wandb: no W&B API key" in capsys.readouterr().out
    [init] = calls.init
    assert (init["project"], init["dir"], init["mode"]) == ("ragen-mini", str(run_dir), "offline")
    assert init["config"] == yaml.safe_load((run_dir / "config.yaml").read_text())
    rows, records = read_rows(run_dir), read_records(run_dir)
    metric_logs = [(step, data) for step, data in calls.log if "eval/samples" not in data]
    assert metric_logs == [(row["iteration"], numbers(row)) for row in rows]
    tables = [(step, data["eval/samples"]) for step, data in calls.log if "eval/samples" in data]
    assert [step for step, _ in tables] == [row["iteration"] for row in rows if "eval/success" in row]
    for step, table in tables:
        mine = [record for record in records if record["iteration"] == step]
        assert table.columns == ["title", "episode", "seed", "reward", "success", "transcript"]
        assert table.data == [[r["title"], r["episode"], r["seed"], r["reward"], r["success"],
                               evaluation.samples_markdown([r])] for r in mine] and mine
    assert calls.finished == 1


@pytest.mark.parametrize("environment, mode", [({}, "offline"), ({"WANDB_MODE": "online"}, None),
                                               ({"WANDB_MODE": "offline"}, None),
                                               ({"WANDB_API_KEY": "x" * 40}, None), ("netrc", None)])
def test_wandb_mode_comes_from_the_environment(tmp_path, monkeypatch, environment, mode):
    """WANDB_MODE, when set, is wandb's to read (mode=None); unset, a configured key (WANDB_API_KEY, or
    ~/.netrc as `wandb login` writes it) means online, and no key offline."""
    module, calls = fake_wandb()
    monkeypatch.setitem(sys.modules, "wandb", module)
    no_wandb_key(monkeypatch, tmp_path)
    if environment == "netrc":
        (tmp_path / "netrc").write_text("machine api.wandb.ai\n  login user\n  password " + "x" * 40 + "\n")
        monkeypatch.setenv("NETRC", str(tmp_path / "netrc"))
    else:
        for name, value in environment.items():
            monkeypatch.setenv(name, value)
    logger = run_log.open_logger({"train": {"log_to": "wandb"}}, str(tmp_path))
    assert calls.init[0]["mode"] == mode and calls.log == []  # no metrics.jsonl: nothing to log yet
    run_log.close_logger(logger)
    assert calls.finished == 1


@pytest.mark.parametrize("package", ["tensorboard", "wandb"])
def test_a_missing_package_is_one_line_before_any_model(tmp_path, monkeypatch, package):
    """sys.modules[name] = None: Python's own way to say a package is not there (find_spec gives None). The
    run stops with one line naming the key and the pip command; no model loads, no run folder is made."""
    monkeypatch.setitem(sys.modules, package, None)
    monkeypatch.setattr(launch, "load_models", lambda *args: pytest.fail("a model was loaded"))
    with pytest.raises(SystemExit) as stop:
        run(tmp_path, f"train.log_to={package}")
    assert str(stop.value) == f"error: train.log_to={package} needs the {package} package: pip install {package}"
    assert not (tmp_path / "run").exists()


def test_log_to_takes_three_values():
    assert load_config(TINY_YAML, ["train.log_to=tensorboard"])["train"]["log_to"] == "tensorboard"
    assert load_config(TINY_YAML)["train"]["log_to"] == "none"
    with pytest.raises(ConfigError, match="train.log_to must be none, tensorboard or wandb"):
        load_config(TINY_YAML, ["train.log_to=mlflow"])
