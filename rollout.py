"""The multi-turn rollout (paper section 3, Figure 2): the conversation between the LLM and an env.

Every live trajectory advances one turn per batched policy call: the model answers
`<think>..</think><answer>a || b</answer>`, the env executes the actions, and the reward and next state
come back as the next user message. A trajectory is kept as the exact token ids the model saw and
produced, marked 1 only where the model sampled them (docs/paper.md §7.5-7.7).

    chat = chat_format(tokenizer, model.generation_config)
    trajectories = play_episodes(LLMPolicy(RolloutModel(model, chat), cfg, temperature), chat, cfg, seeds,
                                 group_ids)

This file holds the paper's prompts (first_user_message, turn_message, reward_message), what a chat
model's template says about turns (ChatFormat) and the policies that answer (LLMPolicy: the LLM;
random_policy: the format warm-up's teacher). ragen_mini.py and launch.py call play_episodes() (training,
evaluation, format warm-up) and from then on work on the Trajectory records it returns (token ids, which
were sampled, rewards, per-turn records).
"""
import copy
import os
import re
import time
from dataclasses import dataclass, field

import jinja2
import numpy as np
import torch

from config import ConfigError, new_env
from envs import _first_pair, cleaned_pair, copy_env, parse_answer, random_turn_actions, without_special_strings

# ======================================================================================================
# The paper's prompts, word for word (docs/paper.md §2): they are part of the experiment, like a
# hyper-parameter, so even their typos ("Forbid the whole") stay.
# ======================================================================================================
SYSTEM_PROMPT = "You're a helpful assistant. "


def first_user_message(env):
    """The task, then (grid envs) the symbol legend and the actions; Bandit's task is its state text."""
    if not env.symbols:
        return env.instruction
    legend = ", ".join(f"{symbol}: {meaning}" for symbol, meaning in env.symbols.items())
    return (f"{env.instruction}\nThe meaning of each symbol in the state is:\n{legend}"
            f"\nYour available actions are:\n{', '.join(env.actions)}"
            f"\nYou can make up to {env.max_actions} actions, separated by the action separator \" || \"\n")


def format_line(cfg):
    """The sentences of every turn message that ask for the answer format."""
    answer = "<think> [Your thoughts] </think> <answer> [your answer] </answer>" if cfg.rollout.think \
        else "<answer> [your answer] </answer>"
    return (f"Always output: {answer} with no extra text. Strictly follow this format. "
            f"Max response length: {cfg.rollout.stated_max_tokens} words (tokens).")


def turn_message(turn, observation, actions_left, cfg):
    """Appended to the user message of every turn (the first one and each reward message)."""
    return (f"\nTurn {turn}:\nState:\n{observation}\nYou have {actions_left} actions left. "
            f"{format_line(cfg)}\n")


def reward_message(env_reward):
    """The user message after a turn: the env's reward of that turn as Python prints a float
    (-0.30000000000000004 included), without the format penalty, which the model is never told."""
    return f"Reward:\n{float(env_reward)}\n"


def actions_per_turn(env, cfg):
    return min(cfg.env.max_actions_per_turn, env.max_actions)  # a turn cannot outlast the trajectory's budget


def answer_prefix(cfg):
    return "<think>" if cfg.rollout.think else "<answer>"


def first_prompt(env, observation, tokenizer, cfg):
    """The text the model continues at turn 1: system and first user message in the chat template, then
    the forced answer start ("<think>", or "<answer>" with rollout.think=false)."""
    first = first_user_message(env) + turn_message(1, observation, env.max_actions, cfg)
    return tokenizer.apply_chat_template([{"role": "system", "content": SYSTEM_PROMPT},
                                          {"role": "user", "content": first}],
                                         add_generation_prompt=True, tokenize=False) + answer_prefix(cfg)


# ======================================================================================================
# What the model's own chat template says about turns. Nothing is assumed from tokenizer.eos_token:
# converted tokenizers get it wrong (SmolLM2's GGUF copy names <|im_start|>), and chat models end a turn
# with a token of their template (<|im_end|>, <|eot_id|>) that may not be the "end of text" token.
# ======================================================================================================
@dataclass(frozen=True)
class ChatFormat:
    tokenizer: object        # the model's tokenizer (text <-> ids)
    # the template's token after an assistant reply: <|im_end|> (ChatML), <|eot_id|> (Llama 3)
    end_of_turn_id: int
    stop_ids: tuple          # ids that end a reply: end_of_turn_id, then the generation config's eos ids
    close_assistant: str     # template text from the end of a reply to the next user message's text
    open_assistant: str      # template text from the end of a user message to the reply
    pad_id: int              # the tokenizer's pad id, else end_of_turn_id (padding is always masked out)
    # tokens of the system message as the template renders it (a trajectory's first ones)
    system_length: int


def template_source(tokenizer):
    """Where the tokenizer's chat template came from, for messages: a model folder's chat_template.jinja or
    tokenizer_config.json (a checkpoint's actor/ folder on --resume and --eval), else the model's name."""
    name = getattr(tokenizer, "name_or_path", "") or ""
    if not os.path.isdir(name):
        return f"the model {name}" if name else "the model's tokenizer"
    files = [os.path.join(name, file) for file in ("chat_template.jinja", "chat_template.json", "tokenizer_config.json")
             if os.path.isfile(os.path.join(name, file))]
    return " / ".join(files[:1] or [name])  # transformers takes the first of them that exists


def render_chat(tokenizer, messages, **kwargs):
    """tokenizer.apply_chat_template(messages, tokenize=False), or a message that names the model and its
    template file: a base model has no template; a template from someone's checkpoint may be broken or try
    to reach Python's internals (jinja2's sandbox refuses that: nothing runs)."""
    if tokenizer.chat_template is None:
        raise ConfigError(f"{template_source(tokenizer)} has no chat template (a base model has none; instruct "
                          "and chat models do): ragen-mini plays every episode as a conversation in the model's "
                          "own template. Use an instruct model, e.g. model.name=Qwen/Qwen2.5-0.5B-Instruct (a run's "
                          "checkpoint keeps its model's template in actor/chat_template.jinja: put it back)")
    try:
        return tokenizer.apply_chat_template(messages, tokenize=False, **kwargs)
    except jinja2.TemplateError as error:  # SecurityError, TemplateSyntaxError, raise_exception(...) alike
        why = (" (it tries to reach Python's internals; the sandbox refused, nothing ran)"
               if isinstance(error, jinja2.exceptions.SecurityError) else "")
        raise ConfigError(f"the chat template in {template_source(tokenizer)} cannot be rendered"
                          f"{why}: {type(error).__name__}: {(str(error).splitlines() or [''])[0].rstrip('.')}. "
                          "Put back the model's own template (a checkpoint's is that of the model its run "
                          "started from), or use another model") from None


def chat_format(tokenizer, generation_config=None):
    """Read the turn pieces off a two-turn conversation rendered by the template itself.

    ChatML (Qwen, SmolLM2, the tiny model): close_assistant "<|im_end|>\\n<|im_start|>user\\n", open_assistant
    "<|im_end|>\\n<|im_start|>assistant\\n", end of turn <|im_end|>. Llama 3: close_assistant
    "<|eot_id|><|start_header_id|>user<|end_header_id|>\\n\\n", end of turn <|eot_id|>.
    """
    text = render_chat(tokenizer, [{"role": "system", "content": "S"}, {"role": "user", "content": "@U@"},
                                   {"role": "assistant", "content": "@A@"}, {"role": "user", "content": "@B@"}],
                       add_generation_prompt=True)
    if not 0 <= text.find("@U@") < text.find("@A@") < text.find("@B@"):
        raise ConfigError(f"the chat template in {template_source(tokenizer)} does not write the messages out "
                          f"in their order (a system, user, assistant, user conversation came out as "
                          f"{text[:200]!r}): ragen-mini needs a chat template that does")
    close_assistant, open_assistant = (text[text.index("@A@") + 3:text.index("@B@")],
                                       text[text.index("@B@") + 3:])
    first = tokenizer(close_assistant, add_special_tokens=False)["input_ids"][:1]
    if not first or first[0] not in tokenizer.get_added_vocab().values():
        raise ConfigError(f"the model's chat template closes an assistant turn with {close_assistant!r}, "
                          "which does not start with a special token: "
                          "ragen-mini needs an end-of-turn token to stop on")
    eos = getattr(generation_config, "eos_token_id", None)
    eos = [] if eos is None else [eos] if isinstance(eos, int) else list(eos)
    system = render_chat(tokenizer, [{"role": "system", "content": SYSTEM_PROMPT}])
    return ChatFormat(tokenizer=tokenizer, end_of_turn_id=first[0],
                      stop_ids=tuple(dict.fromkeys([first[0], *eos])),
                      close_assistant=close_assistant, open_assistant=open_assistant,
                      pad_id=first[0] if tokenizer.pad_token_id is None else tokenizer.pad_token_id,
                      system_length=len(tokenizer(system, add_special_tokens=False)["input_ids"]))


# ======================================================================================================
# The rollout
# ======================================================================================================
@dataclass
class Turn:
    """One answer of the model and what the env made of it (the evaluation samples record all of it:
    evaluation.episode_record)."""
    think: str            # the text between <think> and </think> ("" without one)
    actions: list         # the actions the env executed (none for a malformed answer)
    format_ok: bool       # the answer kept the format; if not, the turn's reward holds env.format_penalty
    reward: float         # the env's rewards for those actions + the format penalty
    think_tokens: int = 0  # tokens of `think`
    state: str = ""       # the env's rendering the model saw in this turn's user message
    actions_left: int = 0  # the trajectory's action budget that message stated
    reply: str = ""       # the sampled tokens decoded, whole (special tokens left out; the forced "<think>"
    #                       that starts every answer is the prompt's, not in it)
    answer: str = ""      # the text between <answer> and </answer> that parse_answer read ("" without one)
    format_problem: str = ""  # why the format broke, in words (explain_answer); "" when format_ok


@dataclass
class Trajectory:
    """One multi-turn conversation, kept as the exact tokens the model saw and produced. `ids` and
    `sampled` are aligned, one entry per token: sampled = 1 on the tokens the model sampled (its answers
    and their end-of-turn tokens), 0 on the prompt, the env's replies and the template's text. A two-turn
    trajectory, in pieces of text (each piece is many tokens):

        ids    : [system, user: turn 1, <think>] [answer 1 <|im_end|>] [user: reward, turn 2, <think>]
        sampled:  0 ...                        0  1 ...              1  0 ...                         0
                 [answer 2 ...]
                   1 ...
    """
    seed: int                                   # the env seed: the puzzle, and the prompt
    group: int                                  # the N trajectories of one seed share a group id
    ids: list = field(default_factory=list)     # (T,) token ids
    sampled: list = field(default_factory=list)  # (T,) 1 where the model sampled ids[i]
    turns: list = field(default_factory=list)   # one Turn per answer
    reward: float = 0.0                         # summed over the turns, format penalties included
    success: bool = False                       # the env says the task is solved
    num_actions: int = 0                        # actions executed
    num_effective: int = 0                      # actions that changed the env's state
    response_tokens: int = 0                    # sampled tokens, sum(sampled)
    think_tokens: int = 0                       # tokens of the think texts


def play_episodes(policy, chat, cfg, seeds, group_ids):
    """Play one trajectory per seed, all in lock-step, one `policy` call per turn -> list of Trajectory.

    `policy(contexts) -> responses` maps a list of token-id lists to the sampled token-id lists (the LLM,
    or scripted random answers for the format warm-up). A turn: the policy answers every live trajectory;
    each reply is read (read_reply: the paper's code's switches) and parsed, the env executes its actions
    (step_env), and the reply, then the env's answer as the next user message (next_user_message), are
    appended to the trajectory's ids.
    """
    tokenizer, prefix = chat.tokenizer, answer_prefix(cfg)  # the forced start of every answer
    trajectories, envs = start_episodes(tokenizer, cfg, seeds, group_ids)
    actions_left = [env.max_actions for env in envs]
    done = [False] * len(trajectories)
    per_turn = actions_per_turn(envs[0], cfg)
    for turn in range(1, cfg.env.max_turns + 1):
        live = [i for i in range(len(trajectories)) if not done[i]]
        if not live:
            break
        thinks, messages = [], []  # per live trajectory; (index, next user message) for those that go on
        responses = policy([trajectories[i].ids for i in live])
        for i, response, answer in zip(live, responses, decode_batch(tokenizer, responses)):
            t, env = trajectories[i], envs[i]
            text, kept = read_reply(prefix + answer, response, per_turn, chat, cfg)
            parsed = parse_answer(text, env.actions, per_turn, require_think=cfg.rollout.think)
            # for people reading the samples: what the model saw, and why an answer did not parse
            shown, budget = env.render(), actions_left[i]
            cut = not response or response[-1] not in chat.stop_ids  # no stop token: max_new_tokens hit
            answer_text, problem = explain_answer(text, parsed, env.actions, cfg.rollout.think,
                                                  cut and cfg.rollout.max_new_tokens)
            # past the trajectory's action budget, actions are dropped
            env_reward, executed, ended = step_env(env, parsed.actions[:budget], t)
            turn_reward = env_reward + (0.0 if parsed.format_ok else cfg.env.format_penalty)
            actions_left[i] -= len(executed)
            t.reward += turn_reward
            t.response_tokens += len(response)  # what the model sampled, whatever the history keeps
            closing = append_reply(t.ids, t.sampled, kept, chat)
            thinks.append(parsed.think)
            t.turns.append(Turn(think=parsed.think, actions=executed, format_ok=parsed.format_ok,
                                reward=turn_reward, state=shown, actions_left=budget, reply=answer,
                                answer=answer_text, format_problem=problem))
            done[i] = ended or turn == cfg.env.max_turns
            if not done[i]:
                messages.append((i, next_user_message(closing, env_reward, turn + 1, env.render(),
                                                      actions_left[i], chat, cfg)))
        for i, think_ids in zip(live, encode_batch(tokenizer, thinks)):
            trajectories[i].think_tokens += len(think_ids)
            trajectories[i].turns[-1].think_tokens = len(think_ids)
        for (i, _), segment in zip(messages, encode_batch(tokenizer, [text for _, text in messages])):
            t = trajectories[i]
            if len(t.ids) + len(segment) + cfg.rollout.max_new_tokens > cfg.rollout.max_context:
                done[i] = True  # the next turn might not fit the context window
                continue
            t.ids += segment
            t.sampled += [0] * len(segment)
    return trajectories


def start_episodes(tokenizer, cfg, seeds, group_ids):
    """A fresh env per seed, reset with it, and a Trajectory holding its first prompt (first_prompt, all
    sampled 0) -> (trajectories, envs), one each per seed. A group's N seeds are equal: one puzzle and one
    prompt, N copies of the env. Raises ConfigError when a first prompt leaves no room in
    rollout.max_context for a reply of rollout.max_new_tokens."""
    trajectories, envs, started_envs, prompts = [], [], {}, []
    for seed, group in zip(seeds, group_ids):
        if seed not in started_envs:
            env = new_env(cfg)
            observation, _ = env.reset(int(seed))
            started_envs[seed] = env, first_prompt(env, observation, tokenizer, cfg)
        env, prompt = started_envs[seed]
        prompts.append(prompt)
        envs.append(copy_env(env))
        trajectories.append(Trajectory(seed=int(seed), group=int(group)))
    for t, ids in zip(trajectories, encode_batch(tokenizer, prompts)):
        if len(ids) + cfg.rollout.max_new_tokens > cfg.rollout.max_context:
            raise ConfigError(f"the first prompt has {len(ids)} tokens: with rollout.max_new_tokens="
                              f"{cfg.rollout.max_new_tokens} it exceeds rollout.max_context="
                              f"{cfg.rollout.max_context}")
        t.ids, t.sampled = list(ids), [0] * len(ids)  # each its own list, grown in place turn by turn
    return trajectories, envs


def encode_batch(tokenizer, texts):
    """Token-id lists of `texts`, in one tokenizer call, each distinct text once. A call per string, or the
    N equal prompts of a group tokenized N times, costs a large share of the host time of a big rollout,
    time in which the GPU waits. Equal texts share one id list: copy it before changing it."""
    distinct = list(dict.fromkeys(texts))
    ids = dict(zip(distinct, tokenizer(distinct, add_special_tokens=False)["input_ids"] if distinct else []))
    return [ids[text] for text in texts]


def decode_batch(tokenizer, responses):
    """The texts of sampled replies (special tokens left out), each distinct reply decoded once: the N
    replies of a group often repeat."""
    texts = {key: tokenizer.decode(list(key), skip_special_tokens=True)
             for key in dict.fromkeys(map(tuple, responses))}
    return [texts[tuple(response)] for response in responses]


def read_reply(text, response, max_actions, chat, cfg):
    """The paper's code's two ways of reading a reply (docs/paper.md §9.2, §9.6), both off in config.yaml and
    on in configs/ragen-paper.yaml. `text` is the reply's text after the forced answer start, `response`
    its sampled ids. -> (the text parse_answer reads, the ids the trajectory keeps):

      rollout.delete_special_strings  the text with the special strings deleted (envs.without_special_strings),
                                      as the paper's code's parser reads it; else the text as it is
      rollout.clean_history           the reply re-written as the paper's code keeps it (clean_reply), when it
                                      has a think/answer pair; else the sampled ids
    """
    read = without_special_strings(text, cfg.rollout.think) if cfg.rollout.delete_special_strings else text
    cleaned = clean_reply(text, max_actions, cfg.rollout.think, chat) if cfg.rollout.clean_history else None
    return read, cleaned or response


def step_env(env, actions, t):
    """Execute a turn's actions on `env`, in order, until the episode ends (the rest are skipped); count
    them and those that changed the state in trajectory `t`, and set t.success to the env's last word.
    -> (the env's reward summed over the executed actions, the executed actions, whether the episode ended).

        FrozenLake, "Left || Down || Up" where Down reaches the goal -> (1.0, ["Left", "Down"], True)
    """
    env_reward, executed = 0.0, []
    for action in actions:
        _, reward, terminated, truncated, info = env.step(action)
        executed.append(action)
        env_reward += reward
        t.num_actions += 1
        t.num_effective += int(info["effective"])
        t.success = info["success"]
        if terminated or truncated:  # the episode ended mid-turn: the rest are skipped
            return env_reward, executed, True
    return env_reward, executed, False


def next_user_message(closing, env_reward, turn, observation, actions_left, chat, cfg):
    r"""The env's answer to a reply as the template writes the next user message -> the text from the end of
    the reply to the start of the next one: `closing` (append_reply's template text that closes the reply
    and opens the user message), the env's reward of the turn (reward_message), turn `turn`'s state and
    action budget (turn_message), then the template's text that opens the assistant reply and the forced
    answer start. ChatML, a reply that ended with <|im_end|>, turn 2:

        "\n<|im_start|>user\n" + "Reward:\n-0.1\n" + "\nTurn 2:\nState:\n#_P\nYou have 9 actions left. Always ...\n"
        + "<|im_end|>\n<|im_start|>assistant\n" + "<think>"
    """
    return (closing + reward_message(env_reward) + turn_message(turn, observation, actions_left, cfg)
            + chat.open_assistant + answer_prefix(cfg))


def explain_answer(text, parsed, valid_actions, require_think, cut_at):
    """parse_answer's reading of a reply (`parsed`), for people -> (answer, problem): the text between the
    <answer> tags of the pair it read ("" without one), and why the format broke, in words ("" when it
    held). `cut_at` is rollout.max_new_tokens when the reply reached it without a stop token, else False.
    The words name tags and counts, never the model's own text, which a reader sees beside them.

        "<think>go</think><answer>Jump</answer>" -> ("Jump", "unknown action (the actions are Up, ...)")
        "<think>the box is left. the box is left." (cut at 100 tokens)
            -> ("", "no </think> closes the thought; cut at the token limit: 100 tokens, no stop token")
    """
    pair = _first_pair(text, require_think)  # the pair parse_answer read
    if parsed.format_ok:
        return pair[1], ""
    if pair is None:
        problem = missing_tag(text, require_think)
    else:  # the answer was read, and some piece of it is no action (parse_answer says which it kept)
        problem = ("an empty answer" if not pair[1].replace("|", "").strip() else
                   f"unknown action (the actions are {', '.join(valid_actions)})")
    if cut_at:
        problem += f"; cut at the token limit: {cut_at} tokens, no stop token"
    return ("" if pair is None else pair[1]), problem


def missing_tag(text, require_think):
    """Which tag envs._first_pair looked for in vain, in its order -> words."""
    if not require_think:
        return "no <answer>" if "<answer>" not in text else "no </answer> closes the answer"
    start = text.find("<think>")
    if start < 0:
        return "no <think>"
    close = text.find("</think>", start + len("<think>"))
    if close < 0:
        return "no </think> closes the thought"
    if _THINK_THEN_ANSWER.search(text, close) is None:  # linear: one try per "<" of the text
        return "no <answer> right after </think>"
    return "no </answer> closes the answer"


_THINK_THEN_ANSWER = re.compile(r"</think>\s*<answer>")


def append_reply(ids, sampled, response, chat):
    """Append a reply the model sampled (token ids, as sampled: cut after a stop id, or by max_new_tokens) to
    a trajectory's `ids` and `sampled` lists, in place: its tokens are the model's own, sampled = 1, the only
    tokens that get a loss. -> the text of the chat template that must close the reply before the next user
    message (tokenized with it, sampled = 0). A reply that stopped on the template's end-of-turn token
    (chat.end_of_turn_id) holds that token already, and the model learns to stop there: the closing text
    is chat.close_assistant without its first piece, the end-of-turn token's text (a special token's text is
    its token string, chat.tokenizer.convert_ids_to_tokens(id), with no decode call: the rollout decodes
    each distinct reply once a turn, and nothing more). A reply cut by max_new_tokens, or stopped by another
    stop id, gets the whole of chat.close_assistant, its end of turn included: template text, not the
    model's. Either way the transcript reads as the template renders it.

    ChatML, close_assistant "<|im_end|>\n<|im_start|>user\n":
        reply "...</answer><|im_end|>": sampled 1 ... 1 1, closing "\n<|im_start|>user\n"
        reply "...</ans" (cut)        : sampled 1 ... 1,   closing "<|im_end|>\n<|im_start|>user\n"
    """
    # BEGIN SOLUTION ex9-response-mask
    ids += response
    sampled += [1] * len(response)
    closing = chat.close_assistant
    if response and response[-1] == chat.end_of_turn_id:  # the model closed its turn itself
        closing = closing[len(chat.tokenizer.convert_ids_to_tokens(chat.end_of_turn_id)):]
    return closing
    # END SOLUTION


def clean_reply(text, max_actions, think, chat):
    """A reply re-written as the paper's code keeps it in the history and trains on it (rollout.
    clean_history, docs/paper.md §9.2): the first think/answer pair with the special strings deleted and
    both texts stripped, the answer cut to its first max_actions pieces (joined by " || ") when it has
    more, then the end-of-turn token. -> token ids after the forced answer start, or None (no pair: the
    reply stays as it was sampled).

        "<think> go<|im_end|> </think>  <answer>Up||Up||Left</answer> bye", 2 actions
        -> the ids of "go</think><answer>Up || Up</answer>" + [end of turn]
    """
    pair = cleaned_pair(text, think)
    if pair is None:
        return None
    thought, answer = pair[0].strip(), pair[1].strip()
    pieces = [piece.strip() for piece in answer.split("||") if piece.strip()]
    if len(pieces) > max_actions:
        answer = " || ".join(pieces[:max_actions])
    body = f"{thought}</think><answer>{answer}</answer>" if think else f"{answer}</answer>"
    return chat.tokenizer(body, add_special_tokens=False)["input_ids"] + [chat.end_of_turn_id]


def left_pad(contexts, pad_id, width=None):
    """Token-id lists -> input_ids, attention_mask: (B, W) long tensors, left-padded so that every row's
    next token is at column W, with W = `width` or the longest context. Filled in numpy: a torch.tensor
    per row is several times slower, once per turn for every context of the batch.

        left_pad([[5, 6, 7], [8]], pad_id=0) -> [[5, 6, 7], [0, 0, 8]], mask [[1, 1, 1], [0, 0, 1]]
    """
    lengths = np.array([len(context) for context in contexts])  # (B,)
    width = width or int(lengths.max())
    input_ids = np.full((len(contexts), width), pad_id, dtype=np.int64)  # (B, W)
    for row, context in zip(input_ids, contexts):
        row[width - len(context):] = context
    attention_mask = np.arange(width)[None, :] >= (width - lengths)[:, None]  # (B, W)
    return torch.from_numpy(input_ids), torch.from_numpy(attention_mask.astype(np.int64))


def cut_at_stop(row, stop_ids):
    """A sampled row up to and including its first stop token (kept: the model learns to stop)."""
    for i, token in enumerate(row):
        if token in stop_ids:
            return row[:i + 1]
    return row


@dataclass
class RolloutModel:
    """The model the episodes are sampled from (the actor itself on the CPU, a bf16 copy of it on a GPU:
    launch.build_rollout_model), its chat format, and how it decodes: transformers' `generate` when `decoder`
    is None, else the fast engine's static decoder (fast/decoder.py, rollout.engine), built once for the
    rollout batch. The trainer, the evaluation and the warm-up's teacher all sample through one."""
    model: torch.nn.Module
    chat: ChatFormat
    decoder: object = None


class LLMPolicy:
    """The LLM as a policy: sample one turn for all the contexts in one call, with the rollout model's decoder. The
    static decoder keeps the conversation's KV cache from one call to the next: an LLMPolicy serves one
    batch of episodes with fixed weights (the trainer makes one per rollout). generate_s adds up the time
    spent sampling, decode_steps the decoding steps: every turn takes as many as its longest reply has
    tokens, so one rambling row makes the whole batch wait."""

    def __init__(self, rollout_model, cfg, temperature):
        self.rollout_model, self.cfg, self.temperature = rollout_model, cfg, temperature
        self.generate_s = 0.0  # the rest of perf/rollout_s is envs and tokenizer
        self.decode_steps = 0
        self.calls = 0

    @torch.no_grad()
    def __call__(self, contexts):
        model, chat, decoder = self.rollout_model.model, self.rollout_model.chat, self.rollout_model.decoder
        cfg = self.cfg
        started, was_training = time.perf_counter(), model.training
        # On the CPU train() samples with the actor itself; with gradient checkpointing, train mode drops the
        # KV cache.
        model.eval()
        if decoder is not None:
            new_tokens = decoder.generate(contexts, self.temperature, reuse=self.calls > 0)
        else:
            input_ids, attention_mask = (x.to(model.device) for x in left_pad(contexts, chat.pad_id))
            sampling = dict(do_sample=True, temperature=self.temperature, top_k=0, top_p=1.0) \
                if self.temperature > 0 else dict(do_sample=False)
            # Pass every sampling knob: generate() would otherwise apply the model's generation_config
            # (Qwen's: top_k=20, top_p=0.8, repetition_penalty=1.05) and sample from another distribution.
            new_tokens = model.generate(input_ids=input_ids, attention_mask=attention_mask,
                                        max_new_tokens=cfg.rollout.max_new_tokens,
                                        min_new_tokens=cfg.rollout.min_new_tokens,
                                        eos_token_id=list(chat.stop_ids), pad_token_id=chat.pad_id,
                                        repetition_penalty=1.0, **sampling)[:, input_ids.shape[1]:]
        stop_ids = set(chat.stop_ids)
        responses = [cut_at_stop(row, stop_ids) for row in new_tokens.tolist()]  # one host transfer per turn
        model.train(was_training)
        self.calls += 1
        self.decode_steps += new_tokens.shape[1]
        self.generate_s += time.perf_counter() - started
        return responses


def random_policy(chat, cfg, rng):
    """Scripted answers with uniformly random actions, closed by the end-of-turn token (the format
    warm-up's teacher: it shows the answer format, never which action is good)."""
    env = new_env(cfg)  # only for its action names and budget

    def policy(contexts):
        answers = [random_answer(rng, env, cfg) for _ in contexts]
        return [chat.tokenizer(a, add_special_tokens=False)["input_ids"] + [chat.end_of_turn_id]
                for a in answers]

    return policy


def random_answer(rng, env, cfg):
    """The text a teacher writes after the thought: "</think><answer>Up || Left</answer>" (without the closing
    think tag with rollout.think=false), a uniform number of uniformly random actions
    (envs.random_turn_actions)."""
    actions = " || ".join(random_turn_actions(rng, env.actions, actions_per_turn(env, cfg)))
    return f"{'</think><answer>' if cfg.rollout.think else ''}{actions}</answer>"


THOUGHT_QUESTION = "Think about the state and what to do next."


def thought_prompt(context, cfg):
    r"""A warm-up context as the model would see it with no answer format to follow: the forced answer start
    is dropped, every format line with it, and the last one gives way to THOUGHT_QUESTION. What the model
    writes after it is its own thought about the state, in its own words.

      "...You have 10 actions left. Always output: <think> [Your thoughts] </think> ... (tokens).\n<|im_end|>
      <|im_start|>assistant\n<think>"
      -> "...You have 10 actions left. Think about the state and what to do next.\n<|im_end|>
      <|im_start|>assistant\n"
    """
    line = " " + format_line(cfg)
    assert context.endswith(answer_prefix(cfg)) and line in context, "not a context of the paper's prompt"
    head, _, tail = context[:-len(answer_prefix(cfg))].rpartition(line)
    return head.replace(line, "") + " " + THOUGHT_QUESTION + tail


def clean_thought(text):
    r"""The thought the model wrote, kept to its first line and cut before any tag, and after its last full
    sentence when it has one: no tag can end up inside <think>, and no half sentence closes it.

    >>> clean_thought("The box is left of me. Push it, then<answer>Up")
    'The box is left of me.'
    >>> clean_thought("<think>go up\n###")
    'go up'
    >>> clean_thought("Move 2.5 steps left. Then")
    'Move 2.5 steps left.'
    """
    text = text.strip().removeprefix("<think>").split("<")[0].split("\n")[0].strip()
    ends = [m.end() for m in re.finditer(r"[.!?](?=\s|$)", text)]  # "2.5" ends no sentence
    return text[:ends[-1]] if ends else text


def echoes(thought, prompt):
    """Does the thought repeat a sentence of three words or more of its prompt, word for word?

    >>> echoes("You have 9 actions left. Go.", "State: ... You have 9 actions left. Think about ...")
    True
    """
    return any(len(sentence.split()) >= 3 and sentence in prompt
               for sentence in re.split(r"(?<=[.!?])\s+", thought))


def own_thoughts_policy(rollout_model, cfg, rng, tries=4):
    """The format warm-up's teacher with warmup.thoughts=own: each answer is a thought the model itself writes
    when asked about the state without the format line (thought_prompt, sampled at warmup.thought_temperature,
    its first warmup.thought_tokens tokens kept), then a uniformly random valid action, closed by the
    end-of-turn token. The thought is the model's own, never a plan: the answer does not follow from it, so
    success stays at the random policy's. A thought of fewer than five words (a grid row, an empty line), or
    one that repeats a sentence of its prompt ("You have 10 actions left."), is sampled again, up to `tries`
    times; the last try is kept as it is. Reply ids: the thought's, then the format's
    (" </think><answer>Up</answer>" and the end-of-turn id), tokenized apart, so the format starts at the
    reply's first token that holds "<"; the thought is cut so that the reply fits rollout.max_new_tokens.
    A static decoder samples up to rollout.max_new_tokens, cut after."""
    # the env only for its action names and budget
    chat, tokenizer, env = rollout_model.chat, rollout_model.chat.tokenizer, new_env(cfg)
    sampling = copy.deepcopy(cfg)  # transformers' generate (no decoder) stops at the thought's limit
    sampling.rollout.max_new_tokens, sampling.rollout.min_new_tokens = cfg.warmup.thought_tokens, 0

    def policy(contexts):
        asked = [thought_prompt(text, cfg) for text in tokenizer.batch_decode(contexts)]
        prompts = [tokenizer(text, add_special_tokens=False)["input_ids"] for text in asked]
        thoughts, todo = [""] * len(contexts), list(range(len(contexts)))
        for _ in range(tries):
            sampled = LLMPolicy(rollout_model, sampling, cfg.warmup.thought_temperature)([prompts[i] for i in todo])
            texts = tokenizer.batch_decode([ids[:cfg.warmup.thought_tokens] for ids in sampled],
                                           skip_special_tokens=True)
            for i, text in zip(todo, texts):
                thoughts[i] = clean_thought(text)
            todo = [i for i in todo if len(thoughts[i].split()) < 5 or echoes(thoughts[i], asked[i])]
            if not todo:
                break
        replies = []
        for thought in thoughts:
            answer = tokenizer(" " + random_answer(rng, env, cfg), add_special_tokens=False)["input_ids"]
            room = max(0, cfg.rollout.max_new_tokens - len(answer) - 1)
            replies.append(tokenizer(" " + thought, add_special_tokens=False)["input_ids"][:room]
                           + answer + [chat.end_of_turn_id])
        return replies

    return policy


def thought_length(reply_ids, tokenizer):
    """How many of a reply's first tokens are its thought: those before the first token that holds "<" (the
    closing tag; a thought of the own-thoughts teacher holds none), less the blank tokens just before it.
    -> int; the whole reply, less its trailing blanks, when no token holds "<" (a reply cut by
    max_new_tokens). A thought that writes "<" itself ("x<y") counts up to there. An id the tokenizer does not
    know holds no "<" (a model may have more embedding rows than its tokenizer has tokens, as Qwen2.5 has)."""
    tokens = tokenizer.convert_ids_to_tokens(list(reply_ids))  # None for an id it does not know
    end = next((i for i, token in enumerate(tokens) if token and "<" in token), len(tokens))
    while end > 0 and not tokenizer.decode(reply_ids[end - 1:end]).strip():
        end -= 1
    return end


def reply_spans(sampled):
    """(start, end) of each reply in a trajectory: the runs of 1s in its `sampled`.

    >>> reply_spans([0, 0, 1, 1, 0, 1])
    [(2, 4), (5, 6)]
    """
    spans, start = [], None
    for i, flag in enumerate([*sampled, 0]):
        if flag and start is None:
            start = i
        elif not flag and start is not None:
            spans.append((start, i))
            start = None
    return spans


def without_thoughts(ids, sampled, tokenizer):
    """`sampled` with each reply's thought tokens set to 0: a warm-up loss then covers only the format tokens,
    from the closing tag on (warmup.thought_loss=false). -> a new list.

        a reply " I see a box </think><answer>Up</answer><|im_end|>": sampled 1 1 1 1 1 1 ...
                                                                           -> 0 0 0 0 1 1 ...
    """
    out = list(sampled)
    for start, end in reply_spans(sampled):
        thought = thought_length(ids[start:end], tokenizer)
        out[start:start + thought] = [0] * thought
    return out
