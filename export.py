"""Export a ragen-mini run's settings as a RAGEN training command (several GPUs, vLLM, verl), checked
against RAGEN's own config key tree, stored in docs/ragen_config/key_tree.yaml (docs/paper.md §10).

    python export.py runs/sokoban-0101-1200              # a run folder: its config.yaml
    python export.py --config configs/tiny.yaml env.name=bandit
    python export.py --gpus 4 --config config.yaml      # the GPU count RAGEN is to use

MAPPING below is the one table of ragen-mini keys and RAGEN paths: the command, the table in docs/paper.md
§10 and the reading back that tests/test_export.py checks the command with (its round trip) all come from it.
Values equal to RAGEN's own default are left out of the command.

The printout is promised to run as it is (`... > cmd.sh; . cmd.sh` in a RAGEN checkout), and much of it
comes from a run folder, which may hold anything: every comment line is made by comment() and every word of a
command by shell_word() (see "printing" below), so that no text from a run can become a command.

    >>> import config
    >>> lines = ragen_command(config.load_config("configs/ragen-paper.yaml")).splitlines()
    >>> print(next(line for line in lines if line.startswith("git")))
    git checkout 131923071cc681ffab661507a1447fbc25e87a36 && git submodule update --init verl && \\
    >>> print(next(line for line in lines if line.startswith("python")))
    python train.py --config-name base \\
    >>> overrides(config.load_config(None, ["algo.clip_high=0.2"]))["actor_rollout_ref.actor.clip_ratio_high"]
    0.2
"""
import argparse
import os
import re
import shlex
import sys

import yaml

import config

HERE = os.path.dirname(os.path.abspath(__file__))
KEY_TREE = os.path.join(HERE, "docs", "ragen_config", "key_tree.yaml")
TARGETS = ("ragen",)
# env.name -> custom_envs entry
TAGS = {"sokoban": "SimpleSokoban", "frozenlake": "FrozenLake", "bandit": "Bandit"}
# tiny.IN_PROCESS_MODELS, copied: importing tiny loads transformers
IN_PROCESS = ("tiny", "random-qwen2.5-0.5b")
# verl's dual clip cannot be switched off; no ratio reaches this bound, so none is clipped
DUAL_CLIP_OFF = 1e9
# env.kwargs that RAGEN's env config spells another way (ragen-mini name -> RAGEN names); the rest cannot
# carry
ENV_KWARGS = {"sokoban": {"dim_room": ("dim_x", "dim_y"), "num_boxes": ("num_boxes",)},
              "bandit": {"high_name": ("hi_arm_name",), "low_name": ("lo_arm_name",)}, "frozenlake": {}}
# What every ragen-mini run does though no config key says so, {RAGEN path: (value, why)}: in every command,
# unless RAGEN's default is the same. base.yaml at the key tree's commit sets lora.rank: 16, which
# actor_rollout_ref.model.lora_rank and critic.model.lora_rank follow, and RAGEN's fsdp_workers.py trains LoRA
# adapters whenever that is above 0 (checked in RAGEN's source at that commit; 0 on RAGEN's main).
ALWAYS = {"lora.rank": (0, "ragen-mini trains every weight of the actor and the critic; RAGEN trains LoRA "
                           "adapters on both (actor_rollout_ref.model.lora_rank and critic.model.lora_rank "
                           "follow lora.rank) whenever it is above 0")}
# The printout's commands: first the RAGEN commit whose base.yaml the key tree holds (read from the tree's
# header, which names it) with verl, its submodule, at that commit's version, then training
CHECKOUT = (("git", "checkout", "<commit>"), ("git", "submodule", "update", "--init", "verl"))
TRAIN = ("python", "train.py", "--config-name", "base")


class ExportError(ValueError):
    pass


# ---- the table -------------------------------------------------------------------------------------------
# One entry per ragen-mini key (a section name covers all of its keys). Fields, all but "key" optional:
#   paths   RAGEN's Hydra override paths; "<tag>" is the env's entry in custom_envs. None: no counterpart.
#   to      value, cfg -> {path: value}. Default: the value on every path.
#   back    get, tag -> value, with get(path) RAGEN's value after the overrides. Default: get(paths[0]). The
#           tests read a printed command back with it (tests/test_export.py, to_ragen_mini).
#   lost    cfg, gpus -> why this config's value cannot carry over, or None. Listed under the command and left
#           out of the round trip.
#   differs cfg, gpus -> a warning for a value that carries over but means something else there, or None.
#   note    the docs table's note.
# A key with no paths and no lost is a knob of this one process (memory, speed, metrics, its run folder).
def _same(*paths, note=""):
    return {"paths": list(paths), "note": note}


def _mapped(path, ours_to_theirs, note):
    """A setting with a few values, each spelled another way there: {ours: theirs}, read back the other
    way."""
    theirs_to_ours = {v: k for k, v in ours_to_theirs.items()}
    return {"paths": [path], "to": lambda value, cfg: {path: ours_to_theirs[value]},
            "back": lambda get, tag: theirs_to_ours[get(path)], "note": note}


MAPPING = [
    {"key": "seed", **_same("seed.train"),
     "differs": lambda cfg, gpus: "seed: RAGEN's seed.train is the first training env seed (then one more "
                                  "per group), ragen-mini's seeds the generator that draws them, and the "
                                  "envs build other puzzles from a seed: the same number gives other "
                                  "training puzzles",
     "note": "the first env seed there (+1 per group), not a generator's seed: other puzzles"},
    {"key": "overwrite", "note": "ragen-mini's run folder"},
    {"key": "code.commit", "note": "ragen-mini's record of the code a run ran"},
    {"key": "code.clean", "note": "ragen-mini's record of the code a run ran"},
    {"key": "run_dir", "paths": ["trainer.local_log_dir", "trainer.experiment_name"],
     "to": lambda value, cfg: dict(zip(["trainer.local_log_dir", "trainer.experiment_name"],
                                       os.path.split(os.path.normpath(value)))) if value else {},
     "back": lambda get, tag: "" if (get("trainer.local_log_dir"),
                                     get("trainer.experiment_name")) == ("results/", "test")
     else os.path.join(get("trainer.local_log_dir"), get("trainer.experiment_name")),
     "note": "the folder, then its last name"},
    {"key": "env.name", "paths": ["es_manager.train.env_configs.tags", "es_manager.val.env_configs.tags"],
     "to": lambda value, cfg: {"es_manager.train.env_configs.tags": [TAGS[value]],
                               "es_manager.val.env_configs.tags": [TAGS[value]]},
     "back": lambda get, tag: {v: k for k, v in TAGS.items()}[get("es_manager.train.env_configs.tags")[0]],
     "note": "`[SimpleSokoban]`, `[FrozenLake]` or `[Bandit]`, training and validation"},
    {"key": "env.kwargs", "paths": ["custom_envs.<tag>.env_config"],
     "to": lambda value, cfg: {f"custom_envs.{TAGS[cfg['env']['name']]}.env_config.{theirs}": v
                               for k, v in value.items()
                               for theirs in ENV_KWARGS[cfg["env"]["name"]].get(k, ())},
     "back": lambda get, tag: _kwargs_back(get, tag),
     "lost": lambda cfg, gpus: _kwargs_lost(cfg),
     "note": "Sokoban `dim_room` as `dim_x` and `dim_y`, `num_boxes`; Bandit `high_name`, `low_name` as "
             "`hi_arm_name`, `lo_arm_name`; no other"},
    {"key": "env.max_turns", **_same("agent_proxy.max_turn")},
    {"key": "env.max_actions_per_turn", **_same("agent_proxy.max_actions_per_turn")},
    {"key": "env.max_actions", **_same("custom_envs.<tag>.max_actions_per_traj")},
    {"key": "env.format_penalty", **_same("es_manager.format_penalty")},
    {"key": "env.spaced_grid", "lost": lambda cfg, gpus: cfg["env"]["spaced_grid"] and
     "env.spaced_grid=true: RAGEN draws the grid without spaces (#_P#)", "note": "RAGEN draws `#_P#`"},
    {"key": "model.name", **_same("model_path"),
     "lost": lambda cfg, gpus: _model_lost(cfg["model"]["name"], cfg["algo"]["train_tokens"]),
     "note": "a Hugging Face id or folder; the in-process models (`tiny`, `random-qwen2.5-0.5b`) and .gguf "
             "files have none"},
    {"key": "model.critic", "note": "a critic comes with `algorithm.adv_estimator=gae`, as here"},
    {"key": "model.gradient_checkpointing",
     **_same("actor_rollout_ref.model.enable_gradient_checkpointing",
             "critic.model.enable_gradient_checkpointing", note="memory only; verl's default is on")},
    {"key": "model.tokenizer_vocab", "note": "the in-process models only"},
    {"key": "rollout.groups", "paths": ["es_manager.train.env_groups",
                                        "es_manager.train.env_configs.n_groups"],
     "to": lambda value, cfg: {"es_manager.train.env_groups": value,
                               "es_manager.train.env_configs.n_groups": [value]}},
    {"key": "rollout.group_size", **_same("es_manager.train.group_size")},
    {"key": "rollout.temperature", **_same("actor_rollout_ref.rollout.temperature")},
    {"key": "rollout.max_new_tokens", **_same("actor_rollout_ref.rollout.response_length")},
    {"key": "rollout.stated_max_tokens", **_same("custom_envs.<tag>.max_tokens")},
    {"key": "rollout.min_new_tokens", "lost": lambda cfg, gpus: cfg["rollout"]["min_new_tokens"] > 0 and
     f"rollout.min_new_tokens={cfg['rollout']['min_new_tokens']}: a benchmark setting, RAGEN has none",
     "note": "benchmarks only"},
    {"key": "rollout.max_context", **_same("actor_rollout_ref.rollout.max_model_len")},
    {"key": "rollout.think", **_same("agent_proxy.enable_think")},
    {"key": "rollout.engine", "note": "this process's speed; RAGEN samples with vLLM"},
    {"key": "rollout.delete_special_strings",
     "lost": lambda cfg, gpus: not cfg["rollout"]["delete_special_strings"] and
     "rollout.delete_special_strings=false: RAGEN always deletes the tags inside an answer "
     "(docs/paper.md §9.6)",
     "note": "always on in RAGEN (§9.6)"},
    {"key": "rollout.clean_history", "lost": lambda cfg, gpus: not cfg["rollout"]["clean_history"] and
     "rollout.clean_history=false: RAGEN always keeps the cleaned reply text (docs/paper.md §9.2)",
     "note": "always on in RAGEN (§9.2)"},
    {"key": "rollout.mi_groups", "note": "a metric of ragen-mini's"},
    {"key": "rollout.mi_samples", "note": "a metric of ragen-mini's"},
    {"key": "algo.estimator", **_same("algorithm.adv_estimator", note="`gae` or `grpo`")},
    {"key": "algo.gamma", **_same("algorithm.gamma")},
    {"key": "algo.lam", **_same("algorithm.lam")},
    {"key": "algo.gae_skip_observations",
     "lost": lambda cfg, gpus: (cfg["algo"]["estimator"] == "gae" and cfg["algo"]["gae_skip_observations"]
                                and cfg["algo"]["gamma"] * cfg["algo"]["lam"] < 1) and
     f"algo.gae_skip_observations=true with gamma={cfg['algo']['gamma']}, lam={cfg['algo']['lam']}: "
     "RAGEN's verl steps GAE through the env's tokens too, so advantages decay over them "
     "(docs/paper.md §9.5)",
     "note": "verl steps through the env's tokens: the same only at gamma = lam = 1 (§9.5)"},
    {"key": "algo.grpo_std_normalize", **_same("algorithm.norm_adv_by_std_in_grpo")},
    {"key": "algo.filter_ratio", **_same("actor_rollout_ref.rollout.rollout_filter_ratio")},
    {"key": "algo.filter_largest", **_mapped("actor_rollout_ref.rollout.rollout_filter_type",
                                             {True: "std", False: "std_rev"},
                                             "`std` keeps the largest std, `std_rev` the smallest")},
    {"key": "algo.kl_coef", "paths": ["algorithm.use_kl_in_reward", "algorithm.kl_ctrl.kl_coef",
                                      "actor_rollout_ref.actor.use_kl_loss",
                                      "actor_rollout_ref.actor.kl_loss_coef"],
     "to": lambda value, cfg: ({"algorithm.use_kl_in_reward": value > 0, "algorithm.kl_ctrl.kl_coef": value}
                               if cfg["algo"]["estimator"] == "gae" else
                               {"actor_rollout_ref.actor.use_kl_loss": value > 0,
                                "actor_rollout_ref.actor.kl_loss_coef": value}),
     "back": lambda get, tag: (get("algorithm.kl_ctrl.kl_coef") if get("algorithm.use_kl_in_reward") else
                               get("actor_rollout_ref.actor.kl_loss_coef")
                               if get("actor_rollout_ref.actor.use_kl_loss") else 0.0),
     "note": "PPO: the first two (k1 in the reward, `algorithm.kl_penalty=kl`); GRPO: the last two "
             "(in the loss)"},
    {"key": "algo.grpo_kl", **_mapped("actor_rollout_ref.actor.kl_loss_type",
                                       {"k1": "kl", "k3": "low_var_kl"},
                                       "`kl` = k1, `low_var_kl` = k3 (clamped to [-10, 10])")},
    {"key": "algo.clip_low", **_same("actor_rollout_ref.actor.clip_ratio_low")},
    {"key": "algo.clip_high", **_same("actor_rollout_ref.actor.clip_ratio_high")},
    {"key": "algo.dual_clip", "paths": ["actor_rollout_ref.actor.clip_ratio_c"],
     "to": lambda value, cfg: {"actor_rollout_ref.actor.clip_ratio_c": value or DUAL_CLIP_OFF},
     "back": lambda get, tag: 0.0 if get("actor_rollout_ref.actor.clip_ratio_c") >= DUAL_CLIP_OFF
     else get("actor_rollout_ref.actor.clip_ratio_c"),
     "note": f"always on in verl (3.0 by default): 0 (off) becomes {DUAL_CLIP_OFF:g}, "
             "a bound no ratio reaches"},
    {"key": "algo.entropy_coef", **_same("actor_rollout_ref.actor.entropy_coeff")},
    {"key": "algo.value_clip", **_same("critic.cliprange_value")},
    {"key": "algo.ppo_epochs", **_same("actor_rollout_ref.actor.ppo_epochs", "critic.ppo_epochs",
                                       note="the critic's follows the actor's")},
    {"key": "algo.mini_batch_size", **_same("ppo_mini_batch_size")},
    {"key": "algo.micro_batch_size", **_same("micro_batch_size_per_gpu"),
     "differs": lambda cfg, gpus: gpus > 1 and
     f"algo.micro_batch_size={cfg['algo']['micro_batch_size']}: micro_batch_size_per_gpu is per GPU, so each "
     f"forward/backward step covers {gpus} x {cfg['algo']['micro_batch_size']} trajectories",
     "note": "per GPU there"},
    {"key": "algo.micro_batch_tokens",
     "lost": lambda cfg, gpus: cfg["algo"]["loss_agg"] == "micro-batch-mean"
     and cfg["algo"]["micro_batch_tokens"] > 0
     and f"algo.micro_batch_tokens={cfg['algo']['micro_batch_tokens']}: RAGEN's micro-batches are always "
         "micro_batch_size_per_gpu rows, and with micro-batch-mean the rows of a micro-batch set each "
         "token's weight",
     "note": "memory only, except with `algo.loss_agg=micro-batch-mean`"},
    {"key": "algo.score_micro_batch_tokens", "note": "memory only"},
    {"key": "algo.logits_chunk", "note": "this process's memory"},
    {"key": "algo.loss_agg", "paths": ["actor_rollout_ref.actor.loss_agg_mode"],
     "to": lambda value, cfg: {"actor_rollout_ref.actor.loss_agg_mode": "token-mean"},
     "back": lambda get, tag: "token-mean" if _one_micro_batch(get("ppo_mini_batch_size"),
                                                               get("micro_batch_size_per_gpu"),
                                                               get("trainer.n_gpus_per_node"))
     else "micro-batch-mean",
     "lost": lambda cfg, gpus: (cfg["algo"]["loss_agg"] == "token-mean" and not _one_micro_batch(
         cfg["algo"]["mini_batch_size"], cfg["algo"]["micro_batch_size"], gpus)) and
     "algo.loss_agg=token-mean: RAGEN at this commit takes a token mean per micro-batch and averages those "
     "(ragen/workers/actor/dp_actor.py), ragen-mini's micro-batch-mean; the two agree only with one "
     "micro-batch per mini-batch on one GPU (micro_batch_size_per_gpu=ppo_mini_batch_size)",
     "note": "`token-mean` there is a token mean per micro-batch, then their mean: ragen-mini's "
             "`micro-batch-mean` (the same as `token-mean` with one micro-batch per mini-batch on one GPU)"},
    {"key": "algo.train_tokens", **_mapped("enable_response_mask", {"sampled": True, "after_system": False},
                                           "`True` = `sampled`, `False` = `after_system` (§9.1)")},
    {"key": "algo.actor_lr", **_same("actor_rollout_ref.actor.optim.lr")},
    {"key": "algo.critic_lr", **_same("critic.optim.lr")},
    {"key": "algo.weight_decay", **_same("actor_rollout_ref.actor.optim.weight_decay",
                                         "critic.optim.weight_decay")},
    {"key": "algo.grad_clip", **_same("actor_rollout_ref.actor.grad_clip", "critic.grad_clip")},
    {"key": "train.iterations", **_same("trainer.total_training_steps")},
    {"key": "train.device", "lost": lambda cfg, gpus: cfg["train"]["device"] == "cpu" and
     "train.device=cpu: RAGEN needs GPUs", "note": "the GPU count: `--gpus N` (see below)"},
    {"key": "train.time_limit_min", "lost": lambda cfg, gpus: cfg["train"]["time_limit_min"] > 0 and
     f"train.time_limit_min={cfg['train']['time_limit_min']:g}: RAGEN has no time limit; it runs "
     f"trainer.total_training_steps={cfg['train']['iterations']}", "note": "RAGEN has no time limit"},
    {"key": "train.threads", "note": "the CPU threads of this one process"},
    {"key": "train.stall_min", "note": "this process's watchdog"},
    {"key": "train.log_to", "note": "where this process also logs; RAGEN's is `trainer.logger`"},
    {"key": "eval.every", "paths": ["trainer.test_freq", "trainer.val_before_train"],
     "to": lambda value, cfg: {"trainer.test_freq": value} if value else
     {"trainer.test_freq": 0, "trainer.val_before_train": False},
     "back": lambda get, tag: max(get("trainer.test_freq"), 0),
     "note": "0 (never) also turns off the evaluation before training"},
    {"key": "eval.num_seeds", "paths": ["es_manager.val.env_groups", "es_manager.val.env_configs.n_groups"],
     "to": lambda value, cfg: {"es_manager.val.env_groups": value,
                               "es_manager.val.env_configs.n_groups": [value]},
     "note": "one group per evaluation seed"},
    {"key": "eval.k", **_same("es_manager.val.group_size",
                              note="rollouts per seed; RAGEN reports their mean success, no pass@k")},
    {"key": "eval.seed_offset", **_same("seed.val"),
     "differs": lambda cfg, gpus: _seeds_meet(cfg),
     "note": "the first evaluation seed in both; RAGEN's training seeds count up from `seed.train`"},
    {"key": "eval.temperature", **_same("actor_rollout_ref.rollout.val_kwargs.temperature")},
    {"key": "eval.samples", **_same("trainer.generations_to_log_to_wandb.val", note="to wandb there")},
    {"key": "checkpoint.every", "paths": ["trainer.save_freq"],
     "to": lambda value, cfg: {"trainer.save_freq": value or -1},
     "back": lambda get, tag: max(get("trainer.save_freq"), 0), "note": "0 (never) is -1 there"},
    {"key": "warmup", "lost": lambda cfg, gpus: cfg["warmup"]["steps"] > 0 and
     f"warmup.steps={cfg['warmup']['steps']}: RAGEN has no format warm-up; its run starts from the model "
     "as it is",
     "note": "RAGEN has no format warm-up"},
]

GPU_PATHS = ("trainer.n_gpus_per_node", "system.CUDA_VISIBLE_DEVICES",
             "actor_rollout_ref.rollout.tensor_model_parallel_size")  # train.py asserts the three agree


def _one_micro_batch(mini, micro, gpus):
    return gpus == 1 and micro >= mini


def _kwargs_back(get, tag):
    name = {v: k for k, v in TAGS.items()}[tag]
    return {ours: get(f"custom_envs.{tag}.env_config.{theirs[0]}")
            for ours, theirs in ENV_KWARGS[name].items()
            if get(f"custom_envs.{tag}.env_config.{theirs[0]}")
               != get(f"custom_envs.{tag}.env_config.{theirs[0]}", True)}


def _kwargs_lost(cfg):
    other = sorted(set(cfg["env"]["kwargs"]) - set(ENV_KWARGS[cfg["env"]["name"]]))
    return other and (f"env.kwargs {', '.join(other)}: RAGEN's {TAGS[cfg['env']['name']]} config has no such "
                      "key (docs/ragen_config/key_tree.yaml)")


def _model_lost(name, train_tokens):
    if name in IN_PROCESS or name.endswith(".gguf"):
        return (f"model.name={name}: {'built in this process' if name in IN_PROCESS else 'a GGUF file'}, "
                "which RAGEN cannot load; add model_path=<a Hugging Face id or folder> to the command, or "
                "RAGEN trains its default Qwen/Qwen2.5-3B-Instruct")
    if train_tokens == "sampled" and "qwen" not in name.lower():
        return (f"model.name={name}: RAGEN's train.py allows enable_response_mask=True "
                "(algo.train_tokens=sampled) only for Qwen models")
    return None


def _seeds_meet(cfg):
    """RAGEN's training seeds are seed.train, seed.train + 1, ...: one per group and iteration."""
    last = cfg["seed"] + cfg["train"]["iterations"] * cfg["rollout"]["groups"]
    return last > cfg["eval"]["seed_offset"] and (
        f"eval.seed_offset={cfg['eval']['seed_offset']}: RAGEN's training seeds run from "
        f"seed.train={cfg['seed']} to {last}, into the evaluation seeds; raise eval.seed_offset")


# ---- RAGEN's key tree --------------------------------------------------------------------------------------
def key_tree(path=KEY_TREE):
    """The stored tree, composed as Hydra composes base.yaml: verl's ppo_trainer, then envs.yaml, then
    base.yaml. Returns ({path: default}, the header's comment lines)."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    sections = yaml.load(text, Loader=config.YAML_LOADER)
    tree = {}
    for name in ("verl_ppo_trainer", "ragen_envs", "ragen_base"):
        tree.update(sections[name]["keys"])
    return tree, [line for line in text.splitlines() if line.startswith("#")]


def tree_sources(header, path=KEY_TREE):
    """{section: (repository, commit, file)} from the key tree's header lines, which tools/ragen_key_tree.py
    writes as `#   ragen_base:       github.com/RAGEN-AI/RAGEN commit <40 hex digits> config/base.yaml`. The
    printout's `git checkout` and its first line take the commits from here; they are written nowhere else.

    >>> repository, commit, file = tree_sources(key_tree()[1])["ragen_base"]
    >>> repository, len(commit), file
    ('RAGEN-AI/RAGEN', 40, 'config/base.yaml')
    """
    found = {}
    for line in header:
        match = re.match(r"#\s+(\w+):\s+github\.com/(\S+) commit ([0-9a-f]{40}) (\S+)", line)
        if match:
            found[match.group(1)] = match.groups()[1:]
    missing = [name for name in ("ragen_base", "ragen_envs", "verl_ppo_trainer") if name not in found]
    if missing:
        raise ExportError(f"{path}: its header names no commit for {', '.join(missing)} (a line like "
                          f"'#   {missing[0]}: github.com/OWNER/REPO commit <40 hex digits> FILE'); write "
                          "it again with tools/ragen_key_tree.py")
    return found


def resolve(tree, overrides, path, default=False):
    """RAGEN's value of PATH once OVERRIDES are laid over TREE (default=True: ignore them), following a
    `${other.path}` interpolation as OmegaConf does.

    >>> resolve({"a": 1, "b": "${a}"}, {"a": 2}, "b")
    2
    """
    value = tree[path] if default or path not in overrides else overrides[path]
    match = re.fullmatch(r"\$\{([\w.]+)\}", value) if isinstance(value, str) else None
    return resolve(tree, overrides, match.group(1), default) if match else value


# ---- export -----------------------------------------------------------------------------------------------
def _flat(cfg, key):
    for part in key.split("."):
        cfg = cfg[part]
    return cfg


def overrides(cfg, gpus=1, tree=None):
    """RAGEN's Hydra overrides for a loaded ragen-mini config: {path: value}, values at RAGEN's default left
    out, in the table's order, lost keys skipped.

    >>> import config
    >>> overrides(config.load_config(None, ["rollout.groups=16"]))["es_manager.train.env_configs.n_groups"]
    [16]
    """
    tree = tree or key_tree()[0]
    tag = TAGS[cfg["env"]["name"]]
    wanted = {path: value for path, (value, _) in ALWAYS.items()}
    for entry in MAPPING:
        if entry.get("paths") and not (entry.get("lost") and entry["lost"](cfg, gpus)):
            value = _flat(cfg, entry["key"])
            to = entry.get("to") or (lambda v, c, paths=entry["paths"]: {p: v for p in paths})
            wanted.update({path.replace("<tag>", tag): v for path, v in to(value, cfg).items()})
    wanted.update(dict(zip(GPU_PATHS, (gpus, ",".join(map(str, range(gpus))), gpus))))
    unknown = [path for path in wanted if path not in tree]
    if unknown:  # a table entry naming a path RAGEN does not have: Hydra would refuse the command
        raise ExportError(f"not in RAGEN's key tree ({KEY_TREE}): {', '.join(unknown)}")
    chosen = {}
    # in order, so that ppo_epochs set on the actor makes the critic's redundant
    for path, value in wanted.items():
        if not _equal(resolve(tree, chosen, path), value):
            chosen[path] = value
    return chosen


def _equal(a, b):
    return type(a) is type(b) and a == b if isinstance(a, bool) or isinstance(b, bool) else a == b


def lost(cfg, gpus=1):
    """{ragen-mini key: why its value cannot carry over} for this config: listed under the command."""
    found = {entry["key"]: entry["lost"](cfg, gpus) for entry in MAPPING if entry.get("lost")}
    return {key: why for key, why in found.items() if why}


def warnings(cfg, gpus=1):
    """(values carried that mean something else there, what RAGEN's train.py would refuse), one line each."""
    differs = [entry["differs"](cfg, gpus) for entry in MAPPING if entry.get("differs")]
    mini, micro, r = cfg["algo"]["mini_batch_size"], cfg["algo"]["micro_batch_size"], cfg["rollout"]
    refused = [f"ppo_mini_batch_size={mini} must divide by micro_batch_size_per_gpu x GPUs = {micro * gpus}: "
               "change algo.micro_batch_size or --gpus"] if mini % (micro * gpus) else []
    # no int() there, unlike config.py's rule
    if r["groups"] * r["group_size"] * cfg["algo"]["filter_ratio"] < mini:
        refused.append(f"env_groups x group_size x rollout_filter_ratio < ppo_mini_batch_size={mini}")
    return [line for line in differs if line], refused


# ---- printing: the printout is data, never code ------------------------------------------------------------
# The printout is promised to run as it is (`export.py RUN > cmd.sh; . cmd.sh`), and text from the run folder
# goes into it: config values, env.kwargs names, the folder's own name, in the command and in the notes under
# it. Each kind of line has one maker, and nothing is printed around them:
#   comment(text)          a comment line: every character that is not printable (a line break, a carriage
#                          return, a terminal escape, U+2028) is shown as an escape, so it cannot end the
#                          comment and start a command, nor redraw what the reader sees
#   shell_word(word, ...)  a word of a command: shlex.quote, so `$(...)`, backticks, `;` and quotes inside
#                          stay text; a word holding a character that is not printable is refused (quoted,
#                          the shell would keep it, but the line would no longer show what runs)
# A value inside a command word is first a Hydra override value (hydra_value), which escapes `${`, as
# Hydra would otherwise resolve an interpolation such as ${oc.env:HOME} in it.
def shown(text):
    r"""TEXT as one line of printable characters: backslashes and anything not printable as Python escapes
    (\n, \r, \x1b, \u2028), so that the shown text reads back unambiguously. Error messages use it too.

    >>> print(shown("x\ntouch PWNED #\u2028\\"))
    x\ntouch PWNED #\u2028\\
    """
    return "".join(ch if ch.isprintable() and ch != "\\" else repr(ch)[1:-1] for ch in str(text))


def comment(text):
    """One comment line of the printout: the only way a line starting with # is made."""
    return "# " + shown(text)


def shell_word(word, what):
    """One word of a printed command, quoted for a POSIX shell (sh, bash, zsh), which passes it on as it is.
    WHAT names where the word comes from, for the refusal.

    >>> print(shell_word("model_path=$(touch PWNED)", "model.name"))
    'model_path=$(touch PWNED)'
    """
    bad = next((ch for ch in word if not ch.isprintable()), None)
    if bad is not None:  # the message is raw text: main() shows it through shown(), as every error
        raise ExportError(f"{what}: the command word {word} holds {bad}, which is not printable: a printed "
                          f"command would show it as a line break or not at all. Change {what}")
    return shlex.quote(word)


def _words(command, what):
    return " ".join(shell_word(word, what) for word in command)


def _key_of(path, tag):
    """The ragen-mini key a RAGEN path of the command comes from (for a refusal)."""
    for entry in MAPPING:
        for theirs in entry.get("paths") or []:
            theirs = theirs.replace("<tag>", tag)
            if path == theirs or path.startswith(theirs + "."):
                return entry["key"]
    return "--gpus" if path in GPU_PATHS else "export.ALWAYS"


def hydra_value(value):
    r"""Python value -> Hydra override text: True, 1e-06, [8], low_var_kl, "a string with spaces". A quoted
    string keeps every character as it is in Hydra 1.3 and OmegaConf 2.3 (checked with hydra-core 1.3.8):
    `"` and backslashes before it or at the end are escaped, and `${` (an interpolation, which Hydra resolves
    even inside quotes) becomes `\${`, with the backslashes just before it doubled. Other backslashes stay.

    >>> print(hydra_value("Qwen/Qwen2.5-0.5B"), hydra_value("0,1"), hydra_value('a "${oc.env:HOME}"'))
    Qwen/Qwen2.5-0.5B "0,1" "a \"\${oc.env:HOME}\""
    """
    if isinstance(value, bool) or value is None:
        return {True: "True", False: "False", None: "null"}[value]
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, list):
        return "[" + ",".join(hydra_value(v) for v in value) + "]"
    if not isinstance(value, str):
        raise ExportError(f"{value!r}: a {type(value).__name__}, which the export cannot write as a RAGEN "
                          "value; give a number, a string or a list")
    # ASCII only: Hydra's grammar refuses a non-ASCII letter unquoted
    plain = (re.fullmatch(r"[A-Za-z_][\w./\-+:]*", value, flags=re.ASCII)
             and value.lower() not in ("true", "false", "null", "nan", "inf"))
    if plain:  # "0,1" unquoted is a sweep
        return value
    text = re.sub(r"(\\*)\$\{", lambda m: m.group(1) * 2 + "\\${", value)
    return '"' + re.sub(r'(\\*)("|\Z)', lambda m: m.group(1) * 2 + "\\" * bool(m.group(2)) + m.group(2),
                        text) + '"'


def ragen_command(cfg, gpus=1, source="the config"):
    """The whole printout: a header, the checkout and the command (one override a line), the GPU count and
    the notes. Every line but the commands' is a shell comment, so the text can be run as it is."""
    tree, header = key_tree()
    chosen = overrides(cfg, gpus, tree)
    commits = tree_sources(header)
    base, envs, verl = (commits[name][1] for name in ("ragen_base", "ragen_envs", "verl_ppo_trainer"))
    lines = [comment(f"RAGEN command for {source}, to run in a RAGEN checkout (config/base.yaml as at "
                     f"{base[:7]}, config/envs.yaml as at {envs[:7]}, verl {verl[:7]}); values at RAGEN's "
                     "default left out"),
             comment("git checkout: the commit whose config/base.yaml the keys below were checked against "
                     "(docs/ragen_config/key_tree.yaml), not on RAGEN's main branch (a clone of all branches "
                     "has it); keys and defaults differ elsewhere (main has no trainer.local_log_dir). Then "
                     f"verl, its submodule, at {verl[:7]}")]
    lines += [comment(f"{path}={hydra_value(value)}, not RAGEN's default "
                      f"{hydra_value(resolve(tree, {}, path))}: {why}")
              for path, (value, why) in ALWAYS.items() if path in chosen]
    tag = TAGS[cfg["env"]["name"]]
    checkout = [[commits["ragen_base"][1] if word == "<commit>" else word for word in command]
                for command in CHECKOUT]
    lines.append(" && ".join(_words(command, KEY_TREE) for command in checkout) + " && \\")
    lines.append(" \\\n    ".join([_words(TRAIN, "the command")]
                                  + [shell_word(f"{path}={hydra_value(value)}", _key_of(path, tag))
                                     for path, value in chosen.items()]))
    differs, refused = warnings(cfg, gpus)
    lines.append(comment(f"GPUs: {gpus} (--gpus N sets {', '.join(GPU_PATHS[:-1])} and {GPU_PATHS[-1]} "
                         "together; RAGEN's train.py asserts they agree)"))
    for title, group in (("RAGEN's train.py would stop", refused),
                         ("Cannot carry over", list(lost(cfg, gpus).values())),
                         ("Carried, but not the same", differs)):
        if group:
            lines.append(comment(f"{title}:"))
            lines += [comment(f"  - {line}") for line in group]
    return "\n".join(lines)


# ---- the docs table ----------------------------------------------------------------------------------------
def markdown_table():
    """docs/paper.md §10's key table, from MAPPING (tests/test_export.py checks the doc holds exactly
    this)."""
    rows = ["| ragen-mini | RAGEN / verl | note |", "| --- | --- | --- |"]
    for entry in MAPPING:
        key = f"`{entry['key']}.*`" if entry["key"] == "warmup" else f"`{entry['key']}`"
        paths = ", ".join(f"`{p}`" for p in entry.get("paths") or []) or "none"
        rows.append(f"| {key} | {paths} | {entry.get('note', '')} |")
    return "\n".join(rows)


# ---- command line ------------------------------------------------------------------------------------------
def main(argv=None):
    """python export.py [--to ragen] [--gpus N] (RUN_DIR | --config FILE) [KEY=VALUE ...]. Prints the command,
    or one line saying what is wrong; returns the exit status (0, or 2 for bad input)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], prog="export.py")
    parser.add_argument("--to", default="ragen", help="the target (only: ragen)")
    parser.add_argument("--gpus", type=int, default=1, help="GPUs RAGEN is to use on its node (default 1)")
    parser.add_argument("--config", help="a config file laid over config.yaml, instead of a run folder")
    parser.add_argument("items", nargs="*",
                        help="RUN_DIR (without --config), then section.key=value overrides")
    args = parser.parse_args(argv)
    try:
        if args.to not in TARGETS:
            raise ExportError(f"unknown export target '{args.to}': the one known is {', '.join(TARGETS)}")
        if args.gpus < 1:
            raise ExportError(f"--gpus {args.gpus}: give 1 or more")
        if args.config:
            cfg, source = config.load_config(args.config, args.items), args.config
        else:
            if not args.items:
                raise ExportError("give a run folder (export.py RUN_DIR) or a config "
                                  "(export.py --config FILE)")
            run_dir, source = args.items[0], args.items[0]
            if not os.path.isdir(run_dir):
                raise ExportError(f"no run folder at {run_dir}: give a folder a run wrote, or --config FILE")
            if not os.path.isfile(os.path.join(run_dir, "config.yaml")):
                raise ExportError(f"{run_dir} has no config.yaml, so it holds no run's settings: give the "
                                  "folder a run wrote (runs/<env>-<time>), or --config FILE")
            cfg = config.load_run_config(run_dir, args.items[1:])
        text, encoding = ragen_command(cfg, args.gpus, source), sys.stdout.encoding or "utf-8"
        try:  # a printable letter the terminal cannot show (é on an ASCII one) would stop print() half-way
            text.encode(encoding)
        except UnicodeEncodeError as error:
            raise ExportError(f"the printout holds U+{ord(text[error.start]):04X}, which stdout's encoding "
                              f"({encoding}) cannot write: set PYTHONIOENCODING=utf-8") from None
        print(text)
    except (ExportError, config.ConfigError) as error:  # one line, whatever the values in it hold
        problems = getattr(error, "problems", None)
        print(f"export: {shown('; '.join(problems) if problems else error)}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
