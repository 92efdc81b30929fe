"""The multi-turn rollout (paper section 3, Figure 2): the conversation between the LLM and an env.

Every live trajectory advances one turn per batched policy call: the model answers
`<think>..</think><answer>a || b</answer>`, the env executes the actions, and the reward and next state
come back as the next user message. A trajectory is kept as the exact token ids the model saw and
produced, with response_mask = 1 only on tokens the model sampled (REFERENCE.md §7.5-7.7).

    trajectories = rollout(llm_policy(model, tokenizer, cfg, temperature), tokenizer, cfg, seeds, group_ids)

This file holds the prompts (first_prompt, turn_message), the policies that answer them (llm_policy: the
LLM; random_policy: the format warm-up's teacher) and env_corpus, the same texts for training the
in-process tokenizer. It is apart from ragen_mini.py because it is the part of the trainer that knows chat
templates and environments: ragen_mini.py calls rollout() (training, evaluation, format warm-up) and from
then on works on the trajectory dicts it returns (token ids, masks, rewards, per-turn records).
"""
import copy
import random
import time

import numpy as np
import torch

from baselines import random_turn_actions
from config import ConfigError, new_env
from envs import make_env, parse_answer
from fast_decode import static_generate

SYSTEM_PROMPT = "You're a helpful assistant."


def first_user_message(env, cfg):
    symbols = "".join(f"\n{symbol}: {meaning}" for symbol, meaning in env.symbols.items())
    return (f"{env.instruction}\n" + (f"Symbols:{symbols}\n" if symbols else "")
            + f"Valid actions: {', '.join(env.actions)}.\n"
            + f"You can make up to {actions_per_turn(env, cfg)} actions per turn, "
            + "separated by ' || '.\n")


def actions_per_turn(env, cfg):
    return min(cfg.env.max_actions_per_turn, env.max_actions)  # a turn cannot outlast the trajectory's budget


def answer_prefix(cfg):
    return "<think>" if cfg.rollout.think else "<answer>"


def first_prompt(env, observation, tokenizer, cfg):
    """The text the model continues at turn 1: system and first user message in the chat template, then
    the forced answer start ("<think>", or "<answer>" with rollout.think=false; REFERENCE.md §2)."""
    first = first_user_message(env, cfg) + turn_message(1, observation, env.max_actions, cfg)
    return tokenizer.apply_chat_template([{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": first}],
                                         add_generation_prompt=True, tokenize=False) + answer_prefix(cfg)


def turn_message(turn, observation, actions_left, cfg):
    answer = "<think> [your thoughts] </think> <answer> [your answer] </answer>" if cfg.rollout.think \
        else "<answer> [your answer] </answer>"
    return (f"Turn {turn}:\nState:\n{observation}\nYou have {actions_left} actions left. "
            f"Always output: {answer} with no extra text. Max response length: {cfg.rollout.max_new_tokens} tokens.")


def chat_pieces(tokenizer):
    """Read off the model's own chat template: the text that closes an assistant turn and opens the next
    user turn, and the text that closes that user turn and opens the assistant's (ChatML: "<|im_end|>\\n
    <|im_start|>user\\n" and "<|im_end|>\\n<|im_start|>assistant\\n")."""
    text = tokenizer.apply_chat_template(
        [{"role": "system", "content": "S"}, {"role": "user", "content": "@U@"},
         {"role": "assistant", "content": "@A@"}, {"role": "user", "content": "@B@"}],
        add_generation_prompt=True, tokenize=False)
    return text[text.index("@A@") + 3:text.index("@B@")], text[text.index("@B@") + 3:]


def rollout(policy, tokenizer, cfg, seeds, group_ids):
    """Play one trajectory per seed, all in lock-step, one `policy` call per turn.

    `policy(contexts) -> responses` maps a list of token-id lists to the sampled token-id lists (the LLM's
    `generate`, or scripted random answers for the format warm-up). Returns one dict per trajectory:
    ids / mask (what the model saw; 1 = sampled by the model), reward (env rewards + format penalties),
    success, turns (think, actions, format_ok, reward per turn) and counters for the metrics.
    A two-turn trajectory, in pieces of text (each piece is many tokens):

        ids : [system, user: turn 1, <think>] [answer 1 <|im_end|>] [user: reward, turn 2, <think>] [answer 2 ...]
        mask:  0 ...                        0  1 ...              1  0 ...                         0  1 ...
    """
    prefix = answer_prefix(cfg)  # the forced start of every answer
    close_assistant, open_assistant = chat_pieces(tokenizer)
    # One tokenizer call per turn for the whole batch: a call per string was ~40% of the CPU time of
    # a 1,024-trajectory rollout, which on the GPU is time the GPU waits.
    encode = lambda texts: tokenizer(texts, add_special_tokens=False)["input_ids"] if texts else []
    trajectories, started_envs, prompts = [], {}, []
    for seed, group in zip(seeds, group_ids):
        if seed not in started_envs:  # a group's N rollouts share the seed: one puzzle and prompt, N copies
            env = new_env(cfg)
            observation, _ = env.reset(int(seed))
            started_envs[seed] = env, first_prompt(env, observation, tokenizer, cfg)
        env, prompt = started_envs[seed]
        prompts.append(prompt)
        trajectories.append(dict(env=copy.deepcopy(env), seed=int(seed), group=int(group), turns=[], reward=0.0,
                                 success=False, done=False, actions_left=env.max_actions, num_actions=0,
                                 num_effective=0, response_tokens=0, think_tokens=0))
    for t, ids in zip(trajectories, encode(prompts)):
        if len(ids) + cfg.rollout.max_new_tokens > cfg.rollout.max_context:
            raise ConfigError(f"the first prompt has {len(ids)} tokens: with rollout.max_new_tokens="
                              f"{cfg.rollout.max_new_tokens} it exceeds rollout.max_context={cfg.rollout.max_context}")
        t["ids"], t["mask"] = ids, [0] * len(ids)
    per_turn = actions_per_turn(trajectories[0]["env"], cfg)
    for turn in range(1, cfg.env.max_turns + 1):
        live = [t for t in trajectories if not t["done"]]
        if not live:
            break
        thinks, replies = [], []  # per live trajectory; (trajectory, env reply) for those that go on
        for t, response in zip(live, policy([t["ids"] for t in live])):
            answer = tokenizer.decode(response, skip_special_tokens=True)
            parsed = parse_answer(prefix + answer, t["env"].actions, per_turn, require_think=cfg.rollout.think)
            turn_reward = 0.0 if parsed.format_ok else cfg.env.format_penalty
            executed, ended = [], False
            for action in parsed.actions[:t["actions_left"]]:  # past the trajectory budget: dropped
                _, reward, terminated, truncated, info = t["env"].step(action)
                executed.append(action)
                turn_reward += reward
                t["num_effective"] += int(info["effective"])
                t["success"] = info["success"]
                if terminated or truncated:  # the episode ended mid-turn: the rest are skipped
                    ended = True
                    break
            t["actions_left"] -= len(executed)
            t["num_actions"] += len(executed)
            t["reward"] += turn_reward
            t["ids"] = t["ids"] + response
            t["mask"] = t["mask"] + [1] * len(response)
            t["response_tokens"] += len(response)
            thinks.append(parsed.think)
            t["turns"].append(dict(think=parsed.think, actions=executed, format_ok=parsed.format_ok, reward=turn_reward))
            t["done"] = ended or turn == cfg.env.max_turns
            if t["done"]:
                continue
            # The env's reply becomes the next user message. A reply cut by max_new_tokens has no
            # end-of-turn token yet: the template's closing text supplies it (not trained on).
            stopped = len(response) > 0 and response[-1] == tokenizer.eos_token_id
            closing = close_assistant[len(tokenizer.eos_token):] if stopped else close_assistant
            replies.append((t, f"{closing}Reward:\n{turn_reward:g}\n"
                               f"{turn_message(turn + 1, t['env'].render(), t['actions_left'], cfg)}{open_assistant}{prefix}"))
        for t, think_ids in zip(live, encode(thinks)):
            t["think_tokens"] += len(think_ids)
        for (t, _), segment in zip(replies, encode([text for _, text in replies])):
            if len(t["ids"]) + len(segment) + cfg.rollout.max_new_tokens > cfg.rollout.max_context:
                t["done"] = True  # the next turn might not fit the context window
                continue
            t["ids"] = t["ids"] + segment
            t["mask"] = t["mask"] + [0] * len(segment)
    for t in trajectories:
        del t["env"]
    return trajectories


def left_pad(contexts, pad_id):
    """Token-id lists -> input_ids, attention_mask: (B, W) long tensors, left-padded so that every row's
    next token is at column W. Filled in numpy: a torch.tensor per row took 100 ms against 21 ms for
    1,024 rows of up to 1,054 tokens (bench/tiny_rollout_time.py on the H200's host), once per turn.

        left_pad([[5, 6, 7], [8]], pad_id=0) -> [[5, 6, 7], [0, 0, 8]], mask [[1, 1, 1], [0, 0, 1]]
    """
    lengths = np.array([len(context) for context in contexts])  # (B,)
    width = int(lengths.max())
    input_ids = np.full((len(contexts), width), pad_id, dtype=np.int64)  # (B, W)
    for row, context in zip(input_ids, contexts):
        row[width - len(context):] = context
    attention_mask = np.arange(width)[None, :] >= (width - lengths)[:, None]  # (B, W)
    return torch.from_numpy(input_ids), torch.from_numpy(attention_mask.astype(np.int64))


def llm_policy(model, tokenizer, cfg, temperature, batch_size=None):
    """The LLM as a policy: left-pad the contexts and sample one turn for all of them in one call, to
    transformers' `generate` (rollout.cache=dynamic) or to fast_decode.static_generate (static)."""
    static = cfg.rollout.cache == "static"

    @torch.no_grad()
    def policy(contexts):
        started, was_training = time.perf_counter(), model.training
        # On the CPU train() samples with the actor itself; with gradient checkpointing, train mode drops the KV cache.
        model.eval()
        rows = len(contexts)
        if static and batch_size:  # a constant batch shape: the compiled decoder is not rebuilt
            contexts = contexts + [contexts[0]] * (batch_size - rows)
        input_ids, attention_mask = (x.to(model.device) for x in left_pad(contexts, tokenizer.pad_token_id))
        if static:
            new_tokens = static_generate(model, input_ids, attention_mask, cfg, temperature,
                                         tokenizer.eos_token_id, tokenizer.pad_token_id)
        else:
            sampling = dict(do_sample=True, temperature=temperature, top_k=0, top_p=1.0) if temperature > 0 \
                else dict(do_sample=False)
            # Pass every sampler knob: generate() would otherwise apply the model's generation_config
            # (Qwen's: top_k=20, top_p=0.8, repetition_penalty=1.05) and sample from another distribution.
            new_tokens = model.generate(input_ids=input_ids, attention_mask=attention_mask,
                                        max_new_tokens=cfg.rollout.max_new_tokens, min_new_tokens=cfg.rollout.min_new_tokens,
                                        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
                                        repetition_penalty=1.0, **sampling)[:, input_ids.shape[1]:]
        responses = []
        for row in new_tokens[:rows].tolist():  # one host transfer per turn
            # Cut after the FIRST end-of-turn token; it stays in the response so the model learns to stop.
            responses.append(row[:row.index(tokenizer.eos_token_id) + 1] if tokenizer.eos_token_id in row else row)
        model.train(was_training)
        policy.generate_s += time.perf_counter() - started
        return responses

    policy.generate_s = 0.0  # time inside generate(), the rest of perf/rollout_s is envs and tokenizer
    return policy


def random_policy(tokenizer, cfg, rng):
    """Scripted answers with uniformly random actions (the format warm-up's teacher)."""
    prefix_close = "</think><answer>" if cfg.rollout.think else ""
    env = new_env(cfg)  # only for its action names and budget
    per_turn = actions_per_turn(env, cfg)

    def policy(contexts):
        answers = [f"{prefix_close}{' || '.join(random_turn_actions(rng, env.actions, per_turn))}</answer>"
                   for _ in contexts]
        return [tokenizer(a, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id] for a in answers]

    return policy


def env_corpus(cfg, num_seeds=64):
    """Every kind of text the in-process tokenizer will see: prompts, observations and answers of all
    three envs (random play), so that BPE merges them into few tokens."""
    corpus, rng = [], random.Random(0)
    for name in ("bandit", "sokoban", "frozenlake"):
        for seed in range(num_seeds):
            env = make_env(name)
            observation, _ = env.reset(seed)
            corpus.append(SYSTEM_PROMPT + first_user_message(env, cfg)
                          + turn_message(1, observation, env.max_actions, cfg))
            for turn in range(2, 4):
                actions = random_turn_actions(rng, env.actions, 3)
                corpus.append(f"</think><answer>{' || '.join(actions)}</answer>")
                for action in actions:
                    observation, reward, terminated, truncated, _ = env.step(action)
                    if terminated or truncated:
                        break
                corpus.append(f"Reward:\n{reward:g}\n" + turn_message(turn, observation, 5, cfg))
                if terminated or truncated:
                    break
    return corpus
