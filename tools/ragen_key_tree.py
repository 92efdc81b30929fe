"""Write docs/ragen_config/key_tree.yaml: RAGEN's config key names and default values at the commits
docs/paper.md §10 was checked against, flattened to Hydra override paths. export.py and
tests/test_export.py read that file, offline; this script is only for refreshing it.

RAGEN's `config/base.yaml` starts with `defaults: [ppo_trainer, envs]`: verl's ppo_trainer.yaml (a
symlink into the verl submodule) comes first, then `config/envs.yaml`, then base.yaml's own keys on top.
The three files are stored apart, each under its source, so every default can be traced to its line.

    python tools/ragen_key_tree.py /work/.mirror/RAGEN-AI+RAGEN/repo /work/.mirror/volcengine+verl/repo

(each argument a git directory holding the commits below: the `fetch` tool's mirrors, or clones)
"""
import re
import subprocess
import sys

import yaml

RAGEN_BASE = ("131923071cc681ffab661507a1447fbc25e87a36", "config/base.yaml")
RAGEN_ENVS = ("3e17651386cdf0e94cfbffbec8560a75d52c2d85", "config/envs.yaml")
VERL_PPO = ("1e47e412a441bae8cd1152888f6822871f95dec5", "verl/trainer/config/ppo_trainer.yaml")  # the submodule at RAGEN_BASE

# OmegaConf, which Hydra loads these files with, reads `1e-6` as a float; plain YAML 1.1 as a string
FLOAT = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+$")


def show(git_dir, commit, path):
    return subprocess.run(["git", "--git-dir", git_dir, "show", f"{commit}:{path}"], check=True,
                          capture_output=True, text=True).stdout


def flatten(tree, prefix=""):
    """{'a': {'b': 1}, 'c': [1, 2]} -> {'a.b': 1, 'c': [1, 2]}: lists and empty mappings stay one value."""
    flat = {}
    for key, value in tree.items():
        if isinstance(value, dict) and value:
            flat.update(flatten(value, f"{prefix}{key}."))
        else:
            flat[prefix + str(key)] = float(value) if isinstance(value, str) and FLOAT.match(value) else value
    return flat


def main(ragen_git, verl_git):
    sections = {}
    for name, git_dir, (commit, path) in [("verl_ppo_trainer", verl_git, VERL_PPO), ("ragen_envs", ragen_git, RAGEN_ENVS),
                                          ("ragen_base", ragen_git, RAGEN_BASE)]:
        tree = yaml.safe_load(show(git_dir, commit, path))
        tree.pop("defaults", None)  # Hydra's composition list, not a key
        sections[name] = {"source": f"{'volcengine/verl' if git_dir == verl_git else 'RAGEN-AI/RAGEN'}@{commit}:{path}",
                          "keys": flatten(tree)}
    header = (
        "# RAGEN's config key tree: every key's Hydra override path and default value, as the files hold them\n"
        "# (interpolations like ${model_path} kept as written). Written by tools/ragen_key_tree.py; read by export.py.\n"
        "# Hydra composes verl_ppo_trainer, then ragen_envs, then ragen_base (base.yaml's `defaults:` list, its own\n"
        "# keys last): a path in a later section replaces the same path in an earlier one.\n"
        f"#   ragen_base:       github.com/RAGEN-AI/RAGEN commit {RAGEN_BASE[0]} {RAGEN_BASE[1]}\n"
        f"#   ragen_envs:       github.com/RAGEN-AI/RAGEN commit {RAGEN_ENVS[0]} {RAGEN_ENVS[1]}\n"
        f"#   verl_ppo_trainer: github.com/volcengine/verl commit {VERL_PPO[0]} {VERL_PPO[1]}\n"
        "#                     (the verl submodule of RAGEN at the ragen_base commit; config/ppo_trainer.yaml links to it)\n"
        "# The two RAGEN commits are the ones docs/paper.md §10 names; they lie on different branches (add-xjin and\n"
        "# xjin-alfred), and envs.yaml at 3e17651 differs from the one at 1319230 only by an Alfworld entry.\n")
    body = yaml.safe_dump(sections, sort_keys=False, allow_unicode=True, width=100000)
    with open("docs/ragen_config/key_tree.yaml", "w", encoding="utf-8") as f:
        f.write(header + body)


if __name__ == "__main__":
    main(*sys.argv[1:3])
