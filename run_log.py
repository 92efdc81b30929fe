"""Optional logging of a run to TensorBoard or Weights & Biases (train.log_to: none | tensorboard | wandb).

metrics.jsonl stays the source of truth: these loggers are fed only the rows the trainer writes there, under
the same names, at step = the row's iteration, plus the config (as hyperparameters) and, after each
evaluation, the episodes it sampled (from samples.jsonl) as text. Nothing here computes a metric, so
nothing here can disagree with metrics.jsonl; a logger that fails loses a view, never data.

    logger = open_logger(cfg_dict, run_dir)   # None for train.log_to=none: every function then does nothing
    log_row(logger, row)                      # right after write_metrics(run_dir, row)
    close_logger(logger)                      # at the end of the run
"""
import importlib.util
import json
import netrc
import os
import urllib.parse
from types import SimpleNamespace

from tqdm import tqdm

import plots
import viewer
from bookkeeping import RunError
from evaluation import samples_markdown

# The metrics TensorBoard's HPARAMS tab shows beside each run's hyperparameters (read from the scalars)
HPARAM_METRICS = ("eval/success", "rollout/success", "rollout/reward_mean")


def check_installed(log_to):
    """Before the model loads: the package train.log_to needs is there, else one line saying how to get it
    (find_spec looks without importing, so this costs nothing when it is there)."""
    if log_to != "none" and importlib.util.find_spec(log_to) is None:
        raise RunError(f"train.log_to={log_to} needs the {log_to} package: pip install {log_to}")


def open_logger(cfg_dict, run_dir, resumed_at=None):
    """The logger of train.log_to (None for none), with the config logged, and then the rows of metrics.jsonl
    from the first one this process (re)wrote: iteration 0 of a new run, or on --resume the checkpoint's row,
    which the resume may have settled again. RESUMED_AT: the checkpoint's iteration, None for a new run."""
    log_to = cfg_dict["train"]["log_to"]
    if log_to == "none":
        return None
    start = resumed_at or 0
    try:
        if log_to == "tensorboard":
            logger = open_tensorboard(cfg_dict, run_dir, start)
        else:
            logger = open_wandb(cfg_dict, run_dir, start)
    except ImportError as error:  # installed, but broken (a version that does not fit): still one line
        raise RunError(f"train.log_to={log_to} could not import its package ({error}): "
                       f"pip install --upgrade {log_to}") from None
    if os.path.isfile(os.path.join(run_dir, "metrics.jsonl")):
        for row in plots.read_metrics(run_dir):
            if row["iteration"] >= start:
                log_row(logger, row)
    return logger


def open_tensorboard(cfg_dict, run_dir, start):
    """A SummaryWriter on RUN_DIR/tensorboard. purge_step: TensorBoard hides what earlier writers of this
    folder logged at steps >= start, i.e. on --resume the iterations after the checkpoint that metrics.jsonl
    dropped too (they are trained again), and on a new run with overwrite=true all of the old run's."""
    from torch.utils.tensorboard import SummaryWriter
    from torch.utils.tensorboard.summary import hparams

    writer = SummaryWriter(os.path.join(run_dir, "tensorboard"), purge_step=start)
    # The config as hyperparameters, not as text: the HPARAMS tab puts every run of a logdir in one table
    # (a column per key, sortable and filterable, beside its eval/success), which is what comparing runs
    # needs; one run's whole config is config.yaml. Written into this run's own folder (add_hparams would
    # make a second "run" of it in a subfolder), so the metric columns read this run's scalars.
    for summary in hparams(flat_config(cfg_dict), {key: 0.0 for key in HPARAM_METRICS}):
        writer.file_writer.add_summary(summary)
    return SimpleNamespace(kind="tensorboard", run_dir=run_dir, writer=writer)


def open_wandb(cfg_dict, run_dir, start):
    """wandb.init into RUN_DIR/wandb. WANDB_MODE, if set, decides online or offline; if it is not set and no
    API key is configured, offline (logging online would stop the run to ask for a key, or fail without a
    network). A resumed run is a new W&B run in the same group, starting at the checkpoint's iteration."""
    import wandb

    mode = None  # None: wandb reads WANDB_MODE (and logs online by default)
    if not os.environ.get("WANDB_MODE") and not wandb_key_configured():
        mode = "offline"
        tqdm.write(f"train.log_to=wandb: no W&B API key (WANDB_API_KEY, ~/.netrc) and no WANDB_MODE, so "
                   f"offline, into {os.path.join(run_dir, 'wandb')}; `wandb sync` uploads it later")
    name = os.path.basename(os.path.abspath(run_dir))
    run = wandb.init(project="ragen-mini", dir=run_dir, config=cfg_dict, mode=mode, group=name,
                     name=name if not start else f"{name}-resumed-at-{start}")
    return SimpleNamespace(kind="wandb", run_dir=run_dir, run=run, wandb=wandb)


def wandb_key_configured():
    """Whether `wandb login` (or WANDB_API_KEY) gave this machine a key: wandb keeps it in ~/.netrc (or
    $NETRC), under the host of WANDB_BASE_URL."""
    if os.environ.get("WANDB_API_KEY"):
        return True
    host = urllib.parse.urlparse(os.environ.get("WANDB_BASE_URL", "https://api.wandb.ai")).hostname
    try:
        return netrc.netrc(os.environ.get("NETRC")).authenticators(host) is not None
    except (OSError, netrc.NetrcParseError):  # no ~/.netrc, or one we cannot read: no key
        return False


def log_row(logger, row):
    """One row of metrics.jsonl as written: every number under its own name at step = the row's iteration;
    after an evaluation (the row holds eval/ or pre_warmup/ metrics), the episodes it sampled."""
    if logger is None:
        return
    step = row["iteration"]
    numbers = {key: value for key, value in row.items()
               if key != "iteration" and isinstance(value, (int, float))}
    evaluated = any(key.startswith(("eval/", "pre_warmup/")) for key in row)
    records = evaluation_records(logger.run_dir, step) if evaluated else []
    if logger.kind == "tensorboard":
        for key, value in numbers.items():
            logger.writer.add_scalar(key, value, step)
        if records:  # TensorBoard's TEXT tab renders markdown: samples.md's headings and code blocks
            logger.writer.add_text("eval/samples", samples_markdown(records), step)
        logger.writer.flush()  # on disk every iteration: a live run can be watched, a crash loses nothing
    else:
        logger.run.log(numbers, step=step)
        if records:  # one table row per episode, its turns as samples.md writes them
            columns = ["title", "episode", "seed", "reward", "success", "transcript"]
            table = logger.wandb.Table(columns=columns)
            for record in records:
                table.add_data(record["title"], record["episode"], record["seed"], record["reward"],
                               record["success"], samples_markdown([record]))
            logger.run.log({"eval/samples": table}, step=step)


def evaluation_records(run_dir, iteration):
    """The sampled episodes of the evaluations of ITERATION, from RUN_DIR/samples.jsonl (none with
    eval.samples=0). Iteration 0 may hold two evaluations: before and after the format warm-up."""
    path = os.path.join(run_dir, "samples.jsonl")
    if not os.path.isfile(path):
        return []
    return [record for record in viewer.read_samples(path)[0] if record["iteration"] == iteration]


def close_logger(logger):
    if logger is None:
        return
    if logger.kind == "tensorboard":
        logger.writer.close()
    else:
        logger.run.finish()


def flat_config(cfg_dict, prefix=""):
    """{"algo": {"clip_high": 0.28}} -> {"algo.clip_high": 0.28}: the names of the command-line overrides.
    TensorBoard's hyperparameters are numbers, strings or booleans; a bool is written "true"/"false" as in
    config.yaml (TensorBoard would show it as 1.0/0.0), and env.kwargs as its JSON text."""
    flat = {}
    for key, value in cfg_dict.items():
        if isinstance(value, dict) and key != "kwargs":
            flat.update(flat_config(value, f"{prefix}{key}."))
        elif isinstance(value, bool):
            flat[prefix + key] = "true" if value else "false"
        elif isinstance(value, (int, float, str)):
            flat[prefix + key] = value
        else:
            flat[prefix + key] = json.dumps(value, sort_keys=True)
    return flat
