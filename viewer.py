"""A trajectory viewer: RUN_DIR/viewer.html shows each evaluation's sampled episodes as pictures.

    python viewer.py RUN_DIR          # writes RUN_DIR/viewer.html; open it in any browser
    python plots.py RUN_DIR           # the same, with plots.png

The page is one self-contained file: no server, no network, nothing fetched from elsewhere. The grids are
inline SVG drawn here in Python, the style sheet and the few lines of JavaScript that switch views are
inside the page. It holds:

- a table of every evaluation (columns) and every sampled seed (rows), each cell the episode's reward and
  success: a click opens that episode;
- two panes side by side, each with its own choice of evaluation and one shared seed: by default the first
  evaluation on the left and the last on the right, so the same puzzle can be compared before and after
  training (the Echo Trap shows as one thought written for every state);
- per episode, turn by turn: the state the model saw (Sokoban: walls, floor, targets, boxes, boxes on
  targets, the player, the player on a target; FrozenLake: ice, holes, the goal, the player; Bandit: the two
  arms in the order shown, the risky one marked, the pulled one lit); the model's reply as it wrote it
  (escaped, a long one folded after its first FOLD_AT characters); beside it what the parser read, the
  thought and the actions, or why the format broke (no closing tag, cut at the token limit, an unknown
  action); the turn's reward; then a small picture after each action with its reward.

Where the data comes from. At every evaluation the trainer appends one record per sampled episode to
RUN_DIR/samples.jsonl (evaluation.episode_record: one JSON object a line, its keys listed there); `--eval`
appends to RUN_DIR/eval_samples.jsonl. Both are read, samples.jsonl first, with one json.loads per line:
whatever the model wrote is a string inside a record, so no reply (a line "# Evaluation at iteration 99",
"## seed 5: reward 10", a code fence, HTML) can change what another episode holds, and the time is linear
in the files. samples.md is a rendering of the same records for people; nothing reads it back. A folder of
an older ragen-mini holds only samples.md: the viewer says so and what to do (docs/run-folder.md), rather
than guess the structure of markdown that model text could forge.

Text or replay? Both, each checking the other. A record holds the state the model saw at the start of each
turn, as the env rendered it: that is the record, and it needs no code of this repository, so it stays
readable when envs.py changes. But it never holds the state after the last turn (the episode ends with no
further user message), nor the states between the actions of one turn, so a solved puzzle would never be
seen solved. The env can fill those in: `reset(seed)` fixes everything random (the puzzle, the map,
FrozenLake's slips, the Bandit's payout; envs.py), so replaying the recorded actions with envs.make_env and
the run's config.yaml gives every intermediate state. A replay is only trusted when it agrees with the
record: every turn's rendered state equals the recorded one, and every turn's reward (the env's plus the
format penalty) equals the recorded one. Where it does not (an older envs.py generated other puzzles,
config.yaml is missing, a record was edited), the page shows the recorded states and says why the states
after the actions are missing.

A damaged line (a run stopped mid-write, a hand edit, a record missing a key) does not stop the page: the
other records are shown, and what was skipped is listed at the top of the page and printed by the command
line.

For the trainer: `write_viewer(run_dir)` (re)writes the page after each evaluation and returns its path;
`read_samples(path)` reads a records file (the resume and findings.py --keep read them with it).
"""
import contextlib
import html
import json
import os
import re
import sys

import yaml

import config
import envs


class ViewerError(Exception):
    """A folder the viewer cannot make a page of; the message names the path and what to do."""


# ----------------------------------------------------------------------------------------------
# Reading the records

SAMPLE_FILES = ("samples.jsonl", "eval_samples.jsonl")  # the trainer's, then --eval's
# The keys of a record and of each of its turns (evaluation.episode_record), with their JSON types. A record
# lacking one, or holding another type, is skipped as a whole; keys added later are ignored.
NUMBER = (int, float)
RECORD_KEYS = {"title": str, "iteration": int, "episode": int, "seed": int, "reward": NUMBER, "success": bool,
               "turns": list}
TURN_KEYS = {"turn": int, "state": str, "actions_left": int, "reply": str, "think": str, "answer": str,
             "actions": list, "format_ok": bool, "format_problem": str, "reward": NUMBER}


def wrong_key(value, keys):
    """The first key of `keys` that the dict `value` lacks or holds with another type, in words; "" if none.
    JSON's true and false are Python's bool, a subclass of int: a count or a reward is never a bool."""
    for key, kind in keys.items():
        if key not in value:
            return f"no {key!r}"
        if not isinstance(value[key], kind) or (isinstance(value[key], bool) and kind is not bool):
            return f"{key!r} is a {type(value[key]).__name__}"
    return ""


def turn_problem(turn):
    """What makes one entry of a record's turns no turn, in words; "" for a turn."""
    if not isinstance(turn, dict):
        return "not an object"
    if wrong_key(turn, TURN_KEYS):
        return wrong_key(turn, TURN_KEYS)
    return "" if all(isinstance(action, str) for action in turn["actions"]) else "an action that is no string"


def record_problem(record):
    """What makes a decoded JSON line no sample record, in words; "" for a record."""
    if not isinstance(record, dict):
        return "not a JSON object"
    if wrong_key(record, RECORD_KEYS):
        return wrong_key(record, RECORD_KEYS)
    for k, turn in enumerate(record["turns"], 1):
        if turn_problem(turn):
            return f"turn {k}: {turn_problem(turn)}"
    return ""


def read_samples(path):
    """A samples.jsonl (or eval_samples.jsonl) -> (records, skipped): the records in file order, and in words
    each line left out (its number and why: cut by a crash, edited by hand). Lines are split on b"\n" alone:
    the writer escapes every other line break inside a string (json.dumps' ensure_ascii)."""
    name, records, skipped = os.path.basename(path), [], []
    with open(path, "rb") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:  # errors="replace": a hand-edited file need not be UTF-8
                record = json.loads(line.decode("utf-8", errors="replace"))
            except (ValueError, RecursionError) as error:  # RecursionError: "[[[[..." nested too deep
                skipped.append(f"{name} line {number}: not a JSON line ({getattr(error, 'msg', 'too deep')})")
                continue
            problem = record_problem(record)
            if problem:
                skipped.append(f"{name} line {number}: not a sample record ({problem})")
            else:
                records.append(record)
    return records, skipped


def group_evaluations(records, source):
    """Records in file order -> the evaluations, [{title, iteration, source, episodes}]: a record opens a new
    evaluation when its title or iteration differs from the record before it, or its episode number does
    not follow on (two --eval calls of one checkpoint have one title)."""
    evaluations = []
    for record in records:
        last = evaluations[-1] if evaluations else None
        if (last is None or (last["title"], last["iteration"]) != (record["title"], record["iteration"])
                or record["episode"] <= last["episodes"][-1]["episode"]):
            last = dict(title=record["title"], iteration=record["iteration"], source=source, episodes=[])
            evaluations.append(last)
        last["episodes"].append(record)
    return evaluations


# ----------------------------------------------------------------------------------------------
# Which env, and replaying it

def read_env_config(run_dir):
    """The env section of RUN_DIR/config.yaml as a dict, or None when the file is missing or unreadable."""
    try:
        with open(os.path.join(run_dir, "config.yaml"), encoding="utf-8") as f:
            env = config.parse_yaml(f.read()).get("env")
    except (OSError, UnicodeDecodeError, yaml.YAMLError, config.ConfigError, AttributeError):
        return None
    return env if isinstance(env, dict) else None


def guess_env(evaluations, env_config):
    """'sokoban', 'frozenlake' or 'bandit': the config's, else from a state's text."""
    if env_config and env_config.get("name") in envs.ENVS:
        return env_config["name"]
    for episode in (e for evaluation in evaluations for e in evaluation["episodes"]):
        for turn in episode["turns"]:
            if "bandit game" in turn["state"]:
                return "bandit"
            if "#" in turn["state"]:  # Sokoban's rooms are walled; FrozenLake has no walls
                return "sokoban"
            if "G" in turn["state"]:
                return "frozenlake"
    return "sokoban"


def same_grid(a, b):
    """Equal renderings, spaces aside (a spaced grid, or a tokenizer that decodes with other spacing)."""
    return a.replace(" ", "").strip() == b.replace(" ", "").strip()


def replay(env_name, env_config, episode):
    """Play the episode's recorded actions again from its seed -> (steps, None) or (None, why not).
    steps[k] lists (action, reward, rendering after it, " (no move)", " (slipped)" or "") for turn k+1: with
    the state after reset, every state of the episode. Trusted only if each turn's state and reward match the
    record (module docstring)."""
    if env_config is None:
        return None, "config.yaml is missing or unreadable, so the env cannot be replayed"
    try:
        kwargs = dict(env_config.get("kwargs") or {})
        if env_name != "bandit":
            kwargs.update(max_actions=env_config["max_actions"],
                          spaced_grid=env_config.get("spaced_grid", False))
        env = envs.make_env(env_name, **kwargs)
        env.reset(episode["seed"])
        penalty = float(env_config.get("format_penalty", -0.1))
        steps = []
        for turn in episode["turns"]:
            if env_name != "bandit" and not same_grid(turn["state"], env.render()):
                return None, f"the replayed state of turn {turn['turn']} differs from the one the model saw"
            if env_name == "bandit" and arm_names(turn["state"]) != list(env.actions):
                return None, "the replayed arms' order differs from the one the model saw"
            turn_steps = []
            for action in turn["actions"]:
                aimed = None
                # outcomes: [one side, the intended cell, the other], or [intended] on dry ice
                if env_name == "frozenlake":
                    outcomes = env.outcomes(env.player, action)
                    aimed = outcomes[len(outcomes) // 2]
                rendering, reward, _, _, info = env.step(action)
                note = "" if info["effective"] else " (no move)"
                if aimed is not None and info["effective"] and env.player != aimed:
                    note = " (slipped)"
                turn_steps.append((action, reward, rendering, note))
            total = sum(s[1] for s in turn_steps) + (0.0 if turn["format_ok"] else penalty)
            # a record holds the reward exactly; the tolerance is for records written by hand (-0.3, not
            # -0.1 - 0.1 - 0.1 = -0.30000000000000004)
            if not abs(total - turn["reward"]) <= 1e-5 * max(1.0, abs(total)):
                return None, (f"the replayed reward of turn {turn['turn']} ({total:g}) differs from the "
                              f"recorded {turn['reward']:g}")
            steps.append(turn_steps)
    except Exception as error:  # any failure (kwargs of an older envs.py, an unknown action) means: no replay
        return None, f"the replay failed ({type(error).__name__}: {str(error)[:80]})"
    return steps, None


# ----------------------------------------------------------------------------------------------
# Drawing

# Cell kinds are the env's own symbol meanings (envs.py), as CSS class names:
# "box on target" -> box-on-target. One symbol means different things in different envs ("O" is a target
# in Sokoban, a hole in FrozenLake).
def cell_kinds(env_name):
    return {symbol: meaning.replace(" ", "-") for symbol, meaning in envs.ENVS[env_name].symbols.items()}


# A cell is its ground (wall, floor, ice, hole, goal) and the pieces drawn on it (target ring, box, player,
# marks): (ground, pieces) per cell kind.
LAYERS = {"wall": ("wall", []), "empty": ("floor", []), "target": ("floor", ["ring"]),
          "box": ("floor", ["box"]), "box-on-target": ("floor", ["ring", "box", "done"]),
          "player": ("floor", ["player"]), "player-on-target": ("floor", ["ring", "player"])}
LAKE_LAYERS = {"empty": ("ice", []), "hole": ("hole", []), "goal": ("goal", []),
               "player": ("ice", ["player"]), "player-in-hole": ("hole", ["player", "lost"]),
               "player-on-goal": ("goal", ["player", "done"])}

PIECES = {  # SVG of a piece in a unit cell at (x, y)
    "ring": '<circle class="ring" cx="{x:.2f}" cy="{y:.2f}" r="0.32" transform="translate(0.5 0.5)"/>',
    "box": ('<rect class="box" x="{x:.2f}" y="{y:.2f}" width="0.7" height="0.7" rx="0.08" '
            'transform="translate(0.15 0.15)"/>'),
    "done": '<path class="done" d="M{x:.2f} {y:.2f}m0.3 0.5l0.15 0.15l0.27 -0.32"/>',
    "player": '<circle class="player" cx="{x:.2f}" cy="{y:.2f}" r="0.3" transform="translate(0.5 0.5)"/>',
    "lost": '<path class="lost" d="M{x:.2f} {y:.2f}m0.25 0.25l0.5 0.5m0 -0.5l-0.5 0.5"/>',
}


def grid_cells(text, env_name):
    """A rendered grid -> rows of cell kinds ('wall', 'box', ...); an unknown symbol becomes 'unknown'."""
    kinds = cell_kinds(env_name)
    rows = [line.replace(" ", "") for line in text.strip("\n").split("\n")]
    return [[kinds.get(symbol, "unknown") for symbol in row] for row in rows]


def grid_svg(text, env_name, cell_px):
    """A rendered grid as an inline SVG, one child per cell in reading order: a bare cell is a <rect> whose
    class is its ground (wall, floor, ice, hole, goal); a cell with pieces on it is a <g> whose class is the
    cell kind (box, player-on-target, ...) holding the ground's <rect> and the pieces. A page holds many
    thousands of cells, so each is kept short: its row and column are the rect's y and x."""
    rows = grid_cells(text, env_name)
    width = max((len(row) for row in rows), default=0)
    layers = LAKE_LAYERS if env_name == "frozenlake" else LAYERS
    parts = []
    for r, row in enumerate(rows):
        for c, kind in enumerate(row):
            ground, pieces = layers.get(kind, ("unknown", []))
            cell = f'<rect class="{ground}" x="{c}" y="{r}" width="1" height="1"/>'
            if pieces:
                cell = f'<g class="{kind}">{cell}{"".join(PIECES[p].format(x=c, y=r) for p in pieces)}</g>'
            parts.append(cell)
    return (f'<svg class="grid" viewBox="0 0 {width} {len(rows)}" width="{width * cell_px}" '
            f'height="{len(rows) * cell_px}">{"".join(parts)}</svg>')


def arm_names(text):
    """The Bandit's two arm names, in the order the state shows them."""
    m = re.search(r"named (.+?) and (.+?)\n", text)
    return [m[1], m[2]] if m else []


def bandit_svg(names, risky, pulled, reward_text):
    """The two arms as two machines; the risky one (choosing it is success) is marked, the pulled one lit."""
    parts = []
    for i, name in enumerate(names):
        x = 10 + i * 130
        lit = " pulled" if name == pulled else ""
        parts.append(f'<g class="arm{lit}" data-arm="{html.escape(name)}"><rect class="machine" x="{x}" '
                     f'y="20" width="110" height="70" rx="10"/><line class="lever" x1="{x + 110}" y1="40" '
                     f'x2="{x + 122}" y2="{70 if lit else 22}"/><text x="{x + 55}" y="52">'
                     f'{html.escape(name)}</text>'
                     + (f'<text class="tag" x="{x + 55}" y="74">risky arm</text>' if name == risky else "")
                     + (f'<text class="payout" x="{x + 55}" y="110">pulled: {html.escape(reward_text)}</text>'
                        if lit else "") + "</g>")
    return f'<svg class="bandit" viewBox="0 0 270 120" width="270" height="120">{"".join(parts)}</svg>'


def legend(env_name, risky):
    """One small picture per cell kind, with its meaning."""
    if env_name == "bandit":
        return (f'<p class="legend">Two arms, shown in the order of the prompt; the risky arm '
                f'({html.escape(risky)}) pays more on average, and choosing it is success even when it '
                "paid 0.</p>")
    items = [f'<span>{grid_svg(symbol, env_name, 22)} {html.escape(meaning)} '
             f'<code>{html.escape(symbol)}</code></span>'
             for symbol, meaning in envs.ENVS[env_name].symbols.items()]
    return f'<p class="legend">{" ".join(items)}</p>'


# ----------------------------------------------------------------------------------------------
# The page

# A collapsed model writes one sentence until the token limit: a reply is shown whole up to FOLD_AT
# characters, longer ones fold after them; no text puts more than SHOW_AT_MOST characters on the page (the
# record keeps it whole), so a page of many evaluations stays small.
FOLD_AT = 300
SHOW_AT_MOST = 20_000


def folded(text, kind):
    """A text of the model as HTML, escaped: whole when short, else a <details> whose summary shows its first
    FOLD_AT characters and which opens to the whole (up to SHOW_AT_MOST characters). `kind` is its CSS class
    ("said", "think")."""
    if len(text) <= FOLD_AT:
        return f'<div class="{kind}">{html.escape(text)}</div>'
    more = (f'<span class="dim"> &hellip; {len(text) - SHOW_AT_MOST:,} more characters in the record '
            "(samples.jsonl)</span>" if len(text) > SHOW_AT_MOST else "")
    return (f'<details class="{kind} fold"><summary><span class="head">{html.escape(text[:FOLD_AT])}'
            f'&hellip; <span class="dim">({len(text):,} characters: open for all)</span></span>'
            f'<span class="dim tail">(fold)</span></summary>{html.escape(text[:SHOW_AT_MOST])}{more}'
            "</details>")


def parsed_html(turn):
    """What the parser read from the reply: the thought and the executed actions, and, when the format
    broke, why (the record's format_problem)."""
    think = (folded(turn["think"], "think") if turn["think"]
             else '<div class="dim">(no thought)</div>')
    actions = (" &rarr; ".join(html.escape(a) for a in turn["actions"])
               or '<span class="dim">(no action executed)</span>')
    problem = html.escape(turn["format_problem"] or "no reason recorded")
    verdict = ('<span class="ok">format ok</span>' if turn["format_ok"] else
               f'<span class="bad">format broken: {problem}</span>')
    return (f'<div class="parsed"><div class="label">parsed</div>{think}<div class="actions">{actions}</div>'
            f'<div class="meta">{verdict} &middot; reward {turn["reward"]:g}</div></div>')


def turn_html(turn, steps, env_name, risky):
    """One turn: the state the model saw; its reply as written and, beside it, what the parser read; the
    states after each action."""
    if env_name == "bandit":
        picture = bandit_svg(arm_names(turn["state"]), risky, turn["actions"][0] if turn["actions"] else None,
                             f"{turn['reward']:g}")
    else:
        picture = grid_svg(turn["state"], env_name, 26)
    caption = f"turn {turn['turn']}"
    if env_name != "bandit":
        caption += f" &middot; {turn['actions_left']} actions left"
    said = folded(turn["reply"], "said") if turn["reply"] else '<div class="said dim">(an empty reply)</div>'
    after = ""
    if steps and env_name != "bandit":
        after = '<div class="steps">' + "".join(
            f'<figure>{grid_svg(rendering, env_name, 14)}<figcaption>{html.escape(action)} {reward:+g}'
            f'{note}</figcaption></figure>' for action, reward, rendering, note in steps) + "</div>"
    return (f'<li class="turn"><figure class="state">{picture}<figcaption>{caption}</figcaption></figure>'
            f'<div class="reply"><div class="texts"><div class="raw"><div class="label">the reply, as sampled'
            f'</div>{said}</div>{parsed_html(turn)}</div>{after}</div></li>')


def episode_html(index, evaluation, episode, env_name, env_config, risky):
    """One episode as a <section>, all its turns; replayed where the replay agrees with the record."""
    steps, why_not = replay(env_name, env_config, episode)
    turns = [turn_html(turn, steps[k] if steps else None, env_name, risky)
             for k, turn in enumerate(episode["turns"])]
    if steps and env_name != "bandit":
        note = ("states after each action: replayed from the seed, and checked against the recorded states "
                "and rewards")
    elif env_name != "bandit":
        note = f"only the recorded states at the start of each turn: {why_not}"
    else:
        note = "the payout: " + ("replayed and checked" if steps else why_not)
    finals = [step for turn_steps in steps or [] for step in turn_steps]
    end = ""
    if finals and env_name != "bandit":  # the state no record holds: after the last action
        end = (f'<figure class="end">{grid_svg(finals[-1][2], env_name, 26)}<figcaption>the end, after '
               f'{len(finals)} action(s)</figcaption></figure>')
    if env_name == "bandit":  # the Bandit's success is the decision, not the payout (envs.Bandit.step)
        mark = ('<span class="ok">success: the risky arm</span>' if episode["success"]
                else '<span class="bad">no success</span>')
    else:
        mark = ('<span class="ok">solved</span>' if episode["success"]
                else '<span class="bad">not solved</span>')
    return (f'<section class="episode" data-eval="{index}" data-seed="{episode["seed"]}">'
            f'<h3>seed {episode["seed"]} &middot; reward {episode["reward"]:g} &middot; {mark}</h3>'
            f'<p class="dim">{html.escape(evaluation["title"])} ({html.escape(evaluation["source"])}); '
            f'{html.escape(note)}</p>'
            f'<ol class="turns">{"".join(turns) or "<li>no turn recorded</li>"}</ol>{end}</section>')


def overview_html(evaluations, seeds):
    """The table of every evaluation and seed: reward and success per episode, each a link to it."""
    head = "".join(f'<th>{html.escape(e["title"].replace("Evaluation ", ""))}</th>' for e in evaluations)
    rows = []
    for seed in seeds:
        cells = []
        for i, evaluation in enumerate(evaluations):
            found = [e for e in evaluation["episodes"] if e["seed"] == seed]
            if found:
                e = found[0]
                cells.append(f'<td><a href="#left={i}&amp;seed={seed}" '
                             f'class="{"ok" if e["success"] else "bad"}" '
                             f'data-eval="{i}" data-seed="{seed}">{e["reward"]:g}'
                             f'{" &#10003;" if e["success"] else ""}</a></td>')
            else:
                cells.append('<td class="dim">&ndash;</td>')
        rows.append(f'<tr><th>seed {seed}</th>{"".join(cells)}</tr>')
    return f'<table id="overview"><tr><th></th>{head}</tr>{"".join(rows)}</table>'


STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 12px; color: #222; background: #fff; }
h1 { font-size: 18px; margin: 0 0 4px; } h3 { font-size: 15px; margin: 4px 0; }
.dim { color: #777; } .ok { color: #1f7a3d; } .bad { color: #b3261e; } .skipped { color: #8a5a00; }
#overview { border-collapse: collapse; margin: 8px 0; font-size: 12px; }
#overview td, #overview th { border: 1px solid #ddd; padding: 2px 6px; text-align: center; }
#overview a { text-decoration: none; }
#controls { margin: 8px 0; } select { font-size: 13px; }
#panes { display: flex; gap: 16px; align-items: flex-start; }
.pane { flex: 1; min-width: 0; border-top: 3px solid #ddd; }
.js #store { display: none; }
.turns { list-style: none; padding: 0; margin: 0; }
.turn { display: flex; gap: 12px; padding: 6px 0; border-bottom: 1px solid #eee; }
figure { margin: 0; } figcaption { font-size: 11px; color: #555; text-align: center; }
.reply { min-width: 0; flex: 1; } .texts { display: flex; gap: 12px; } .raw { flex: 3; min-width: 0; }
.parsed { flex: 2; min-width: 0; } .label { font-size: 11px; color: #777; }
.said, .think { white-space: pre-wrap; overflow-wrap: anywhere; }
.said { font: 12px/1.35 ui-monospace, monospace; background: #f6f6f4; padding: 3px 5px; }
.think { font-style: italic; } .fold summary { cursor: pointer; }
.fold[open] .head, .fold:not([open]) .tail { display: none; }
.actions { font-weight: 600; margin: 2px 0; } .meta { font-size: 12px; color: #555; }
.end { display: inline-block; margin: 6px 0; }
.steps { display: flex; flex-wrap: wrap; gap: 6px; margin-top: 4px; }
.legend span { display: inline-flex; align-items: center; gap: 4px; margin-right: 10px; }
.missing { width: 120px; height: 60px; color: #777; font-size: 12px; }
svg.grid rect { stroke: #ffffff; stroke-width: 0.03; }
.wall { fill: #5d4037; } .floor { fill: #efe3c8; } \
.ring { fill: #f6b6b0; stroke: #d1293d; stroke-width: 0.09; }
.box { fill: #e08a1e; stroke: #8a4b00; stroke-width: 0.05; } .player { fill: #1e5bd8; }
.done { fill: none; stroke: #ffffff; stroke-width: 0.1; } \
.box-on-target .box { fill: #2e9e4f; stroke: #13622b; }
.ice { fill: #cfe9f9; } .hole { fill: #0f2a47; } .goal { fill: #f4c21a; } .unknown { fill: #ff00ff; }
.lost { fill: none; stroke: #ff4d4d; stroke-width: 0.1; }
svg.bandit .machine { fill: #efe3c8; stroke: #8a7a5a; stroke-width: 2; }
svg.bandit .pulled .machine { fill: #f4c21a; stroke: #1e5bd8; stroke-width: 4; }
svg.bandit .lever { stroke: #5d4037; stroke-width: 4; } \
svg.bandit text { text-anchor: middle; font-size: 15px; }
svg.bandit .tag { font-size: 11px; fill: #b3261e; } svg.bandit .payout { font-size: 12px; }
"""

# Switching views: episodes live in #store (all of them, visible when JavaScript is off); a pane shows a copy
# of the chosen one. The choice is kept in the address (#left=0&right=3&seed=1000000), so a view can be shared
# or reloaded, and an overview link opens its episode on the left.
SCRIPT = """
document.body.classList.add('js');
const pick = id => document.getElementById(id);
function episode(ev, seed) {
  return document.querySelector(`#store section[data-eval="${ev}"][data-seed="${seed}"]`);
}
function show() {
  for (const side of ['left', 'right']) {
    const pane = pick('pane-' + side), found = episode(pick(side).value, pick('seed').value);
    pane.replaceChildren(found ? found.cloneNode(true) : Object.assign(document.createElement('p'),
      {className: 'dim', textContent: 'this seed was not sampled in this evaluation'}));
  }
  history.replaceState(null, '', `#left=${pick('left').value}&right=${pick('right').value}\
&seed=${pick('seed').value}`);
}
function fromAddress() {
  for (const [key, value] of new URLSearchParams(location.hash.slice(1))) {
    if (pick(key) && [...pick(key).options].some(o => o.value === value)) pick(key).value = value;
  }
  show();
}
for (const id of ['left', 'right', 'seed']) pick(id).addEventListener('change', show);
window.addEventListener('hashchange', fromAddress);
fromAddress();
"""


def options(values, labels, selected):
    return "".join(f'<option value="{v}"{" selected" * (v == selected)}>{html.escape(str(label))}</option>'
                   for v, label in zip(values, labels))


def page_html(run_dir, evaluations, skipped, env_name, env_config):
    """The whole page as one string."""
    risky = ((env_config or {}).get("kwargs") or {}).get("high_name", envs.Bandit().high_name)
    seeds = list(dict.fromkeys(e["seed"] for evaluation in evaluations for e in evaluation["episodes"]))
    titles = [e["title"] for e in evaluations]
    indices = [str(i) for i in range(len(evaluations))]
    episodes = "".join(episode_html(i, evaluation, episode, env_name, env_config, risky)
                       for i, evaluation in enumerate(evaluations) for episode in evaluation["episodes"])
    notes = ("<details class=\"skipped\" open><summary>skipped: "
             + f"{len(skipped)} part(s) could not be read</summary><ul>"
             + "".join(f"<li>{html.escape(s)}</li>" for s in skipped) + "</ul></details>") if skipped else ""
    name = html.escape(os.path.basename(os.path.normpath(os.path.abspath(run_dir))))
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{name}: trajectories</title><style>{STYLE}</style></head>
<body>
<h1>Trajectories of {name} ({env_name})</h1>
<p class="dim">{len(evaluations)} evaluation(s), {len(seeds)} seed(s) sampled; \
pick a cell to open its episode,
or compare one seed across two evaluations below.</p>
{notes}
{legend(env_name, risky)}
{overview_html(evaluations, seeds)}
<div id="controls">seed <select id="seed">{options([str(s) for s in seeds], seeds, str(seeds[0]))}</select>
&nbsp; left <select id="left">{options(indices, titles, "0")}</select>
&nbsp; right <select id="right">{options(indices, titles, indices[-1])}</select></div>
<div id="panes"><div class="pane" id="pane-left"></div><div class="pane" id="pane-right"></div></div>
<div id="store">{episodes}</div>
<script>{SCRIPT}</script>
</body></html>
"""


def read_run(run_dir):
    """A run folder -> (evaluations, skipped) from samples.jsonl and eval_samples.jsonl; ViewerError if there
    is nothing to show."""
    if not os.path.isdir(run_dir):
        raise ViewerError(f"{run_dir} is not a folder: give a run folder (the run_dir of a training, "
                          "with samples.jsonl)")
    files = [name for name in SAMPLE_FILES if os.path.isfile(os.path.join(run_dir, name))]
    if not files:
        raise ViewerError(no_records(run_dir))
    evaluations, skipped = [], []
    for name in files:
        records, missed = read_samples(os.path.join(run_dir, name))
        evaluations += group_evaluations(records, name)
        skipped += missed
    if not evaluations:
        raise ViewerError(f"{', '.join(os.path.join(run_dir, n) for n in files)}: no readable record "
                          f"({'; '.join(skipped[:2]) or 'empty'}); let the run reach its first evaluation")
    return evaluations, skipped


def no_records(run_dir):
    """Why a folder without samples.jsonl has nothing to show, and what to do, in one line."""
    older = [name for name in ("samples.md", "eval_samples.md", "samples.old.md", "eval_samples.old.md")
             if os.path.isfile(os.path.join(run_dir, name))]
    if older:
        return (f"{run_dir} has no samples.jsonl: its {older[0]} was written by an older ragen-mini, and the "
                "viewer no longer reads markdown (a model's reply could forge its headings). Read "
                f"{older[0]} itself, or record its checkpoint's episodes anew with "
                f"python ragen_mini.py --eval {run_dir} (eval_samples.jsonl), then run the viewer again")
    if os.path.isfile(os.path.join(run_dir, "thoughts.json")):
        return (f"{run_dir} has no samples.jsonl: this compacted run kept only thoughts.json (thoughts, no "
                "grids or actions); train it again to see its episodes")
    return (f"{run_dir} has no samples.jsonl: not a run folder, or a run stopped before its first "
            "evaluation (eval.every=0 writes none)")


def write_viewer(run_dir):
    """(Re)write RUN_DIR/viewer.html from the run's samples.jsonl and eval_samples.jsonl -> the page's path.
    Raises ViewerError (a one-line message) when the folder has nothing to show."""
    return write_page(run_dir)[0]


def write_page(run_dir):
    """write_viewer's work -> (the page's path, the list of what was skipped)."""
    evaluations, skipped = read_run(run_dir)
    env_config = read_env_config(run_dir)
    env_name = guess_env(evaluations, env_config)
    text = page_html(run_dir, evaluations, skipped, env_name, env_config)
    path = os.path.join(run_dir, "viewer.html")
    # Written beside and swapped in whole: a browser reloading while the trainer rewrites it never sees half a
    # page. A leftover .tmp goes first, and "x" creates a new file: a planted link is never written through.
    # backslashreplace: a lone surrogate (invalid Unicode a record may hold) has no UTF-8 form; it is written
    # as the text \udc80 instead of stopping the page.
    tmp = path + ".tmp"
    with contextlib.suppress(FileNotFoundError):
        os.remove(tmp)
    try:
        with open(tmp, "x", encoding="utf-8", errors="backslashreplace") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError as error:  # a full disk fails as the file closes, with no file named: name it
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise OSError(error.errno, error.strerror, path) from None
    return path, skipped


def main(argv):
    if len(argv) != 1 or argv[0].startswith("-"):
        raise SystemExit("usage: python viewer.py RUN_DIR    (writes RUN_DIR/viewer.html)")
    try:
        path, skipped = write_page(argv[0])
    except (ViewerError, OSError) as error:
        raise SystemExit(f"error: {error}") from None
    for note in skipped:
        print(f"skipped: {note}")
    print(f"wrote {path}")


if __name__ == "__main__":
    main(sys.argv[1:])
