"""Configuration: config.yaml (next to this file) is the schema, holding every key with its type and
default. A user config file and `section.key=value` overrides are laid over it. Any unknown key (with
the closest valid one suggested), wrong type or impossible setting stops the program here, before a
model is loaded.

    >>> cfg = load_config("configs/tiny.yaml", ["env.name=frozenlake", "algo.clip_high=0.3"])
    >>> cfg["algo"]["clip_high"], namespace(cfg).env.name
    (0.3, 'frozenlake')
"""
import copy
import difflib
import math
import os
from types import SimpleNamespace

import torch
import yaml

from envs import ENVS, make_env

HERE = os.path.dirname(os.path.abspath(__file__))


class ConfigError(ValueError):
    pass


def _set_key(cfg, schema, dotted, value, source):
    *sections, key = dotted.split(".")
    node, spec = cfg, schema
    for part in sections + [key]:
        if isinstance(spec, dict) and spec.get(part) == {} and part == "kwargs" and part != key:
            raise ConfigError(f"{source}: give env keywords as one mapping: env.kwargs={{name: value}}")
        if not isinstance(spec, dict) or part not in spec:
            valid = sorted(_flat_keys(schema))
            hint = difflib.get_close_matches(dotted, valid, n=1, cutoff=0.5)
            raise ConfigError(f"{source}: unknown config key '{dotted}'"
                              + (f"; did you mean '{hint[0]}'?" if hint else f"; valid keys: {', '.join(valid)}"))
        if part != key:
            node, spec = node[part], spec[part]
    default = spec[key]
    if isinstance(default, float) and isinstance(value, str):  # YAML 1.1 reads "1e-6" as a string
        try:
            value = float(value)
        except ValueError:
            pass
    if isinstance(default, dict) and key != "kwargs":  # a whole section given as a mapping: recurse
        if not isinstance(value, dict):
            raise ConfigError(f"{source}: '{dotted}' is a section; give its keys, e.g. {dotted}.<key>=...")
        for sub, sub_value in value.items():
            _set_key(cfg, schema, f"{dotted}.{sub}", sub_value, source)
        return
    if isinstance(default, bool) != isinstance(value, bool) or not (
            isinstance(value, type(default)) or (isinstance(default, float) and isinstance(value, int))):
        raise ConfigError(f"{source}: '{dotted}' must be {type(default).__name__} (like {default!r}), "
                          f"got {value!r} ({type(value).__name__})")
    node[key] = float(value) if isinstance(default, float) else value


def _flat_keys(tree, prefix=""):
    for key, value in tree.items():
        if isinstance(value, dict) and key != "kwargs":
            yield from _flat_keys(value, f"{prefix}{key}.")
        else:
            yield prefix + key


def load_config(path=None, overrides=()):
    """Schema defaults <- config file <- command-line overrides, then sanity checks. Returns a dict."""
    with open(os.path.join(HERE, "config.yaml")) as f:
        schema = yaml.safe_load(f)
    cfg = copy.deepcopy(schema)
    if path:
        try:
            with open(path) as f:
                user = yaml.safe_load(f) or {}
        except (OSError, yaml.YAMLError) as error:
            raise ConfigError(f"cannot read config file {path}: {error}") from None
        for key, value in user.items():
            _set_key(cfg, schema, key, value, path)
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"override '{item}' must look like section.key=value")
        key, text = item.split("=", 1)
        _set_key(cfg, schema, key, yaml.safe_load(text) if text else "", "command line")
    check_config(cfg)
    return cfg


def check_config(cfg):
    """Impossible settings fail here, with the reason, before any model loads."""
    r, a = cfg["rollout"], cfg["algo"]
    rules = [
        (cfg["env"]["name"] in ENVS, f"env.name must be one of {', '.join(ENVS)}"),
        (a["estimator"] in ("gae", "grpo"), "algo.estimator must be gae or grpo"),
        (a["estimator"] == "grpo" or cfg["model"]["critic"], "algo.estimator=gae needs model.critic=true"),
        (r["cache"] in ("dynamic", "static"), "rollout.cache must be dynamic or static"),
        (cfg["train"]["device"] in ("auto", "cpu", "cuda"), "train.device must be auto, cpu or cuda"),
        (0 < a["filter_ratio"] <= 1, "algo.filter_ratio must be in (0, 1]"),
        (r["groups"] >= 1 and r["group_size"] >= 1, "rollout.groups and rollout.group_size must be >= 1"),
        (a["estimator"] != "grpo" or r["group_size"] >= 2, "GRPO needs rollout.group_size >= 2"),
        (1 <= a["micro_batch_size"] <= a["mini_batch_size"], "need 1 <= algo.micro_batch_size <= algo.mini_batch_size"),
        (r["temperature"] > 0 and cfg["eval"]["temperature"] >= 0, "temperatures must be > 0 (eval: >= 0, 0 = greedy)"),
        (0 <= r["min_new_tokens"] <= r["max_new_tokens"], "need 0 <= rollout.min_new_tokens <= rollout.max_new_tokens"),
        (r["max_new_tokens"] < r["max_context"], "rollout.max_new_tokens must be below rollout.max_context"),
        (a["dual_clip"] == 0 or a["dual_clip"] > 1, "algo.dual_clip must be 0 (off) or > 1"),
        (a["ppo_epochs"] >= 1 and r["max_new_tokens"] >= 1, "algo.ppo_epochs and rollout.max_new_tokens must be >= 1"),
        (0 <= a["clip_low"] <= 1 and a["clip_high"] >= 0, "need 0 <= algo.clip_low <= 1 and algo.clip_high >= 0"),
        (0 <= a["gamma"] <= 1 and 0 <= a["lam"] <= 1, "algo.gamma and algo.lam must be in [0, 1]"),
        (a["kl_coef"] >= 0 and a["entropy_coef"] >= 0, "algo.kl_coef and algo.entropy_coef must be >= 0"),
        (cfg["eval"]["samples"] >= 0 and cfg["warmup"]["steps"] >= 0, "eval.samples and warmup.steps must be >= 0"),
        (r["stated_max_tokens"] >= 1, "rollout.stated_max_tokens must be >= 1"),
        (math.isfinite(a["grad_clip"]) and a["grad_clip"] > 0,
         "algo.grad_clip must be a positive number (a negative clip flips every update, 0 erases it)"),
        (all(math.isfinite(lr) and lr > 0 for lr in (a["actor_lr"], a["critic_lr"], cfg["warmup"]["lr"])),
         "algo.actor_lr, algo.critic_lr and warmup.lr must be positive, finite numbers"),
        (min(cfg["env"]["max_turns"], cfg["env"]["max_actions_per_turn"], cfg["env"]["max_actions"]) >= 1,
         "env budgets must be >= 1"),
        (cfg["eval"]["num_seeds"] >= 1 and cfg["train"]["iterations"] >= 0, "eval.num_seeds >= 1, train.iterations >= 0"),
    ]
    for ok, message in rules:
        if not ok:
            raise ConfigError(message)
    check_env(cfg)
    if cfg["train"]["device"] == "cuda" and not torch.cuda.is_available():
        raise ConfigError("train.device=cuda but no CUDA GPU is visible; use train.device=cpu")
    kept = max(1, int(a["filter_ratio"] * r["groups"])) * r["group_size"]
    if a["mini_batch_size"] > kept:
        raise ConfigError(f"algo.mini_batch_size={a['mini_batch_size']} exceeds the {kept} trajectories kept per "
                          "iteration (groups x group_size x filter_ratio)")


def check_env(cfg):
    """Build the configured env, reset it and take every action once, as the first rollout would: keyword
    values no env accepts (a 3x3 Sokoban room, a payout "abc") fail here, not after the model loads."""
    kwargs = cfg["env"]["kwargs"]
    try:
        env = new_env(namespace(cfg))
        env.reset(0)
        for action in list(env.actions):
            env.reset(0)
            reward = env.step(action)[1]
            if not isinstance(reward, (int, float)) or not math.isfinite(reward):
                raise ValueError(f"action {action!r} gives the reward {reward!r}, not a finite number")
    except Exception as error:  # whatever the env raises, the user's fix is the same: other kwargs
        raise ConfigError(f"env.kwargs={kwargs}: {cfg['env']['name']} cannot be played with these values "
                          f"({type(error).__name__}: {error}); change or remove them") from None


def namespace(tree):
    """cfg['rollout']['temperature'] -> cfg.rollout.temperature (env.kwargs stays a dict)."""
    return SimpleNamespace(**{k: namespace(v) if isinstance(v, dict) and k != "kwargs" else v
                              for k, v in tree.items()})


def new_env(cfg):
    """The configured env; Bandit has no action budget to set (one pull ends it)."""
    budget = {} if cfg.env.name == "bandit" else {"max_actions": cfg.env.max_actions}
    return make_env(cfg.env.name, **budget, **cfg.env.kwargs)
