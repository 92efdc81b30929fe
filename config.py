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

import yaml

from envs import ENVS, copy_env, make_env

HERE = os.path.dirname(os.path.abspath(__file__))


class ConfigError(ValueError):
    pass


def collect(errors, call, *args):
    """Run call(*args), adding a ConfigError's message to ERRORS instead of stopping: all of a config's
    problems are said in one pass, not one per start."""
    try:
        return call(*args)
    except ConfigError as error:
        errors.extend(getattr(error, "problems", [str(error)]))  # a section's problems, one by one
        return None


def raise_all(errors):
    if len(errors) == 1:
        raise ConfigError(errors[0])
    if errors:
        error = ConfigError(f"{len(errors)} problems:\n" + "\n".join(f"  - {problem}" for problem in errors))
        error.problems = errors
        raise error


# Every number's range, both ends included: wider than any sensible run, narrow enough that a value outside is
# a typo (temperature 1e-300 turns logits into inf, a learning rate of 1e30 into NaN, 1e9 groups into a hang).
RANGES = {
    "seed": (0, 2**32 - 1), "env.max_turns": (1, 1000), "env.max_actions_per_turn": (1, 100),
    "env.max_actions": (1, 10_000), "env.format_penalty": (-10.0, 0.0),
    "model.tokenizer_vocab": (16, 1_000_000),
    "rollout.groups": (1, 4096), "rollout.group_size": (1, 1024), "rollout.temperature": (0.01, 10.0),
    "rollout.max_new_tokens": (1, 32_768), "rollout.stated_max_tokens": (1, 32_768),
    "rollout.min_new_tokens": (0, 32_768), "rollout.max_context": (2, 1_048_576),
    "rollout.mi_groups": (0, 1024), "rollout.mi_samples": (1, 1024),
    "algo.gamma": (0.0, 1.0), "algo.lam": (0.0, 1.0), "algo.filter_ratio": (0.001, 1.0),
    "algo.kl_coef": (0.0, 100.0),
    "algo.clip_low": (0.0, 1.0), "algo.clip_high": (0.0, 10.0), "algo.dual_clip": (0.0, 100.0),
    "algo.entropy_coef": (0.0, 10.0), "algo.value_clip": (0.0, 1e6), "algo.ppo_epochs": (1, 100),
    "algo.mini_batch_size": (1, 1_000_000), "algo.micro_batch_size": (1, 1_000_000),
    "algo.micro_batch_tokens": (0, 100_000_000),
    "algo.score_micro_batch_tokens": (1, 100_000_000), "algo.logits_chunk": (1, 10_000_000),
    "algo.actor_lr": (1e-12, 1.0),
    "algo.critic_lr": (1e-12, 1.0), "algo.weight_decay": (0.0, 10.0), "algo.grad_clip": (1e-8, 1e6),
    "train.iterations": (0, 10_000_000), "train.time_limit_min": (0.0, 1e6), "train.threads": (0, 4096), "train.stall_min": (0.0, 1e6), "eval.every": (0, 10_000_000),
    "eval.num_seeds": (1, 1_000_000), "eval.seed_offset": (1, 2**32 - 1), "eval.temperature": (0.0, 10.0),
    "eval.samples": (0, 1_000_000), "eval.k": (1, 10_000), "checkpoint.every": (0, 10_000_000),
    "warmup.steps": (0, 1_000_000), "warmup.batch_size": (1, 100_000), "warmup.lr": (1e-12, 1.0),
    "warmup.thought_tokens": (1, 4096), "warmup.thought_temperature": (0.01, 10.0),
}


# libyaml's safe loader where PyYAML was built with it (ten times faster than the pure-Python one), else that one
YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class UniqueKeyLoader(YAML_LOADER):
    """YAML that refuses a key given twice in one mapping: plain YAML keeps the last, so a second `algo:`
    section would silently replace the first one's keys."""

    def construct_mapping(self, node, deep=False):
        seen = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if key in seen:
                raise ConfigError(f"'{key}' is given twice (lines {seen[key] + 1} and "
                                  f"{key_node.start_mark.line + 1}); keep one")
            seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep)


def parse_yaml(text):
    """The one YAML reader for config files, run folders' config.yaml and override values (TEXT, a string):
    safe (data only), a key given twice refused, no anchors or aliases.

    No anchors (&name) or aliases (*name): a config never needs them, and nine nested aliases of nine items
    each (the "billion laughs") make a few hundred bytes stand for a billion values, which any message or
    check that walks them would spend minutes and gigabytes on. The parser's events are read first, so they
    are refused before any value is built."""
    for event in yaml.parse(text, Loader=YAML_LOADER):
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            raise ConfigError(f"line {event.start_mark.line + 1} uses a YAML anchor or alias "
                              f"(&{event.anchor} / *{event.anchor}), which a config may not: write the "
                              "value out in full")
    return yaml.load(text, Loader=UniqueKeyLoader)


def _set_key(cfg, schema, dotted, value, source, failed=None):
    """cfg[dotted] = value, checked against the schema; a value of the wrong type is refused and its key
    added to FAILED (the default stays, and the checks that build on that key are skipped)."""
    failed = set() if failed is None else failed
    *sections, key = dotted.split(".")
    node, spec = cfg, schema
    for part in sections + [key]:
        if isinstance(spec, dict) and spec.get(part) == {} and part == "kwargs" and part != key:
            raise ConfigError(f"{source}: give env keywords as one mapping: env.kwargs={{name: value}}")
        if not isinstance(spec, dict) or part not in spec:
            valid = sorted(_flat_keys(schema))
            hint = difflib.get_close_matches(dotted, valid, n=1, cutoff=0.5)
            raise ConfigError(f"{source}: unknown config key '{dotted}'"
                              + (f"; did you mean '{hint[0]}'?" if hint
                                 else f"; valid keys: {', '.join(valid)}"))
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
            failed.add(dotted)
            raise ConfigError(f"{source}: '{dotted}' is a section; give its keys, e.g. {dotted}.<key>=...")
        errors = []
        for sub, sub_value in value.items():
            collect(errors, _set_key, cfg, schema, f"{dotted}.{sub}", sub_value, source, failed)
        raise_all(errors)
        return
    if isinstance(default, bool) != isinstance(value, bool) or not (
            isinstance(value, type(default)) or (isinstance(default, float) and isinstance(value, int))):
        failed.add(dotted)
        raise ConfigError(f"{source}: '{dotted}' must be {type(default).__name__} (like {default!r}), "
                          f"got {value!r} ({type(value).__name__})")
    node[key] = float(value) if isinstance(default, float) else value


def _get(cfg, dotted):
    for part in dotted.split("."):
        cfg = cfg[part]
    return cfg


def _flat_keys(tree, prefix=""):
    for key, value in tree.items():
        if isinstance(value, dict) and key != "kwargs":
            yield from _flat_keys(value, f"{prefix}{key}.")
        else:
            yield prefix + key


def read_schema():
    """config.yaml next to this file: every key with its default (and so its type)."""
    with open(os.path.join(HERE, "config.yaml")) as f:
        return yaml.load(f, Loader=YAML_LOADER)


def load_config(path=None, overrides=()):
    """Schema defaults <- config file <- command-line overrides, then sanity checks. Returns a dict."""
    schema = read_schema()
    cfg, errors, failed = copy.deepcopy(schema), [], set()  # failed: the keys whose value had the wrong type
    if path:
        for key, value in read_config_file(path).items():
            collect(errors, _set_key, cfg, schema, str(key), value, path, failed)
    for item in overrides:
        collect(errors, set_override, cfg, schema, item, failed)
    cfg["run_dir"] = os.path.expanduser(cfg["run_dir"])  # "~/runs/a" is a folder in the home, not one named ~
    collect(errors, check_config, cfg, failed)  # every problem at once: unknown keys, types, ranges, rules
    raise_all(errors)
    return cfg


# what the checkpoint holds
FIXED_IN_A_RUN = ("algo.estimator", "model.name", "model.critic", "model.tokenizer_vocab")


def load_run_config(run_dir, overrides=()):
    """The config of a run folder for --resume or --eval: RUN_DIR/config.yaml must hold every key (a run
    writes all of them; an emptied or cut file would quietly fall back to the defaults), and the overrides may
    not change what the checkpoint was built with."""
    path = os.path.join(run_dir, "config.yaml")
    moved = [item for item in overrides if item.partition("=")[0].strip() == "run_dir"]
    if moved:  # it would be ignored: the run's files are in RUN_DIR, and stay there
        raise ConfigError(f"{moved[0]}: a resumed or evaluated run keeps its own folder, {run_dir}, and "
                          "run_dir cannot move it; leave run_dir out. To go on from a copy of the run, copy "
                          "the whole folder and --resume the copy")
    saved = read_config_file(path)
    # a run folder from before runs recorded their code has no code section: its commit is unknown ("")
    missing = sorted(set(_flat_keys(read_schema())) - set(_flat_keys(saved)) - {"code.commit", "code.clean"})
    if missing:
        raise ConfigError(f"{path} lacks {', '.join(missing[:5])}{' and more' * (len(missing) > 5)}: a run "
                          "writes its whole config there, so this file was emptied, cut or edited. Put back "
                          "the run's config.yaml, or start a new run")
    try:
        cfg, before = load_config(path, overrides), load_config(path)
    except ConfigError as error:  # a value out of range says which file it came from
        raise ConfigError(str(error) if path in str(error) else f"{path}: {error}") from None
    for key in _flat_keys(cfg):
        if key in FIXED_IN_A_RUN and _get(cfg, key) != _get(before, key):
            raise ConfigError(f"{key}={_get(cfg, key)!r}: this run was trained with "
                              f"{_get(before, key)!r}, and its checkpoint holds that setup's state (a critic "
                              "or none, the model's weights). Start a new run to change it")
    return cfg


def set_override(cfg, schema, item, failed=None):
    failed = set() if failed is None else failed
    key, equals, text = item.partition("=")
    if not equals or not key or key.startswith(".") or key.endswith("."):
        raise ConfigError(f"override '{item}' must look like section.key=value. If it is part of the value "
                          "before it, the shell split that value at a space: quote the whole override, "
                          "e.g. 'env.kwargs={dim_room: 8, num_boxes: 2}'")
    try:
        value = parse_yaml(text) if text else ""
    except ConfigError as error:
        failed.add(key)
        raise ConfigError(f"command line: the value of '{key}': {error}") from None
    except yaml.YAMLError as error:
        failed.add(key)
        raise ConfigError(f"command line: the value of '{key}' is not valid YAML ({text!r}: "
                          f"{str(error).splitlines()[0]}). A value with spaces, brackets or braces must be "
                          f"one shell word: quote the whole override, e.g. '{key}=...'") from None
    _set_key(cfg, schema, key, value, "command line", failed)


def read_config_file(path):
    """A YAML mapping of sections, like config.yaml; anything else stops here with the file named."""
    try:
        with open(path, encoding="utf-8") as f:
            user = parse_yaml(f.read())
    except UnicodeDecodeError as error:
        raise ConfigError(f"config file {path} is not UTF-8 text ({error.reason} at byte {error.start}); "
                          "save it as UTF-8") from None
    except ConfigError as error:
        raise ConfigError(f"config file {path}: {error}") from None
    except yaml.YAMLError as error:
        raise ConfigError(f"config file {path} is not valid YAML: {' '.join(str(error).split())}") from None
    except OSError as error:
        raise ConfigError(f"cannot read config file {path}: {error.strerror}") from None
    if user is None:
        return {}
    if not isinstance(user, dict):
        raise ConfigError(f"config file {path} must be a mapping of sections like config.yaml "
                          f"(env:, rollout:, algo:, ...), not a {type(user).__name__}")
    return user


def check_config(cfg, failed=()):
    """Impossible settings fail here, all of them at once with their reasons, before any model loads. FAILED:
    the keys (or whole sections) whose given value had the wrong type, so cfg holds their defaults: the
    checks that read them are skipped, the others still run (their problems are said in the same pass)."""
    r, a, e = cfg["rollout"], cfg["algo"], cfg["eval"]
    mistyped = {key for key in _flat_keys(cfg) if any(key == f or key.startswith(f + ".") for f in failed)}
    # the keys whose numbers are not to be used in the checks that build on them
    errors, unsound = [], set(mistyped)
    for key in _flat_keys(cfg):  # NaN and inf pass every comparison below the wrong way, or crash later
        value = _get(cfg, key)
        if key in mistyped:
            continue
        if isinstance(value, float) and not math.isfinite(value):
            errors.append(f"{key}={value}: give a finite number")
        elif key in RANGES and not RANGES[key][0] <= value <= RANGES[key][1]:
            errors.append(f"{key}={value} is out of range: give a value from {RANGES[key][0]} to "
                          f"{RANGES[key][1]}")
        else:
            continue
        unsound.add(key)
    rules = [  # (the keys the rule reads, whether it holds, what to say if not)
        (["env.name"], cfg["env"]["name"] in ENVS, f"env.name must be one of {', '.join(ENVS)}"),
        (["algo.estimator"], a["estimator"] in ("gae", "grpo"), "algo.estimator must be gae or grpo"),
        (["algo.loss_agg"], a["loss_agg"] in ("token-mean", "micro-batch-mean"),
         "algo.loss_agg must be token-mean or micro-batch-mean"),
        (["algo.grpo_kl"], a["grpo_kl"] in ("k1", "k3"), "algo.grpo_kl must be k1 or k3"),
        (["algo.train_tokens"], a["train_tokens"] in ("sampled", "after_system"),
         "algo.train_tokens must be sampled or after_system"),
        (["algo.estimator", "model.critic"], a["estimator"] == "grpo" or cfg["model"]["critic"],
         "algo.estimator=gae needs model.critic=true"),
        (["rollout.engine"], r["engine"] in ("auto", "hf", "fast"), "rollout.engine must be auto, hf or fast"),
        (["train.device"], cfg["train"]["device"] in ("auto", "cpu", "cuda"),
         "train.device must be auto, cpu or cuda"),
        (["train.log_to"], cfg["train"]["log_to"] in ("none", "tensorboard", "wandb"),
         "train.log_to must be none, tensorboard or wandb"),
        (["algo.estimator", "rollout.group_size"], a["estimator"] != "grpo" or r["group_size"] >= 2,
         "GRPO needs rollout.group_size >= 2"),
        (["algo.micro_batch_size", "algo.mini_batch_size"], a["micro_batch_size"] <= a["mini_batch_size"],
         "need algo.micro_batch_size <= algo.mini_batch_size"),
        (["rollout.min_new_tokens", "rollout.max_new_tokens"], r["min_new_tokens"] <= r["max_new_tokens"],
         "need rollout.min_new_tokens <= rollout.max_new_tokens"),
        (["rollout.max_new_tokens", "rollout.max_context"], r["max_new_tokens"] < r["max_context"],
         "rollout.max_new_tokens must be below rollout.max_context"),
        (["algo.dual_clip"], a["dual_clip"] == 0 or a["dual_clip"] > 1, "algo.dual_clip must be 0 (off) or > 1"),
        (["warmup.thoughts"], cfg["warmup"]["thoughts"] in ("none", "own"), "warmup.thoughts must be none or own"),
        (["rollout.mi_groups"], r["mi_groups"] == 0 or r["mi_groups"] >= 2,
         "rollout.mi_groups must be 0 (off) or >= 2 (prompts to compare)"),
        (["warmup.thought_loss", "warmup.env_text"], cfg["warmup"]["thought_loss"] or not cfg["warmup"]["env_text"],
         "warmup.env_text=true trains on every token after the first answer, thoughts included: it needs "
         "warmup.thought_loss=true"),
        # training seeds are drawn from [0, seed_offset), evaluation seeds are seed_offset + i
        (["eval.seed_offset", "eval.num_seeds"], e["seed_offset"] + e["num_seeds"] <= 2**32,
         "eval.seed_offset must be >= 1 (training seeds are drawn below it) and eval.seed_offset + "
         "eval.num_seeds at most 2**32; the default 1000000 keeps evaluation puzzles apart from training "
         "ones"),
    ]
    errors += [message for keys, ok, message in rules if not ok and not mistyped & set(keys)]
    if "run_dir" not in mistyped:
        collect(errors, check_run_dir, cfg["run_dir"])
    import torch  # here alone: findings.py, export.py and the viewer read YAML through this module without torch
    if cfg["train"]["device"] == "cuda" and not torch.cuda.is_available():
        errors.append("train.device=cuda but no CUDA GPU is visible; use train.device=cpu")
    if cfg["env"]["name"] in ENVS and not any(key.startswith("env.") for key in unsound):
        collect(errors, check_env, cfg)
    if not unsound & {"algo.filter_ratio", "rollout.groups", "rollout.group_size", "algo.mini_batch_size"}:
        kept = max(1, int(a["filter_ratio"] * r["groups"])) * r["group_size"]
        if a["mini_batch_size"] > kept:
            errors.append(f"algo.mini_batch_size={a['mini_batch_size']} exceeds the {kept} trajectories kept "
                          "per iteration (groups x group_size x filter_ratio)")
    raise_all(errors)


def check_env(cfg):
    """Build the configured env, reset it and take every action once, as the first rollout would: keyword
    values no env accepts (a 3x3 Sokoban room, a payout "abc") fail here, not after the model loads."""
    kwargs = cfg["env"]["kwargs"]
    for key, value in kwargs.items():
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"env.kwargs: {key}={value} is not a finite number")
    try:
        env = new_env(namespace(cfg))
        env.reset(0)
        for action in list(env.actions):
            reward = copy_env(env).step(action)[1]
            if not isinstance(reward, (int, float)) or not math.isfinite(reward):
                raise ValueError(f"action {action!r} gives the reward {reward!r}, not a finite number")
    except Exception as error:  # whatever the env raises, the user's fix is the same: other kwargs
        raise ConfigError(f"env.kwargs={kwargs}: {cfg['env']['name']} cannot be played with these values "
                          f"({type(error).__name__}: {error}); change or remove them") from None
    if cfg["env"]["name"] == "bandit":  # success is pulling the risky arm: it must be the better one
        risky, safe = env.high_prob * env.high_payout, env.low_payout
        if not risky > safe:
            raise ConfigError(
                f"env.kwargs={kwargs}: the risky arm {env.high_name} is expected to pay high_prob x high_payout "
                f"= {env.high_prob:g} x {env.high_payout:g} = {risky:g} per pull, the safe arm {env.low_name} "
                f"{safe:g}: an episode succeeds when the risky arm is pulled (README, What success means), so "
                "it must pay more on average. Raise high_payout or high_prob, or lower low_payout")


def check_run_dir(path):
    """A run_dir that names a file, or lies under one, cannot become a folder: say so before the model
    loads."""
    if not path:
        return
    parent = os.path.abspath(path)
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        raise ConfigError(f"run_dir={path}: {parent} is a file, not a folder; choose another run_dir")


def namespace(tree):
    """cfg['rollout']['temperature'] -> cfg.rollout.temperature (env.kwargs stays a dict)."""
    return SimpleNamespace(**{k: namespace(v) if isinstance(v, dict) and k != "kwargs" else v
                              for k, v in tree.items()})


def new_env(cfg):
    """The configured env; Bandit has no action budget (one pull ends it) and no grid."""
    if cfg.env.name == "bandit":
        return make_env("bandit", **cfg.env.kwargs)
    return make_env(cfg.env.name, max_actions=cfg.env.max_actions, spaced_grid=cfg.env.spaced_grid,
                    **cfg.env.kwargs)
