"""The run around the algorithm: what `python ragen_mini.py` does before, between and after the iterations
of ragen_mini.train(), which a reader of StarPO may skip.

    setup()             the run folder, then build_run(): the model and the engine it computes with
                        (models.choose_engine), the format warm-up, critic, reference, optimisers and random
                        states, or a checkpoint's (restore()); the evaluation at iteration 0
    end_of_iteration()  after each iteration: timings, the evaluation, metrics.jsonl, plots, the checkpoint
    finish()            the end of a run: its logger closed, its folder unlocked, the summary
    evaluate_saved_actor()  --eval RUN_DIR
    main()              the command line, which ragen_mini.main hands over to

The format warm-up trains with ragen_mini's own scoring (collate, micro_batches, token_logprobs), so this
file imports ragen_mini, and ragen_mini imports this one inside train() and main(), not at its top.
"""
import argparse
import copy
import json
import os
import random
import resource
import time
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Callable

import numpy as np
import torch
import transformers
import yaml
from tqdm import tqdm
from transformers import AutoModelForCausalLM

import export
import plots
import ragen_mini
import run_log
import tiny
from bookkeeping import (CtrlC, RunError, Stopped, Watchdog, check_finite_weights, check_no_links,
                         check_resumable, code_version, describe_os_error, discard_start,
                         drop_metrics_after, load_state, open_run_folder, release_lock,
                         report_zero_signal, run_summary, save_checkpoint, write_file, write_metrics)
from config import ConfigError, load_config, load_run_config, namespace
from evaluation import drop_samples_after, evaluate
from models import (Critic, Engine, bf16_copy, build_critic, choose_engine, copy_weights, load_models,
                    train_device, use_cpu_threads)
from rollout import (ChatFormat, RolloutModel, chat_format, own_thoughts_policy, play_episodes, random_policy,
                     without_thoughts)


@dataclass
class Run:
    """What a run holds between iterations; setup() builds it, bookkeeping.save_checkpoint() saves it."""
    cfg: SimpleNamespace                 # the config as given (its rollout.engine may say auto)
    engine: Engine                       # beside it, the engine resolved: the functions the run computes with
    device: torch.device
    run_dir: str
    chat: ChatFormat
    actor: torch.nn.Module               # trained in float32
    # plays the episodes: the actor itself on the CPU, a bf16 copy on a GPU
    rollout_model: RolloutModel
    critic: Critic                       # None with GRPO
    reference: torch.nn.Module           # the frozen starting policy; None without a KL term
    optimizers: dict                     # "actor" (and "critic") -> AdamW
    seed_rng: np.random.Generator        # draws the training seeds, below eval.seed_offset
    generator: torch.Generator           # shuffles the mini-batches
    start: int                           # the first iteration to train
    beat: Callable                       # tells the watchdog what the run starts doing (bookkeeping.Watchdog)
    started: float = field(default_factory=time.time)
    zero_signal_since: int = None        # the iteration a stretch without learning signal began at
    last_eval: float = None              # the latest eval/success, for the progress bar
    logger: object = None                # train.log_to's TensorBoard writer or W&B run (run_log); None: none


def setup(cfg_dict, resume_dir, ctrl_c=None, watchdog=None):
    """The run folder (refused if it holds another run, locked against a second process), then build_run. A
    start that fails (a model that does not load, a first prompt longer than rollout.max_context, a full disk)
    leaves nothing behind. Once it is built, a signal lets an iteration finish and saves a checkpoint
    (bookkeeping.CtrlC)."""
    beat = watchdog.beat if watchdog else (lambda doing: None)  # a run that stops moving ends (Watchdog)
    run_log.check_installed(cfg_dict["train"]["log_to"])  # a missing package: one line, before any model
    run_dir, made = open_run_folder(namespace(cfg_dict), resume_dir)
    if watchdog:
        watchdog.run_dir = run_dir  # a run that stops moving is told to resume from here, or to start again
    try:
        run = build_run(cfg_dict, run_dir, resume_dir, beat)
    except BaseException:
        if not resume_dir:
            discard_start(run_dir, made)
        else:  # the checkpoint stays as it was, free for the next --resume
            release_lock(run_dir)
        raise
    if ctrl_c is not None:
        ctrl_c.training = True  # from here on a signal lets the iteration finish and saves a checkpoint
    return run


def load_policy(cfg, saved_actor=None):
    """What training and --eval both start from: the actor (from SAVED_ACTOR, a checkpoint's actor folder,
    when given), its chat format (end-of-turn and stop ids, from the model's own template), the engine
    (models.choose_engine: rollout.engine resolved for this model and device, once) and the rollout model that
    plays the episodes. -> (device, actor, rollout_model, engine); the chat format is rollout_model.chat"""
    device = train_device(cfg)
    torch.manual_seed(cfg.seed)  # sampling; env seeds come from the run's seed_rng, puzzles from their seeds
    tokenizer, actor = load_models(cfg, device, saved_actor)
    if saved_actor:
        check_finite_weights(actor, saved_actor)
    chat = chat_format(tokenizer, actor.generation_config)
    engine = choose_engine(cfg, actor, device)
    actor.logprob_and_entropy = engine.logprob_and_entropy  # the log-softmax ragen_mini.token_logprobs uses
    return device, actor, build_rollout_model(actor, chat, cfg, device, engine), engine


def record_code_version(cfg_dict, resume_dir):
    """A new run writes the code it runs (bookkeeping.code_version) into its config's code section; a resumed
    one keeps the version it started with, and says so when this checkout's differs."""
    now = code_version()
    if not resume_dir:
        cfg_dict["code"] = now
    elif now != cfg_dict["code"]:
        started = cfg_dict["code"]["commit"] or "an unrecorded commit"
        print(f"note: this run started with the code of {started}; it goes on with "
              f"{now['commit'] or 'code outside a git checkout'}{'' if now['clean'] else ' (with changes)'}, "
              "and its config keeps the first")


def build_rollout_model(actor, chat, cfg, device, engine):
    """What samples the rollouts (rollout.RolloutModel): a bf16 copy of the actor on a GPU (the actor itself on the
    CPU), with the fast engine's static decoder, or transformers' generate on the readable path."""
    model = bf16_copy(actor) if device.type == "cuda" else actor
    return RolloutModel(model, chat, engine.fast.static_decoder(model, chat, cfg) if engine.fast else None)


def build_run(cfg_dict, run_dir, resume_dir, beat):
    """Models, format warm-up, critic, reference, optimisers and random states (restored from
    RUN_DIR/checkpoint on resume), and the evaluation at iteration 0 (on resume, the checkpoint's, if it is
    owed)."""
    record_code_version(cfg_dict, resume_dir)
    cfg = namespace(cfg_dict)
    saved_actor = os.path.join(resume_dir, "checkpoint", "actor") if resume_dir else None
    device, actor, rollout_model, engine = load_policy(cfg, saved_actor)
    write_file(os.path.join(run_dir, "config.yaml"), yaml.safe_dump(cfg_dict, sort_keys=False))
    first_metrics = {"iteration": 0}  # what happened before iteration 1, written with the first evaluation
    if not resume_dir and cfg.warmup.steps > 0:
        # a real model's own starting point
        if cfg.model.name not in tiny.IN_PROCESS_MODELS and cfg.eval.every > 0:
            before = evaluate(rollout_model, cfg, "Evaluation before the format warm-up",
                              os.path.join(run_dir, "samples.md"))
            first_metrics.update({key.replace("eval/", "pre_warmup/"): value
                                  for key, value in before.items()})
        warmup_start = time.time()
        first_metrics["warmup/loss"] = format_warmup(actor, rollout_model, cfg, device, beat)
        first_metrics["perf/warmup_s"] = time.time() - warmup_start
        copy_weights(actor, rollout_model.model)
        tqdm.write(f"format warm-up: {cfg.warmup.steps} steps in {first_metrics['perf/warmup_s']:.0f} s, "
                   f"final loss {first_metrics['warmup/loss']:.3f}")
    critic = build_critic(cfg, actor, device)
    reference = None
    if cfg.algo.kl_coef > 0:  # frozen copy of the starting policy, only when a KL term needs it
        reference = (AutoModelForCausalLM.from_pretrained(os.path.join(run_dir, "checkpoint", "reference"),
                                                          dtype=torch.float32).to(device)
                     if resume_dir else copy.deepcopy(actor)).eval().requires_grad_(False)
        reference.logprob_and_entropy = engine.logprob_and_entropy  # scored as the actor is (load_policy)
    if cfg.model.gradient_checkpointing:  # after the rollout model's copy: the rollout model never runs backward
        actor.gradient_checkpointing_enable()
        if critic is not None:
            critic.backbone.gradient_checkpointing_enable()
    if engine.fast:  # after every copy (a copy would share the compiled code); the rollout model decodes with its own
        engine.fast.compile_for_training(actor.base_model, critic and critic.backbone,
                                         reference and reference.base_model)
    fused = device.type == "cuda"  # one kernel for the whole AdamW step instead of one per tensor group
    optimizers = {name: torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=cfg.algo.weight_decay,
                                          fused=fused)
                  for name, model, lr in (("actor", actor, cfg.algo.actor_lr),
                                          ("critic", critic, cfg.algo.critic_lr))
                  if model is not None}
    run = Run(cfg=cfg, engine=engine, device=device, run_dir=run_dir, chat=rollout_model.chat, actor=actor,
              rollout_model=rollout_model, critic=critic, reference=reference, optimizers=optimizers,
              seed_rng=np.random.default_rng(cfg.seed), generator=torch.Generator().manual_seed(cfg.seed),
              start=1, beat=beat)
    if resume_dir:
        restore(run, load_state(run_dir))
        settle_evaluation_at_checkpoint(run)
    if run.start > cfg.train.iterations:
        tqdm.write(f"{run_dir} already has its {cfg.train.iterations} iterations: to train on, raise them, "
                   f"e.g. python ragen_mini.py --resume {run_dir} "
                   f"train.iterations={2 * cfg.train.iterations}")
    if device.type == "cuda" and engine.fast:
        tqdm.write("the first evaluation and iteration compile the decoder and the layers "
                   "(2-3 minutes; nothing later)")
    if run.start == 1 and cfg.eval.every > 0:
        beat("evaluating at iteration 0")
        write_metrics(run_dir, {**first_metrics, **evaluate(rollout_model, cfg, "Evaluation at iteration 0",
                                                            os.path.join(run_dir, "samples.md"))})
    # last, once metrics.jsonl is settled: the logger starts from its rows (iteration 0, or the checkpoint's)
    run.logger = run_log.open_logger(cfg_dict, run_dir, resumed_at=run.start - 1 if resume_dir else None)
    return run


def format_warmup(actor, rollout_model, cfg, device, beat=lambda doing: None):
    """Supervised warm-up on transcripts of the answer format (the "cold start" of many RL recipes), for
    models that cannot follow it yet: the in-process models' random weights, and small pretrained models
    that echo the prompt's placeholders instead of answering. The transcripts' actions are uniformly
    random: it teaches the format, not the game, so RL starts at random-policy skill (compare eval/success
    at iteration 0 with baselines.py).

    What stands inside <think> is warmup.thoughts: none, an empty thought (the teacher closes the tag at
    once; RL starts from a model that does not reason), or own, the thoughts the model itself writes about
    each state when asked without the format line (rollout.own_thoughts_policy). With warmup.thought_loss
    the loss covers the thought too, so that the model learns to write, under the paper's prompt, what it
    would think unprompted; without it only the closing tag and the answer are learned.

    With warmup.env_text it also learns to predict the environment's replies (the reward, the next
    grid): the tiny model's stand-in for what Qwen brings from pre-training. To predict the grid after
    "Up" it must find the player and know how moves work, the very features a policy needs; which
    action is good is still left to RL, since the transcripts' actions are random."""
    chat, rng = rollout_model.chat, random.Random(cfg.seed)
    optimizer = torch.optim.AdamW(actor.parameters(), lr=cfg.warmup.lr)
    total = torch.tensor(float("nan"))
    for transcripts in tqdm(warmup_transcripts(rollout_model, cfg, rng), total=cfg.warmup.steps,
                            desc="format warm-up", leave=False):
        beat("in the format warm-up")
        if cfg.warmup.thoughts == "own" and cfg.rollout.think and not cfg.warmup.thought_loss:
            for t in transcripts:
                t.sampled = without_thoughts(t.ids, t.sampled, chat.tokenizer)
        batch = ragen_mini.collate(transcripts, chat.pad_id, device)
        if cfg.warmup.env_text:  # the targets: the answers and every token after the first one (B, T-1)
            batch.loss_mask = batch.loss_mask.cummax(dim=1).values * batch.attention_mask[:, 1:]
        num_tokens = batch.loss_mask.sum()
        optimizer.zero_grad(set_to_none=True)
        total = 0.0
        for _, ids, mask in ragen_mini.micro_batches(batch, torch.arange(len(transcripts)), cfg):
            logp, _ = ragen_mini.token_logprobs(actor, ids, mask, cfg, temperature=1.0)
            loss = -(logp * mask).sum() / num_tokens  # summed over micro-batches: the batch's token mean
            loss.backward()
            total = total + loss.detach()
        torch.nn.utils.clip_grad_norm_(actor.parameters(), cfg.algo.grad_clip)
        optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return float(total)


def warmup_transcripts(rollout_model, cfg, rng):
    """The warm-up's transcripts, one list of warmup.batch_size Trajectory per step. The random teacher plays
    each step's as it comes; the model's own thoughts are all sampled first, in chunks of the training batch,
    from the model as it is before the warm-up (on the CPU the rollout model is the actor, which the warm-up
    trains)."""
    steps, size = cfg.warmup.steps, cfg.warmup.batch_size
    if cfg.warmup.thoughts == "none" or not cfg.rollout.think:
        for _ in range(steps):
            seeds = [rng.randrange(cfg.eval.seed_offset) for _ in range(size)]
            yield play_episodes(random_policy(rollout_model.chat, cfg, rng), rollout_model.chat, cfg, seeds, seeds)
        return
    seeds = [rng.randrange(cfg.eval.seed_offset) for _ in range(steps * size)]
    chunk, transcripts = cfg.rollout.groups * cfg.rollout.group_size, []
    for start in tqdm(range(0, len(seeds), chunk), desc="warm-up thoughts", leave=False):
        part = seeds[start:start + chunk]
        transcripts += play_episodes(own_thoughts_policy(rollout_model, cfg, rng), rollout_model.chat, cfg, part, part)
    for step in range(steps):
        yield transcripts[step * size:(step + 1) * size]


def restore(run, state):
    """Continue where the checkpoint stopped: weights, optimisers and every random state."""
    run.start = state["iteration"] + 1
    if run.critic is not None:
        run.critic.load_state_dict(state["critic"])
    for name, optimizer in run.optimizers.items():
        optimizer.load_state_dict(state["optimizers"][name])
    run.seed_rng.bit_generator.state = state["rng"]["numpy"]
    torch.set_rng_state(state["rng"]["torch"])
    if state["rng"]["cuda"] is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["rng"]["cuda"])
    run.generator.set_state(state["rng"]["generator"])
    forget_after(run.run_dir, state["iteration"])


def forget_after(run_dir, iteration):
    """On resume: the metrics lines and the evaluation samples written after ITERATION go; the resumed run
    writes them again."""
    drop_metrics_after(run_dir, iteration)
    drop_samples_after(os.path.join(run_dir, "samples.md"), iteration)


def settle_evaluation_at_checkpoint(run):
    """On resume: the checkpoint's metrics row (and samples.jsonl) gets the evaluation that a run never stopped
    would have there, so that resuming equals not stopping, evaluations included: one on the eval.every grid,
    or at the last of train.iterations. A Ctrl-C stops without evaluating: an evaluation owed is made now,
    from the checkpoint's weights and random state, the very ones it would have seen. A run's last iteration
    and a time limit's stop evaluate off the grid: a run resumed past them forgets that evaluation, which a
    run never stopped there does not make."""
    cfg, iteration = run.cfg, run.start - 1
    rows = plots.read_metrics(run.run_dir)
    if not rows or rows[-1]["iteration"] != iteration or iteration > cfg.train.iterations:
        # no row to settle (metrics.jsonl was lost), or a resume to fewer iterations, which trains nothing
        return
    owed = cfg.eval.every > 0 and (iteration % cfg.eval.every == 0 or iteration == cfg.train.iterations)
    if owed == ("eval/success" in rows[-1]):
        return
    row = {key: value for key, value in rows[-1].items() if not key.startswith("eval/")}
    # before the row is rewritten: a crash while evaluating leaves the row whole, the evaluation still owed
    if owed:
        row.update(evaluate(run.rollout_model, cfg, f"Evaluation at iteration {iteration}",
                            os.path.join(run.run_dir, "samples.md")))
    else:
        # that evaluation's samples go, and the row, written below
        forget_after(run.run_dir, iteration - 1)
    write_file(os.path.join(run.run_dir, "metrics.jsonl"),
               "".join(json.dumps(line) + "\n" for line in [*rows[:-1], row]))


def end_of_iteration(run, metrics, trajectories, batch, clock, progress, ctrl_c, bench):
    """Timings and memory, the zero-signal notice, the evaluation, metrics.jsonl, plots, checkpoint and
    progress bar. -> True when the run stops here (time limit or Ctrl-C)."""
    cfg, iteration = run.cfg, metrics["iteration"]
    if iteration == run.start and run.engine.fast:
        run.engine.fast.freeze_collector()  # what lives to the end leaves the cycle collector's passes
    metrics["perf/iteration_s"] = clock.times[-1] - clock.times[0]
    metrics["perf/gen_tokens_per_s"] = (sum(t.response_tokens for t in trajectories)
                                        / metrics["perf/rollout_s"])
    metrics["perf/trained_tokens"] = int(batch.loss_mask.sum())
    if run.device.type == "cuda":
        metrics["perf/peak_reserved_gb"] = torch.cuda.max_memory_reserved() / 2**30
    metrics["perf/peak_mem_gb"] = (torch.cuda.max_memory_allocated() if run.device.type == "cuda" else
                                   resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024) / 2**30
    run.zero_signal_since = report_zero_signal(metrics, run.zero_signal_since)
    if not bench and iteration == run.start + (run.device.type == "cuda"):  # a GPU's first iteration compiles
        left = cfg.train.iterations - iteration
        tqdm.write(f"iteration {iteration} took {metrics['perf/iteration_s']:.1f} s: at this pace the {left} "
                   f"iterations left take about {left * metrics['perf/iteration_s'] / 60:.0f} min, "
                   "evaluations apart"
                   + (f" (train.time_limit_min stops it at {cfg.train.time_limit_min:g})"
                      if cfg.train.time_limit_min > 0 else ""))
    interrupted = ctrl_c is not None and ctrl_c.pressed
    last = iteration == cfg.train.iterations or interrupted or (
        cfg.train.time_limit_min > 0 and time.time() - run.started > 60 * cfg.train.time_limit_min)
    # Ctrl-C stops at once, without evaluating. A resumed run makes the evaluation owed here, and forgets one
    # made off the eval.every grid at a stop it trains past (settle_evaluation_at_checkpoint): resuming equals
    # not stopping
    if cfg.eval.every > 0 and (iteration % cfg.eval.every == 0 or last) and not interrupted:
        metrics.update(evaluate(run.rollout_model, cfg, f"Evaluation at iteration {iteration}",
                                os.path.join(run.run_dir, "samples.md")))
    write_metrics(run.run_dir, metrics)
    run_log.log_row(run.logger, metrics)  # train.log_to: the same row, nothing else
    if bench:
        print(json.dumps({k: v for k, v in metrics.items() if k.startswith("perf/") or k == "iteration"}),
              flush=True)
    elif iteration % 10 == 0 or last:  # a page of plots costs about a second: not every iteration
        plots.plot_run(run.run_dir)
    if (cfg.checkpoint.every > 0 and (iteration % cfg.checkpoint.every == 0 or last)) or interrupted:
        save_checkpoint(run, iteration)
    run.last_eval = metrics.get("eval/success", run.last_eval)
    progress.set_postfix(rollout_success=f"{metrics['rollout/success']:.2f}",
                         entropy=f"{metrics['train/entropy']:.2f}",
                         eval_success="-" if run.last_eval is None else f"{run.last_eval:.2f}")
    # time limit or Ctrl-C (the bar ends by itself otherwise)
    return last and iteration < cfg.train.iterations


def finish(run, bench):
    """The end of a run: its logger closed, its folder unlocked, the cycle collector as it was, the summary."""
    run_log.close_logger(run.logger)
    release_lock(run.run_dir)
    if run.engine.fast:
        run.engine.fast.release_collector()
    if not bench:
        print(run_summary(run.run_dir, time.time() - run.started))


def evaluate_saved_actor(run_dir, overrides):
    """--eval RUN_DIR: the run's saved actor (RUN_DIR/checkpoint/actor) on the evaluation seeds, with the
    run's config and the overrides (eval.k=4 adds pass@4). Prints the metrics and appends them, with the
    checkpoint's iteration and the settings, to RUN_DIR/eval.jsonl; the samples go to
    RUN_DIR/eval_samples.jsonl (and .md)."""
    check_resumable(run_dir, flag="--eval")
    check_no_links(run_dir)
    cfg = namespace(load_run_config(run_dir, overrides))
    tqdm.write(f"loading the actor saved in {os.path.join(run_dir, 'checkpoint', 'actor')}")
    _, _, rollout_model, _ = load_policy(cfg, os.path.join(run_dir, "checkpoint", "actor"))
    iteration = load_state(run_dir, "--eval")["iteration"]
    metrics = evaluate(rollout_model, cfg, f"Evaluation of the checkpoint at iteration {iteration}",
                       os.path.join(run_dir, "eval_samples.md"))
    line = {"iteration": iteration, "eval.k": cfg.eval.k, "eval.num_seeds": cfg.eval.num_seeds,
            "eval.temperature": cfg.eval.temperature, **metrics}
    write_file(os.path.join(run_dir, "eval.jsonl"), json.dumps(line) + "\n", "a")
    print(json.dumps(line))
    return line


def main(argv=None):
    parser = argparse.ArgumentParser(description=ragen_mini.__doc__.split("\n")[0])
    parser.add_argument("--config", help="YAML file laid over config.yaml (default: config.yaml alone)")
    parser.add_argument("--resume", metavar="RUN_DIR", help="continue a run from RUN_DIR/checkpoint")
    parser.add_argument("--eval", metavar="RUN_DIR",
                        help="evaluate the actor saved in RUN_DIR/checkpoint (eval.k=K: pass@K)")
    parser.add_argument("--bench", type=int, metavar="K", default=0,
                        help="speed benchmark: K iterations of a random-weight Qwen2.5-0.5B-shaped model, "
                             "fixed tokens per turn, one JSON line of timings per iteration")
    parser.add_argument("--bench-tokens", type=int, default=128, help="new tokens per turn in --bench")
    parser.add_argument("--export", metavar="TARGET",
                        help="print the command that reruns a run's settings (RUN_DIR, "
                        "or --config FILE) in TARGET: ragen, RAGEN on verl for several GPUs (export.py)")
    parser.add_argument("overrides", nargs="*", help="section.key=value, e.g. env.name=frozenlake")
    args = parser.parse_args(argv)
    if args.export:  # export.py reads the run folder or the config itself
        raise SystemExit(export.main(["--to", args.export,
                                      *(["--config", args.config] if args.config else []), *args.overrides]))
    if (args.resume or args.eval) and args.config:
        parser.error(f"--config {args.config} with --resume or --eval: a run keeps its own "
                     "RUN_DIR/config.yaml; give changes as section.key=value overrides")
    if args.resume and args.eval:
        parser.error("--resume and --eval together: --resume RUN_DIR trains on, --eval RUN_DIR evaluates its "
                     "checkpoint; give one (after --resume, --eval RUN_DIR evaluates the result)")
    if args.bench < 0 or args.bench_tokens < 1:
        parser.error("--bench K needs K >= 1 iterations (0, the default, is no benchmark) and "
                     "--bench-tokens >= 1")
    transformers.utils.logging.disable_progress_bar()  # its loading and saving bars would break into ours
    overrides = list(args.overrides)
    if args.bench:
        if not any(o.startswith("model.name=") for o in overrides):
            overrides.insert(0, "model.name=random-qwen2.5-0.5b")
        overrides += [f"rollout.max_new_tokens={args.bench_tokens}",
                      f"rollout.min_new_tokens={args.bench_tokens}",
                      "eval.every=0", "checkpoint.every=0", f"train.iterations={args.bench}"]
    args.resume = args.resume and os.path.expanduser(args.resume)  # a quoted "~/runs/a": the shell left the ~
    args.eval = args.eval and os.path.expanduser(args.eval)
    try:
        if args.eval:
            check_resumable(args.eval, flag="--eval")
            use_cpu_threads(load_run_config(args.eval, overrides))
            with CtrlC() as ctrl_c:  # nothing to save: a signal stops it at once (Stopped, below)
                return evaluate_saved_actor(args.eval, overrides)
        if args.resume:
            check_resumable(args.resume)
        cfg = load_run_config(args.resume, overrides) if args.resume else load_config(args.config, overrides)
        use_cpu_threads(cfg)
        with CtrlC() as ctrl_c, Watchdog(cfg["train"]["stall_min"]) as watchdog:
            run_dir = ragen_mini.train(cfg, resume_dir=args.resume, bench=bool(args.bench), ctrl_c=ctrl_c,
                                       watchdog=watchdog)
        if ctrl_c.pressed:  # the summary says how to resume
            # the shell's code for "stopped by that signal": 130 for Ctrl-C
            raise SystemExit(128 + ctrl_c.signum)
        return run_dir
    except Stopped as stop:
        if args.eval:
            print(f"{ctrl_c.name}: the evaluation of {args.eval} stopped before its end; its result is not in "
                  f"{os.path.join(args.eval, 'eval.jsonl')}")
            raise SystemExit(128 + ctrl_c.signum) from None
        where = (f"{args.resume} keeps its checkpoint as it was" if args.resume else
                 "the run's folder was removed; start it again to train")
        print(f"{stop}: {where}")
        raise SystemExit(128 + ctrl_c.signum) from None
    except ConfigError as error:
        raise SystemExit(f"config error: {error}") from None
    except RunError as error:
        raise SystemExit(f"error: {error}") from None
    except OSError as error:  # a file the run could not write: a full disk, a folder it may not write
        raise SystemExit(describe_os_error(error)) from None
    except torch.OutOfMemoryError:
        raise SystemExit("error: the GPU ran out of memory. Lower algo.micro_batch_size (8 fits a 40 GB "
                         "card), algo.micro_batch_tokens or algo.logits_chunk, set "
                         "model.gradient_checkpointing=true, or lower rollout.max_new_tokens / "
                         "rollout.groups (README: the settings for 40 GB and 24 GB cards).") from None
