"""The evaluation and its samples: evaluate (eval.k rollouts of each fixed evaluation seed, at
eval.temperature), the records of the episodes it keeps (RUN_DIR/samples.jsonl, one JSON line each), and their
rendering for people (samples.md). ragen_mini.train() evaluates through launch.py; the viewer, findings.py
--keep and the resume read the records.
"""
import json
import os
import re

import numpy as np
import torch
from tqdm import tqdm

import viewer
from bookkeeping import rollout_metrics, write_file
from rollout import LLMPolicy, play_episodes


def evaluate(rollout_model, cfg, title, samples_path, iteration=None):
    """eval.k rollouts per fixed evaluation seed, in chunks of the training batch (no more memory than a
    training rollout; the static decoder is the training one). The first rollout of the first eval.samples
    seeds is kept as records (episode_record) titled `title` ("Evaluation at iteration 10") of training
    iteration `iteration` (None: read off the title, iteration_of): appended to the .jsonl beside
    samples_path (RUN_DIR/samples.md -> RUN_DIR/samples.jsonl) and rendered into samples_path (write_samples),
    then drawn in RUN_DIR/viewer.html. -> eval/success (the mean over all rollouts), and with eval.k > 1
    eval/pass@k: the fraction of seeds solved by at least one of their k rollouts."""
    seeds = [seed for seed in range(cfg.eval.seed_offset, cfg.eval.seed_offset + cfg.eval.num_seeds)
             for _ in range(cfg.eval.k)]
    chunk = cfg.rollout.groups * cfg.rollout.group_size
    trajectories = []
    # Sample from a copy of the random state: an evaluation added or left out (the last iteration of a run
    # that is later extended) never shifts the training's random stream, so resuming equals not stopping.
    with torch.random.fork_rng():
        for start in tqdm(range(0, len(seeds), chunk), desc=title.lower(), leave=False, unit="batch"):
            part = seeds[start:start + chunk]
            trajectories += play_episodes(LLMPolicy(rollout_model, cfg, cfg.eval.temperature), rollout_model.chat, cfg,
                                          part, part)
    iteration = iteration_of(title) if iteration is None else iteration
    records = [episode_record(t, title, iteration, k)  # read these to see the echo trap happen
               for k, t in enumerate(trajectories[::cfg.eval.k][:cfg.eval.samples])]
    if records:  # eval.samples=0 keeps none
        write_samples(samples_path, records)
        viewer.write_viewer(os.path.dirname(samples_path))  # the same episodes as pictures: viewer.html
    metrics = rollout_metrics(trajectories, "eval")
    metrics = {k: metrics[k] for k in ("eval/success", "eval/reward_mean", "eval/actions_mean",
                                       "eval/valid_action_frac", "eval/think_tokens",
                                       "eval/think_tokens_median", "eval/placeholder_thoughts",
                                       "eval/distinct_thoughts")}
    if cfg.eval.k > 1:
        solved = {}
        for t in trajectories:
            solved[t.seed] = solved.get(t.seed, False) or t.success
        metrics[f"eval/pass@{cfg.eval.k}"] = float(np.mean(list(solved.values())))
    return metrics


# ----------------------------------------------------------------------------------------------
# The evaluation samples: records, one JSON line per episode (RUN_DIR/samples.jsonl, --eval's
# eval_samples.jsonl), and their rendering for people (samples.md, eval_samples.md). The records are the data:
# the viewer, findings.py --keep and the resume read them (viewer.read_samples); nothing reads the markdown.

def episode_record(trajectory, title, iteration, episode):
    """One sampled episode (a rollout.Trajectory) as a record, one JSON line of samples.jsonl:

        title         the evaluation's title, "Evaluation at iteration 10"
        iteration     the training iteration it belongs to (0 for the evaluation before the format warm-up,
                      whose metrics are iteration 0's pre_warmup/): the resume drops records by it
        episode       its place among the evaluation's records, from 0 (a new evaluation starts again)
        seed, reward  the env seed; the episode's reward, summed over turns, format penalties included
        success       the env says the task was solved
        turns         one dict per turn (rollout.Turn):
            turn            its number, from 1
            state           the env's rendering the model saw in the turn's user message
            actions_left    the action budget that message stated
            reply           the sampled tokens decoded, whole (after the forced "<think>" of the prompt)
            think, answer   the texts between the <think> tags and the <answer> tags that the parser read
                            ("" without them)
            actions         the actions the env executed
            format_ok       the reply kept the format
            format_problem  why not, in words ("" when it did): a missing tag, cut at the token limit, ...
            reward          the env's rewards of the turn + the format penalty

    viewer.RECORD_KEYS and viewer.TURN_KEYS hold the same keys with their types, for the reader."""
    return dict(title=title, iteration=int(iteration), episode=episode, seed=int(trajectory.seed),
                reward=float(trajectory.reward), success=bool(trajectory.success),
                turns=[dict(turn=k, state=turn.state, actions_left=int(turn.actions_left), reply=turn.reply,
                            think=turn.think, answer=turn.answer, actions=list(turn.actions),
                            format_ok=bool(turn.format_ok), format_problem=turn.format_problem,
                            reward=float(turn.reward))
                       for k, turn in enumerate(trajectory.turns, 1)])


def iteration_of(title):
    """The training iteration of an evaluation, from the title the trainer gives it: "... at iteration 10"
    -> 10; "Evaluation before the format warm-up" -> 0."""
    match = re.search(r"at iteration (\d+)$", title)
    return int(match[1]) if match else 0


def records_path(samples_path):
    """RUN_DIR/samples.md -> RUN_DIR/samples.jsonl: the records beside their rendering."""
    return os.path.splitext(samples_path)[0] + ".jsonl"


def write_samples(samples_path, records):
    """Append records to the .jsonl beside samples_path, then their rendering to samples_path: the records
    first, since they are the data and the markdown can be made again from them. ensure_ascii: every
    character outside ASCII is written as a \\u escape, so any string the model wrote, invalid Unicode (a
    lone surrogate) and line separators included, becomes one line of plain ASCII."""
    set_aside_markdown(samples_path)
    path = records_path(samples_path)
    lines = "".join(json.dumps(record, ensure_ascii=True) + "\n" for record in records)
    write_file(path, ("\n" if ends_mid_line(path) else "") + lines, "a")
    write_file(samples_path, samples_markdown(records), "a")


def ends_mid_line(path):
    """Does the file end without a newline (a line cut by a crash)? Then the next record starts a line of its
    own, and only the cut one is damaged."""
    if not os.path.isfile(path) or os.path.getsize(path) == 0:
        return False
    with open(path, "rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1) != b"\n"


def set_aside_markdown(samples_path):
    """A samples.md with no samples.jsonl beside it was written by an older ragen-mini, as the only copy of
    its samples: it becomes samples.old.md, kept as it was, rather than be mixed with the records' rendering
    (or, on resume, rewritten from records it does not know)."""
    old = os.path.splitext(samples_path)[0] + ".old.md"
    if (os.path.isfile(samples_path) and not os.path.exists(records_path(samples_path))
            and not os.path.lexists(old)):
        os.rename(samples_path, old)
        tqdm.write(f"{samples_path} was written by an older ragen-mini (no "
                   f"{os.path.basename(records_path(samples_path))} beside it): kept as {old}, unchanged "
                   "(it may hold evaluations after the checkpoint); from now on the samples are records")


def drop_samples_after(samples_path, iteration):
    """On resume: the records of evaluations after `iteration` (their iteration field) leave the .jsonl
    beside samples_path, and samples_path is rendered again from the records that stay. A damaged line (a
    crash while it was written) has no iteration to trust: it goes, and is said."""
    set_aside_markdown(samples_path)
    path = records_path(samples_path)
    if not os.path.exists(path):
        return
    records, damaged = viewer.read_samples(path)
    if damaged:
        tqdm.write(f"{path}: left out {len(damaged)} damaged line(s): {'; '.join(damaged)}")
    kept = [record for record in records if record["iteration"] <= iteration]
    write_file(path, "".join(json.dumps(record, ensure_ascii=True) + "\n" for record in kept))
    write_file(samples_path, samples_markdown(kept))


def samples_markdown(records):
    """The records as markdown, for people: a heading per evaluation and per episode (seed, reward, success),
    per turn a line with its reward, actions and format, then the state and the reply as written. Model text
    appears only inside code blocks whose fence no line of it can close (fence): no reply makes a heading or
    ends its block. Lone surrogates (invalid Unicode, which UTF-8 cannot hold) are written as \\udXXX."""
    parts = []
    for evaluation in viewer.group_evaluations(records, source=""):
        parts.append(f"\n# {evaluation['title']}\n")
        for record in evaluation["episodes"]:
            parts.append(f"\n## seed {record['seed']}: reward {record['reward']:g}, "
                         f"success {record['success']}\n")
            parts += [turn_markdown(turn) for turn in record["turns"]]
    return "".join(parts).encode("utf-8", "backslashreplace").decode("utf-8")


def turn_markdown(turn):
    """One turn of samples.md (samples_markdown). The action names are the env's own spelling; the reason a
    format broke names tags, which a markdown viewer would take for HTML outside a code span."""
    verdict = "format ok" if turn["format_ok"] else f"format broken: {code_span(turn['format_problem'])}"
    return (f"\n- turn {turn['turn']}: reward {turn['reward']:g}, actions [{', '.join(turn['actions'])}], "
            f"{verdict}; the state ({turn['actions_left']} actions left), then the reply as sampled:\n\n"
            f"{fence(turn['state'])}\n{fence(turn['reply'])}")


def backticks(text, least):
    """A run of backticks longer than any in `text`, and at least `least` long: a code block or span opened
    with it ends only at a run as long (CommonMark), which the text cannot hold."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    return "`" * max(least, longest + 1)


def fence(text):
    """A fenced code block holding `text` verbatim: no line of the text closes it."""
    ticks = backticks(text, 3)
    return f"{ticks}\n{text}\n{ticks}\n"


def code_span(text):
    """`text` as inline code, on one line (a code span may not hold a blank line)."""
    ticks = backticks(text, 1)
    return f"{ticks} {' '.join(text.split())} {ticks}"
