"""Export a ragen-mini run's settings as a RAGEN training command (several GPUs, vLLM, verl), checked
against RAGEN's own config key tree, stored in docs/ragen_config/key_tree.yaml (docs/paper.md §10).

    python export.py runs/sokoban-0101-1200              # a run folder: its config.yaml
    python export.py --config configs/tiny.yaml env.name=bandit
    python export.py --gpus 4 --config config.yaml      # the GPU count RAGEN is to use

MAPPING below is the one table of ragen-mini keys and RAGEN paths: the command, the reading back
(to_ragen_mini, which the tests use for the round trip) and the table in docs/paper.md §10 all come
from it. Values equal to RAGEN's own default are left out of the command.

    >>> import config
    >>> print(ragen_command(config.load_config("configs/ragen-paper.yaml")).splitlines()[1])
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


class ExportError(ValueError):
    pass


# ---- the table -------------------------------------------------------------------------------------------
# One entry per ragen-mini key (a section name covers all of its keys). Fields, all but "key" optional:
#   paths   RAGEN's Hydra override paths; "<tag>" is the env's entry in custom_envs. None: no counterpart.
#   to      value, cfg -> {path: value}. Default: the value on every path.
#   back    get, tag -> value, with get(path) RAGEN's value after the overrides. Default: get(paths[0]).
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
    sections = yaml.safe_load(text)
    tree = {}
    for name in ("verl_ppo_trainer", "ragen_envs", "ragen_base"):
        tree.update(sections[name]["keys"])
    return tree, [line for line in text.splitlines() if line.startswith("#")]


def resolve(tree, overrides, path, default=False):
    """RAGEN's value of PATH once OVERRIDES are laid over TREE (default=True: ignore them), following a
    `${other.path}` interpolation as OmegaConf does.

    >>> resolve({"a": 1, "b": "${a}"}, {"a": 2}, "b")
    2
    """
    value = tree[path] if default or path not in overrides else overrides[path]
    match = re.fullmatch(r"\$\{([\w.]+)\}", value) if isinstance(value, str) else None
    return resolve(tree, overrides, match.group(1), default) if match else value


# ---- export and read back ---------------------------------------------------------------------------------
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
    wanted = {}
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


def to_ragen_mini(chosen, tree=None):
    """The reverse: RAGEN overrides {path: value} -> {ragen-mini key: value} for every key the table carries.

    >>> to_ragen_mini({"actor_rollout_ref.actor.clip_ratio_high": 0.2})["algo.clip_high"]
    0.2
    """
    tree = tree or key_tree()[0]
    get = lambda path, default=False: resolve(tree, chosen, path, default)  # noqa: E731 (a one-line reader)
    tag = get("es_manager.train.env_configs.tags")[0]
    out = {}
    for entry in MAPPING:
        if entry.get("paths"):
            back = entry.get("back") or (lambda g, t, path=entry["paths"][0]: g(path.replace("<tag>", t)))
            out[entry["key"]] = back(get, tag)
    return out


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


def hydra_value(value):
    """Python value -> Hydra override text: True, 1e-06, [8], low_var_kl, 'a string with spaces'."""
    if isinstance(value, bool) or value is None:
        return {True: "True", False: "False", None: "null"}[value]
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, list):
        return "[" + ",".join(hydra_value(v) for v in value) + "]"
    plain = (re.fullmatch(r"[A-Za-z_][\w./\-+:]*", value)
             and value.lower() not in ("true", "false", "null", "nan", "inf"))
    # "0,1" unquoted is a sweep
    return value if plain else '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def parse_value(text):
    """Hydra override text -> Python value (the tests read the printed command back with it)."""
    value = yaml.safe_load(text)
    if isinstance(value, str) and re.fullmatch(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+", value):
        return float(value)  # YAML 1.1 reads 1e-06 as a string; Hydra as a float
    return value


def ragen_command(cfg, gpus=1, source="the config"):
    """The whole printout: a header, the command (one override a line), the GPU count and the notes. Every
    line but the command's is a shell comment, so the text can be run as it is."""
    tree, header = key_tree()
    chosen = overrides(cfg, gpus, tree)
    commits = [line.split("commit ")[1] for line in header
               if "commit " in line and ":" in line.split("commit ")[0]]
    lines = [f"# RAGEN command for {source}, to run in a RAGEN checkout (config/base.yaml as at "
             f"{commits[0][:7]}, config/envs.yaml as at {commits[1][:7]}, verl {commits[2][:7]}); values at "
             "RAGEN's default left out",
             " \\\n    ".join(["python train.py --config-name base"]
                              + [shlex.quote(f"{path}={hydra_value(value)}")
                                 for path, value in chosen.items()])]
    differs, refused = warnings(cfg, gpus)
    lines.append(f"# GPUs: {gpus} (--gpus N sets trainer.n_gpus_per_node, system.CUDA_VISIBLE_DEVICES and "
                 "actor_rollout_ref.rollout.tensor_model_parallel_size together; RAGEN's train.py asserts "
                 "they agree)")
    for title, group in (("RAGEN's train.py would stop", refused),
                         ("Cannot carry over", list(lost(cfg, gpus).values())),
                         ("Carried, but not the same", differs)):
        if group:
            lines.append(f"# {title}:")
            lines += [f"#   - {line}" for line in group]
    return "\n".join(lines)


def parse_command(text):
    """The overrides of a printed command, {path: value}: the round trip reads what a user would copy."""
    words = shlex.split("\n".join(line for line in text.splitlines() if not line.startswith("#"))
                        .replace("\\\n", " "))
    return {path: parse_value(value)
            for path, _, value in (w.partition("=") for w in words[words.index("base") + 1:])}


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
    # here, not at the top: config imports torch, which `python export.py --help` need not wait for
    import config

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
        print(ragen_command(cfg, args.gpus, source))
    except (ExportError, config.ConfigError) as error:
        print(f"export: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
