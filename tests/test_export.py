"""export.py: the RAGEN command of a ragen-mini config (docs/paper.md §10). The facts it is held to come
from outside the code: RAGEN's key tree as stored from its repository, a command written out by hand for
one preset, and the docs table."""
import glob
import os
import re
import sys

import pytest
import yaml

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import config  # noqa: E402
import export  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PRESETS = [os.path.join(ROOT, "config.yaml")] + sorted(glob.glob(os.path.join(ROOT, "configs", "*.yaml")))
# beyond the presets: each branch of the table's conversions once
EXTRA = [["algo.estimator=grpo", "algo.kl_coef=0.001", "algo.grpo_kl=k1"], ["algo.kl_coef=0.001"],
         ["env.kwargs={dim_room: 8, num_boxes: 2}"], ["env.name=bandit", "env.kwargs={high_name: Teacher}"],
         ["eval.every=0", "checkpoint.every=0", "algo.dual_clip=3.0", "algo.filter_largest=false"],
         ["algo.ppo_epochs=4", "run_dir=runs/a", "eval.k=4", "rollout.think=false"],
         ["algo.loss_agg=micro-batch-mean", "algo.micro_batch_size=8", "algo.micro_batch_tokens=0"]]


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


def printed(cfg, gpus=1):
    return export.parse_command(export.ragen_command(cfg, gpus))


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
        back = export.to_ragen_mini(printed(cfg))
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
