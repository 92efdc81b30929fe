"""export.py: the RAGEN command of a ragen-mini config (docs/paper.md §10). The facts it is held to come
from outside the code: RAGEN's key tree as stored from its repository, a command written out by hand for
one preset, and the docs table."""
import copy
import glob
import os
import re
import shlex
import shutil
import subprocess
import sys

import pytest
import yaml

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import config  # noqa: E402
import export  # noqa: E402
from helpers import two_at_once  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PRESETS = [os.path.join(ROOT, "config.yaml")] + sorted(glob.glob(os.path.join(ROOT, "configs", "*.yaml")))
# beyond the presets: each branch of the table's conversions once
EXTRA = [["algo.estimator=grpo", "algo.kl_coef=0.001", "algo.grpo_kl=k1"], ["algo.kl_coef=0.001"],
         ["env.kwargs={dim_room: 8, num_boxes: 2}"], ["env.name=bandit", "env.kwargs={high_name: Teacher}"],
         ["eval.every=0", "checkpoint.every=0", "algo.dual_clip=3.0", "algo.filter_largest=false"],
         ["algo.ppo_epochs=4", "run_dir=runs/a", "eval.k=4", "rollout.think=false"],
         ["algo.loss_agg=micro-batch-mean", "algo.micro_batch_size=8", "algo.micro_batch_tokens=0"]]


@pytest.fixture(scope="module")
def schema_and_tree():
    return config.read_schema(), export.key_tree()


@pytest.fixture(autouse=True)
def schema_and_tree_read_once(schema_and_tree, monkeypatch):
    """config.read_schema and export.key_tree, which read config.yaml and the stored key tree, read once for all of
    this module's hundreds of configs and exports (parsing the two files again for each took most of their
    seconds). Each call gets a copy of its own, as from a fresh read."""
    schema, tree = schema_and_tree
    monkeypatch.setattr(config, "read_schema", lambda: copy.deepcopy(schema))
    monkeypatch.setattr(export, "key_tree", lambda: copy.deepcopy(tree))


def stored_tree():
    """The stored key tree composed by hand, as Hydra composes base.yaml: verl's file, then envs, then
    base."""
    with open(os.path.join(ROOT, "docs", "ragen_config", "key_tree.yaml"), encoding="utf-8") as f:
        sections = yaml.safe_load(f)
    return {**sections["verl_ppo_trainer"]["keys"], **sections["ragen_envs"]["keys"],
            **sections["ragen_base"]["keys"]}


def configs():
    return [(os.path.basename(p), config.load_config(p)) for p in PRESETS] + \
           [(" ".join(o), config.load_config(None, o)) for o in EXTRA]


def parse_value(text):
    r"""Hydra override text -> Python value: export.hydra_value's reverse, to read a printed command back.

    >>> parse_value(export.hydra_value('a "${oc.env:HOME}" \\')) == 'a "${oc.env:HOME}" \\'
    True
    """
    if len(text) > 1 and text[0] == text[-1] == '"':
        value = re.sub(r'(\\+)("|\Z)', lambda m: "\\" * (len(m.group(1)) // 2) + m.group(2), text[1:-1])
        return re.sub(r"(\\+)\$\{", lambda m: "\\" * (len(m.group(1)) // 2) + "${", value) \
            if "${" in value else value
    value = yaml.safe_load(text)
    if isinstance(value, str) and re.fullmatch(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+", value):
        return float(value)  # YAML 1.1 reads 1e-06 as a string; Hydra as a float
    return value


def parse_command(text):
    """The overrides of a printed command, {path: value}: the round trip reads what a user would copy."""
    words = shlex.split("\n".join(line for line in text.splitlines() if not line.startswith("#"))
                        .replace("\\\n", " "))
    return {path: parse_value(value)
            for path, _, value in (w.partition("=") for w in words[words.index("base") + 1:])}


def to_ragen_mini(chosen, tree=None):
    """The export's reverse, through the same table (each entry's `back`): RAGEN overrides {path: value} ->
    {ragen-mini key: value} for every key export.MAPPING carries.

    >>> to_ragen_mini({"actor_rollout_ref.actor.clip_ratio_high": 0.2})["algo.clip_high"]
    0.2
    """
    tree = tree or export.key_tree()[0]
    get = lambda path, default=False: export.resolve(tree, chosen, path, default)  # noqa: E731 (a one-line reader)
    tag = get("es_manager.train.env_configs.tags")[0]
    out = {}
    for entry in export.MAPPING:
        if entry.get("paths"):
            back = entry.get("back") or (lambda g, t, path=entry["paths"][0]: g(path.replace("<tag>", t)))
            out[entry["key"]] = back(get, tag)
    return out


def printed(cfg, gpus=1):
    return parse_command(export.ragen_command(cfg, gpus))


def test_stored_tree_holds_ragens_defaults_at_the_named_commits():
    """Values read off RAGEN's base.yaml (1319230), envs.yaml (3e17651) and verl's ppo_trainer.yaml
    (1e47e41)."""
    with open(os.path.join(ROOT, "docs", "ragen_config", "key_tree.yaml"), encoding="utf-8") as f:
        header = f.read(2000)
    for commit in ("131923071cc681ffab661507a1447fbc25e87a36", "3e17651386cdf0e94cfbffbec8560a75d52c2d85",
                   "1e47e412a441bae8cd1152888f6822871f95dec5"):
        assert commit in header
    tree = stored_tree()
    assert tree["model_path"] == "Qwen/Qwen2.5-3B-Instruct" and tree["seed.val"] == 123
    assert tree["actor_rollout_ref.actor.clip_ratio_high"] == 0.28  # base.yaml over verl's 0.2
    assert (tree["actor_rollout_ref.actor.clip_ratio_c"] == 3.0
            and tree["actor_rollout_ref.actor.optim.lr"] == 1e-6)
    assert tree["custom_envs.SimpleSokoban.env_config.dim_x"] == 6 and tree["enable_response_mask"] is True
    assert tree["critic.ppo_epochs"] == "${actor_rollout_ref.actor.ppo_epochs}"


def test_every_exported_path_exists_in_ragens_key_tree():
    tree = stored_tree()
    for name, cfg in configs():
        for gpus in (1, 2):
            missing = set(printed(cfg, gpus)) - set(tree)
            assert not missing, (name, missing)
    for entry in export.MAPPING:  # the table's paths too, for every env
        for path in entry.get("paths") or []:
            for tag in ("SimpleSokoban", "FrozenLake", "Bandit"):
                path = path.replace("<tag>", tag)  # a section (env_config) holds keys below it
                assert path in tree or any(p.startswith(path + ".") for p in tree), path


def test_ragen_paper_preset_gives_the_command_written_by_hand():
    """Read off configs/ragen-paper.yaml, config.yaml and RAGEN's defaults (docs/ragen_config/key_tree.yaml):
    only what differs from RAGEN's default. Left out, for instance: clip 0.2/0.28, filter 0.25, lr 1e-6/1e-5,
    mini-batch 32, 200 steps, test_freq 10 (all RAGEN's defaults too); the loss average (micro-batch-mean
    is verl's token-mean at this commit)."""
    expected = [
        "lora.rank=0",  # RAGEN trains LoRA adapters by default at this commit; ragen-mini every weight
        "seed.train=0",
        "model_path=Qwen/Qwen2.5-0.5B-Instruct",
        "actor_rollout_ref.model.enable_gradient_checkpointing=False",
        "critic.model.enable_gradient_checkpointing=False",
        "actor_rollout_ref.actor.clip_ratio_c=1000000000.0",  # dual clip off
        "micro_batch_size_per_gpu=4",
        "enable_response_mask=False",  # algo.train_tokens=after_system
        "es_manager.val.env_groups=256",
        "es_manager.val.env_configs.n_groups=[256]",
        "es_manager.val.group_size=1",
        "seed.val=1000000",
        "trainer.generations_to_log_to_wandb.val=4",
        "trainer.save_freq=50",
    ]
    text = export.ragen_command(config.load_config(os.path.join(ROOT, "configs", "ragen-paper.yaml")))
    words = re.findall(r"^    (\S+)", text, flags=re.M)
    assert [w.strip("'") for w in words] == expected
    assert "python train.py --config-name base" in text and "# GPUs: 1" in text
    assert "Cannot carry over" not in text  # the preset turns on every switch of §9


def test_round_trip_gives_back_every_carried_key():
    """Export, read the printed overrides back through the same table, over RAGEN's stored defaults."""
    schema_keys = set(config._flat_keys(config.read_schema()))
    for name, cfg in configs():
        back = to_ragen_mini(printed(cfg))
        lost = export.lost(cfg)
        for key, value in back.items():
            if key not in lost:
                assert value == config._get(cfg, key), (name, key, value)
        mapped = {e["key"] for e in export.MAPPING if e.get("paths")}
        assert set(back) == mapped and mapped <= schema_keys


def test_lost_keys_of_a_preset_written_by_hand():
    cfg = config.load_config(os.path.join(ROOT, "configs", "smollm2-frozenlake.yaml"))
    assert sorted(export.lost(cfg)) == ["algo.gae_skip_observations", "algo.loss_agg", "model.name",
                                        "rollout.clean_history", "rollout.delete_special_strings",
                                        "train.time_limit_min", "warmup"]
    # one micro-batch: token-mean carries
    tiny = config.load_config(os.path.join(ROOT, "configs", "tiny.yaml"))
    assert "algo.loss_agg" not in export.lost(tiny) and "model.name" in export.lost(tiny)


def test_every_config_key_has_one_table_entry():
    keys = [e["key"] for e in export.MAPPING]
    assert len(keys) == len(set(keys))
    for key in config._flat_keys(config.read_schema()):
        assert key in keys or key.split(".")[0] in keys, key


def test_interpolated_default_is_not_repeated_and_gpus_are_set_together():
    chosen = printed(config.load_config(None, ["algo.ppo_epochs=4"]), gpus=2)
    # follows the actor
    assert chosen["actor_rollout_ref.actor.ppo_epochs"] == 4 and "critic.ppo_epochs" not in chosen
    assert (chosen["trainer.n_gpus_per_node"], chosen["system.CUDA_VISIBLE_DEVICES"],
            chosen["actor_rollout_ref.rollout.tensor_model_parallel_size"]) == (2, "0,1", 2)


def test_docs_table_is_the_mapping():
    with open(os.path.join(ROOT, "docs", "paper.md"), encoding="utf-8") as f:
        section = f.read().split("## 10.")[1]
    assert export.markdown_table() in section
    assert "python export.py" in section.split("|")[0]  # §10 leads with the command, before the table


def test_run_folder_prints_the_command(tmp_path, capsys):
    cfg = config.load_config(os.path.join(ROOT, "configs", "tiny.yaml"))
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg))
    assert export.main([str(tmp_path)]) == 0
    assert "python train.py --config-name base" in capsys.readouterr().out


@pytest.mark.parametrize("argv, said", [(["/no/such/run"], "no run folder at /no/such/run"),
                                        (["EMPTY"], "has no config.yaml"),
                                        (["--to", "verl", "EMPTY"], "unknown export target 'verl'"),
                                        (["--config", "/no/such.yaml"], "/no/such.yaml")])
def test_bad_input_is_one_line(argv, said, tmp_path, capsys):
    argv = [str(tmp_path) if a == "EMPTY" else a for a in argv]
    assert export.main(argv) == 2
    err = capsys.readouterr().err
    assert said in err and err.count("\n") == 1 and "Traceback" not in err
    if "EMPTY" in argv or "config.yaml" in said:
        assert str(tmp_path) in err


def test_the_trainer_exports_through_the_same_command(capsys):
    """python ragen_mini.py --export ragen --config FILE prints what export.py prints, and exits 0; an unknown
    target exits 2 with export.py's one-line message."""
    import ragen_mini

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    BANDIT_YAML = os.path.join(root, "configs", "bandit.yaml")

    assert export.main(["--to", "ragen", "--config", BANDIT_YAML]) == 0
    expected = capsys.readouterr().out
    with pytest.raises(SystemExit) as done:
        ragen_mini.main(["--export", "ragen", "--config", BANDIT_YAML])
    assert done.value.code == 0 and capsys.readouterr().out == expected and "python train.py" in expected
    with pytest.raises(SystemExit) as refused:
        ragen_mini.main(["--export", "nowhere", "--config", BANDIT_YAML])
    assert refused.value.code == 2 and "unknown export target 'nowhere'" in capsys.readouterr().err


# ---- the printout is data, never code ------------------------------------------------------------------------
HOSTILE = ["x\ntouch PWNED #", "x\rtouch PWNED", "$(touch PWNED)", "`touch PWNED`", "x'; touch PWNED; '",
           "x\u2028touch PWNED", "x\u2029touch PWNED", "x\x85touch PWNED", "x\x0btouch PWNED",
           "x\x0ctouch PWNED", "x\x1b[2K\rtouch PWNED #", "x\x00touch PWNED", '"; touch PWNED; "',
           "x\\\ntouch PWNED", "${oc.env:HOME}$(touch PWNED)"]
# a stand-in for python and git: writes its arguments down (NUL after each) and exits with STATUS
STUB = '#!/bin/sh\nprintf \'%s\\0\' "$@" >> "$STUB_LOG/$(basename "$0").args"\nexit STATUS\n'
SHELLS = [shell for shell in ("sh", "bash") if shutil.which(shell)]


def source(text, folder, git_status=0):
    """Run TEXT as the user would (`. ./cmd.sh`) in each shell, in FOLDER, with stub `python` and `git`
    executables first on PATH (the rest of PATH kept, so an injected `touch` would run): they write down their
    arguments and exit, git with GIT_STATUS. Returns [(exit status, {stub: [its argument lists]})], a shell
    each."""
    stubs = os.path.join(folder, "stubs")
    os.makedirs(stubs, exist_ok=True)
    for name in ("python", "git"):
        with open(os.path.join(stubs, name), "w") as f:
            f.write(STUB.replace("STATUS", str(git_status) if name == "git" else "0"))
        os.chmod(os.path.join(stubs, name), 0o755)
    with open(os.path.join(folder, "cmd.sh"), "w", encoding="utf-8") as f:
        f.write(text + "\n")
    results = []
    for shell in SHELLS:
        for name in ("python", "git"):
            if os.path.exists(os.path.join(stubs, name + ".args")):
                os.remove(os.path.join(stubs, name + ".args"))
        env = {**os.environ, "PATH": stubs + os.pathsep + os.environ["PATH"], "STUB_LOG": stubs}
        done = subprocess.run([shutil.which(shell), "-c", ". ./cmd.sh"], cwd=folder, env=env,
                              capture_output=True, timeout=60)
        calls = {}
        for name in ("python", "git"):
            if os.path.exists(os.path.join(stubs, name + ".args")):
                with open(os.path.join(stubs, name + ".args"), encoding="utf-8") as f:
                    calls[name] = f.read().split("\0")[:-1]
        results.append((done.returncode, calls))
    return results


def export_run(run, capsys):
    """export.main on a run folder, as `ragen_mini.py --export ragen RUN` calls it: (status, out, err). An
    exception escaping it (a traceback for the user) fails the test here."""
    status = export.main([str(run)])
    out, err = capsys.readouterr()
    return status, out, err


def write_run(folder, cfg):
    os.makedirs(folder, exist_ok=True)
    text = yaml.safe_dump(cfg)
    assert yaml.safe_load(text) == cfg  # the hostile value reaches config.yaml as it is
    with open(os.path.join(folder, "config.yaml"), "w", encoding="utf-8") as f:
        f.write(text)


def test_the_harness_sees_an_injected_command(tmp_path):
    """The check below can fail: the fault as it was (a value copied into a comment line as it is) makes
    PWNED."""
    source("# model.name=x\ntouch PWNED #: not a Qwen model", str(tmp_path))
    assert (tmp_path / "PWNED").exists()


# where a value reaches the command, if it does: ragen-mini key -> RAGEN path
CARRIED = {"run_dir": "trainer.experiment_name", "model.name": "model_path",
           "env.kwargs.high_name": "custom_envs.Bandit.env_config.hi_arm_name",
           "env.kwargs.low_name": "custom_envs.Bandit.env_config.lo_arm_name"}


def _hostile_cases(hostile):
    """(what, run folder name, config, the RAGEN path the value is to reach or None) for the hostile string in
    every string-valued key of the schema, in env.kwargs' keys and values, in model.name where it reaches the
    command (algo.train_tokens=after_system: with sampled, a model without "qwen" in its name is only listed
    as lost, in a comment), and in the run folder's name."""
    schema = config.read_schema()
    cases = []
    for key in config._flat_keys(schema):
        if isinstance(config._get(schema, key), str):
            cfg = config.load_config(None)
            section, _, name = key.rpartition(".")
            (cfg[section] if section else cfg)[name] = hostile
            cases.append((key, "run", cfg, CARRIED.get(key) if key != "model.name" else None))
    cfg = config.load_config(None, ["algo.train_tokens=after_system"])
    cfg["model"]["name"] = hostile
    cases.append(("model.name", "run", cfg, CARRIED["model.name"]))
    cfg = config.load_config(None)
    cfg["env"]["kwargs"] = {hostile: 1}
    cases.append(("env.kwargs", "run", cfg, None))
    for name in ("high_name", "low_name"):
        cfg = config.load_config(None, ["env.name=bandit"])
        cfg["env"]["kwargs"] = {name: hostile}
        cases.append(("env.kwargs", "run", cfg, CARRIED[f"env.kwargs.{name}"]))
    if "\0" not in hostile and "/" not in hostile:  # a file name cannot hold these
        cases.append(("the run folder", "run" + hostile, config.load_config(None), None))
    return cases


@pytest.mark.parametrize("hostile", HOSTILE)
def test_no_value_from_a_run_folder_runs_as_a_command(hostile, tmp_path, capsys):
    """For the hostile string in each place a run folder holds text, the printout, sourced in sh
    (and bash), creates no file PWNED and exits 0, and the command's words reach `python` as printed; or the
    export refuses with one line naming the key, no traceback. Where the value is in the command, it arrives
    as it was (read back from the Hydra quoting)."""
    arrived = set()
    for i, (what, folder_name, cfg, path) in enumerate(_hostile_cases(hostile)):
        folder = tmp_path / str(i)
        run = folder / folder_name
        write_run(str(run), cfg)
        status, out, err = export_run(run, capsys)
        if status:
            assert status == 2 and not out and "Traceback" not in err, (what, err)
            assert err.startswith("export: ") and err.count("\n") == 1 and err[:-1].isprintable(), (what, err)
            assert what in err, (what, err)
            continue
        assert all(line.isprintable() for line in out.splitlines()), what
        for status, calls in source(out, str(folder)):
            assert not (folder / "PWNED").exists() and status == 0, (what, out)
            args = calls["python"]
            assert args[:3] == ["train.py", "--config-name", "base"]
            printed = dict(arg.partition("=")[::2] for arg in args[3:])
            assert {p: parse_value(v) for p, v in printed.items()} == parse_command(out)
            if path:
                assert parse_value(printed[path]) == hostile, (what, path, printed.get(path))
                arrived.add(path)
    # not vacuous: a value with only printable characters needs quoting, no refusal, and gets to every place
    if hostile.isprintable():
        assert arrived == set(CARRIED.values())


HOSTILE_RUNS = [("model.name", "config"), ("the run folder", "name")]  # (what holds the command, where it is)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """{place: (the folder of its run, `python ragen_mini.py --export ragen RUN`)} of both runs below, two at a
    time: each process spends seconds importing torch."""
    def export_run(place):
        folder = tmp_path_factory.mktemp("export")
        cfg = config.load_config(None)
        if place == "config":
            cfg["model"]["name"] = "meta-llama/Llama-3.2-1B\ntouch PWNED #"
        run = folder / ("run\ntouch PWNED #" if place == "name" else "run")
        write_run(str(run), cfg)
        command = [sys.executable, os.path.join(ROOT, "ragen_mini.py"), "--export", "ragen", str(run)]
        return folder, subprocess.run(command, capture_output=True, text=True, timeout=300)
    places = [place for _, place in HOSTILE_RUNS]
    return dict(zip(places, two_at_once(export_run, places)))


@pytest.mark.slow
@pytest.mark.parametrize("what, place", HOSTILE_RUNS)
def test_ragen_mini_command_line_prints_no_command_from_the_run(what, place, exported):
    """End to end, as a user runs it: `python ragen_mini.py --export ragen RUN > cmd.sh; . cmd.sh`."""
    folder, done = exported[place]
    assert done.returncode == 0, done.stderr
    for status, calls in source(done.stdout, str(folder)):
        assert status == 0 and not (folder / "PWNED").exists() and calls["python"][0] == "train.py"
    assert "run\\ntouch PWNED #" in done.stdout if place == "name" else "1B\\ntouch PWNED #" in done.stdout


@pytest.mark.parametrize("ch", ["\n", "\r", "\x0b", "\x0c", "\x1b", "\x00", "\x85", "\u2028", "\u2029", "\t",
                                "\u202e", "\udc80"])
def test_a_comment_is_one_printable_line(ch):
    """Python's splitlines() breaks at every line separator Unicode knows; a comment must stay one line, and
    show the character (a backslash escape) rather than drop it."""
    line = export.comment(f"a{ch}b")
    assert line.startswith("# ") and len(line.splitlines()) == 1 and line.isprintable() and line != "# ab"
    with pytest.raises(export.ExportError, match="model.name"):
        export.shell_word(f"model_path=a{ch}b", "model.name")


# {value: its override text}, each text read back as that value by hydra-core 1.3.8 and omegaconf 2.3.1
# (OverridesParser, then OmegaConf.create({"a": value}).a; hydra is no dependency of ragen-mini, so the
# readings are stored). Unescaped, "${oc.env:HOME}" reads as the home folder: an interpolation ran.
HYDRA_READS = {"${oc.env:HOME}": '"\\${oc.env:HOME}"', "a\\b": '"a\\b"', "a\\": '"a\\\\"', 'it"s': '"it\\"s"',
               "x,y": '"x,y"', "$(touch P)": '"$(touch P)"', "a\\${x}": '"a\\\\\\${x}"', "aé": '"aé"'}
VALUES = list(HYDRA_READS) + ["\\${x}", 'a\\"b', "x'; y; '", "${", "a$b", "null", "True", "1e5", "", "a=b",
                              "[1,2]", "{a: 1}", "${oc.env:HOME}\\", "Qwen/Qwen2.5-0.5B-Instruct"]


def test_hydra_values_keep_every_character():
    """hydra_value against the readings above: `${` is escaped (no interpolation runs), backslashes only
    before a quote, before `${` or at the end; and parse_value, which the tests read back with, is its
    reverse."""
    for value, text in HYDRA_READS.items():
        assert export.hydra_value(value) == text, value
    for value in VALUES:
        assert parse_value(export.hydra_value(value)) == value, value


def test_ragen_paper_printout_is_unchanged_but_for_the_checkout_and_lora(tmp_path):
    """The printout as it was before the checkout and LoRA lines, written out: those lines taken away, the
    rest is the same to the character (no quoting was needed for these values)."""
    before = "\n".join([
        "# RAGEN command for the config, to run in a RAGEN checkout (config/base.yaml as at 1319230, "
        "config/envs.yaml as at 3e17651, verl 1e47e41); values at RAGEN's default left out",
        "python train.py --config-name base \\",
        "    seed.train=0 \\",
        "    model_path=Qwen/Qwen2.5-0.5B-Instruct \\",
        "    actor_rollout_ref.model.enable_gradient_checkpointing=False \\",
        "    critic.model.enable_gradient_checkpointing=False \\",
        "    actor_rollout_ref.actor.clip_ratio_c=1000000000.0 \\",
        "    micro_batch_size_per_gpu=4 \\",
        "    enable_response_mask=False \\",
        "    es_manager.val.env_groups=256 \\",
        "    'es_manager.val.env_configs.n_groups=[256]' \\",
        "    es_manager.val.group_size=1 \\",
        "    seed.val=1000000 \\",
        "    trainer.generations_to_log_to_wandb.val=4 \\",
        "    trainer.save_freq=50",
        "# GPUs: 1 (--gpus N sets trainer.n_gpus_per_node, system.CUDA_VISIBLE_DEVICES and "
        "actor_rollout_ref.rollout.tensor_model_parallel_size together; RAGEN's train.py asserts they agree)",
        "# Carried, but not the same:",
        "#   - seed: RAGEN's seed.train is the first training env seed (then one more per group), "
        "ragen-mini's seeds the generator that draws them, and the envs build other puzzles from a seed: "
        "the same number gives other training puzzles"])
    text = export.ragen_command(config.load_config(os.path.join(ROOT, "configs", "ragen-paper.yaml")))
    new = [line for line in text.splitlines()
           if line.startswith(("# git checkout:", "# lora.rank=0", "git checkout ", "    lora.rank=0 "))]
    assert len(new) == 4
    assert "\n".join(line for line in text.splitlines() if line not in new) == before
    overrides = [shlex.split(line.rstrip(" \\"))[0] for line in text.splitlines() if line.startswith("    ")]
    assert overrides[0] == "lora.rank=0" and "es_manager.val.env_configs.n_groups=[256]" in overrides
    for status, calls in source(text, str(tmp_path)):  # and it runs: checkout, then training
        assert status == 0 and calls["python"] == ["train.py", "--config-name", "base"] + overrides


# ---- the export trains what ragen-mini trains ---------------------------------------------------
def stored_sections():
    with open(os.path.join(ROOT, "docs", "ragen_config", "key_tree.yaml"), encoding="utf-8") as f:
        return yaml.safe_load(f)


def test_lora_is_turned_off_with_a_key_of_the_tree():
    """RAGEN's base.yaml at the tree's commit trains LoRA adapters by default (lora.rank 16, which the actor's
    and the critic's lora_rank follow); ragen-mini trains every weight, so every command sets lora.rank=0 and
    says why."""
    base = stored_sections()["ragen_base"]["keys"]
    assert base["lora.rank"] > 0  # the fault: on by default there
    assert base["actor_rollout_ref.model.lora_rank"] == base["critic.model.lora_rank"] == "${lora.rank}"
    for name, cfg in configs():
        text = export.ragen_command(cfg)
        assert parse_command(text)["lora.rank"] == 0, name
        assert re.search(r"^# lora\.rank=0, not RAGEN's default 16: .*LoRA", text, flags=re.M), name


def test_the_checkout_names_the_trees_commit(tmp_path):
    """The commit comes from the tree file's structured `source:` of ragen_base, read here apart from the
    header lines export.py reads; training runs only if the checkout worked."""
    sections = stored_sections()
    repository, _, rest = sections["ragen_base"]["source"].partition("@")
    commit = rest.split(":")[0]
    assert repository == "RAGEN-AI/RAGEN" and re.fullmatch(r"[0-9a-f]{40}", commit)
    verl_commit = sections["verl_ppo_trainer"]["source"].partition("@")[2].split(":")[0]
    text = export.ragen_command(config.load_config(None))
    lines = text.splitlines()
    checkout = lines.index(f"git checkout {commit} && git submodule update --init verl && \\")
    assert lines[checkout + 1].startswith("python train.py --config-name base")
    assert all(line.startswith("#") for line in lines[:checkout]) and verl_commit[:7] in lines[1]
    for status, calls in source(text, str(tmp_path)):
        assert status == 0 and calls["git"] == ["checkout", commit, "submodule", "update", "--init", "verl"]
        assert calls["python"][:3] == ["train.py", "--config-name", "base"]
    for status, calls in source(text, str(tmp_path), git_status=1):
        assert status != 0 and "python" not in calls  # no training on whatever commit was checked out


def test_every_printed_key_is_in_the_tree_at_the_checked_out_commit():
    """What is printed resolves in the stored tree, and trainer.local_log_dir (printed with a run_dir) is in
    base.yaml at the commit checked out, not only in verl's file."""
    tree = stored_tree()
    base = stored_sections()["ragen_base"]["keys"]
    for name, cfg in configs():
        chosen = printed(cfg)
        assert set(chosen) <= set(tree), (name, set(chosen) - set(tree))
    chosen = printed(config.load_config(None, ["run_dir=runs/a"]))
    assert chosen["trainer.local_log_dir"] == "runs" and "trainer.local_log_dir" in base
    assert "lora.rank" in base
