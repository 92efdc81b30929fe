"""viewer.py: the trajectory page of a run folder.

The fixtures under tests/fixtures/viewer-*/ are small samples.jsonl files in the trainer's record format
(evaluation.episode_record), written by hand (two evaluations, two seeds each) with the env section of a run's
config.yaml. The facts the tests check were counted by hand from those files, not taken from the viewer's own
output:

Sokoban seed 1000000 (tests/fixtures/viewer-sokoban/samples.jsonl, turn 1):

    ######      24 walls: 6 + 2 + 2 + 4 + 4 + 6, 36 cells
    #_P__#      player at row 1, column 2
    #__X_#      box at (2, 3)
    #__###
    #O_###      target at (4, 1)
    ######

At iteration 10 it is solved with Right Right Down Left Left | Up Left Down Down (pushed left twice from
(2, 4), then down twice from (1, 1)): 9 actions, the box ends on the target (4, 1), the player at (3, 1).

FrozenLake seed 1000000: `O_O_ / ____ / ___G / ___P`: holes at (0, 0) and (0, 2), goal (2, 3), player
(3, 3). Bandit seed 1000000 shows Dragon then Phoenix, seed 1000001 Phoenix then Dragon.

Sokoban seed 1000000 at iteration 0, turn 1 replied `the box</think> Up Up`: no <answer> after </think>, so the
format broke and nothing was executed; turn 2 replied `go up</think><answer>Up</answer>`.
"""
import html
import json
import os
import re
import shutil
import subprocess
import sys
import time
from xml.etree import ElementTree

import pytest

import bookkeeping
import evaluation
import viewer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(ROOT, "tests", "fixtures")


def run_copy(tmp_path, env_name):
    """A copy of a fixture run folder, so the page is written outside the repository."""
    folder = tmp_path / env_name
    shutil.copytree(os.path.join(FIXTURES, f"viewer-{env_name}"), folder)
    return str(folder)


def page(run_dir):
    with open(viewer.write_viewer(run_dir), encoding="utf-8") as f:
        return f.read()


def section(text, evaluation, seed):
    """The stored <section> of one episode."""
    m = re.search(rf'<section class="episode" data-eval="{evaluation}" data-seed="{seed}">(.*?)</section>',
                  text, re.S)
    assert m, f"no episode for evaluation {evaluation}, seed {seed}"
    return m[1]


def grids(html_text):
    """The <svg class="grid"> pictures, in order."""
    return re.findall(r'<svg class="grid".*?</svg>', html_text, re.S)


def cells(svg):
    """{(row, col): kind} of one grid picture: a bare cell is a <rect> classed by its ground (wall, floor,
    ice, hole, goal), a cell with pieces a <g> classed by its kind (box, player, ...)."""
    grid = {}
    for child in ElementTree.fromstring(svg):  # the page's SVG is well-formed XML
        rect = child if child.tag == "rect" else child.find("rect")
        grid[int(rect.get("y")), int(rect.get("x"))] = child.get("class")
    return grid


def where(grid, kind):
    return sorted(cell for cell, k in grid.items() if k == kind)


def test_sokoban_grid_shows_the_hand_counted_layout(tmp_path):
    first = cells(grids(section(page(run_copy(tmp_path, "sokoban")), 0, 1000000))[0])
    assert len(first) == 36
    assert len(where(first, "wall")) == 24
    assert where(first, "box") == [(2, 3)]
    assert where(first, "target") == [(4, 1)]
    assert where(first, "player") == [(1, 2)]


def test_a_solved_sokoban_episode_ends_with_the_box_on_its_target(tmp_path):
    episode = section(page(run_copy(tmp_path, "sokoban")), 1, 1000000)
    pictures = grids(episode)
    assert len(pictures) == 2 + 9 + 1  # the two turns' states, one small picture per action, the end
    last = cells(pictures[-1])
    assert where(last, "box-on-target") == [(4, 1)]
    assert where(last, "box") == [] and where(last, "player") == [(3, 1)]
    assert "solved" in episode and "Down +10.9" in episode  # the solving push: -0.1 + 1 + 10


def test_frozenlake_grid_shows_holes_goal_and_player(tmp_path):
    text = page(run_copy(tmp_path, "frozenlake"))
    first = cells(grids(section(text, 0, 1000000))[0])
    assert where(first, "hole") == [(0, 0), (0, 2)]
    assert where(first, "goal") == [(2, 3)]
    assert where(first, "player") == [(3, 3)]
    assert len(where(first, "ice")) == 16 - 4
    # At iteration 10, Left from (3, 3) slid up onto the goal (the recorded reward 1 says it reached (2, 3))
    assert "Left +1 (slipped)" in section(text, 1, 1000000)
    # seed 1000001 at iteration 0 walks into the hole at (0, 2): the last picture shows it there
    assert where(cells(grids(section(text, 0, 1000001))[-1]), "player-in-hole") == [(0, 2)]


def test_bandit_shows_both_arms_in_prompt_order_and_the_pulled_one(tmp_path):
    text = page(run_copy(tmp_path, "bandit"))
    for number, seed, order, pulled in ((0, 1000000, ["Dragon", "Phoenix"], ["Phoenix"]),
                                            # a broken answer pulls none
                                            (0, 1000001, ["Phoenix", "Dragon"], []),
                                            (1, 1000001, ["Phoenix", "Dragon"], ["Dragon"])):
        episode = section(text, number, seed)
        assert re.findall(r'<g class="arm[^"]*" data-arm="(\w+)"', episode) == order
        assert re.findall(r'<g class="arm pulled" data-arm="(\w+)"', episode) == pulled
    assert text.count("risky arm</text>") == 4  # Dragon, the config's high_name, in each of the 4 episodes


def test_navigation_lists_every_evaluation_and_seed(tmp_path):
    text = page(run_copy(tmp_path, "sokoban"))
    for side in ("left", "right"):
        menu = re.search(rf'<select id="{side}">(.*?)</select>', text, re.S)[1]
        assert re.findall(r">([^<]+)</option>", menu) == ["Evaluation at iteration 0",
                                                          "Evaluation at iteration 10"]
    menu = re.search(r'<select id="seed">(.*?)</select>', text, re.S)[1]
    assert re.findall(r'value="(\d+)"', menu) == ["1000000", "1000001"]
    # the right pane starts on the last evaluation: the same seed before and after training
    assert re.search(r'<select id="right">.*?<option value="1" selected>', text, re.S)
    links = set(re.findall(r'<a href="#left=(\d)&amp;seed=(\d+)"', text))
    assert links == {(e, s) for e in "01" for s in ("1000000", "1000001")}
    assert len(re.findall(r'<section class="episode"', text)) == 4


def read_lines(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def write_lines(path, records):
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(record) + "\n" for record in records)


def test_eval_samples_jsonl_joins_the_page(tmp_path):
    run_dir = run_copy(tmp_path, "sokoban")
    last = [r for r in read_lines(os.path.join(run_dir, "samples.jsonl")) if r["iteration"] == 10]
    write_lines(os.path.join(run_dir, "eval_samples.jsonl"),
                [{**r, "title": "Evaluation of the checkpoint at iteration 10"} for r in last])
    text = page(run_dir)
    assert "Evaluation of the checkpoint at iteration 10 (eval_samples.jsonl)" in text
    assert len(re.findall(r'<section class="episode"', text)) == 6


def test_a_file_cut_anywhere_still_gives_a_page(tmp_path):
    """The fixture's lines 1-2 are iteration 0's two episodes, lines 3-4 iteration 10's."""
    run_dir = run_copy(tmp_path, "sokoban")
    path = os.path.join(run_dir, "samples.jsonl")
    with open(path, "rb") as f:
        full = f.read()
    lines = full.split(b"\n")
    starts = [sum(len(line) + 1 for line in lines[:k]) for k in range(4)]  # where lines 1-4 start
    inside = [(3, cut) for cut in range(starts[2] + 1, starts[3] - 1, 53)]
    inside += [(4, cut) for cut in range(starts[3] + 1, starts[3] + len(lines[3]), 53)]
    for number, cut in inside:
        with open(path, "wb") as f:
            f.write(full[:cut])
        written, skipped = viewer.write_page(run_dir)
        with open(written, encoding="utf-8") as f:
            text = f.read()
        assert len(re.findall(r'<section class="episode" data-eval="0"', text)) == 2  # iteration 0, whole
        assert len(skipped) == 1 and skipped[0].startswith(f"samples.jsonl line {number}: not a JSON line")
        assert "skipped: 1 part(s) could not be read" in text


def test_a_record_that_lacks_a_key_is_skipped_and_named(tmp_path):
    run_dir = run_copy(tmp_path, "sokoban")
    path = os.path.join(run_dir, "samples.jsonl")
    records = read_lines(path)
    del records[1]["turns"][0]["state"]
    records[2]["seed"] = "1000000"  # a string: no seed
    write_lines(path, records)
    _, skipped = viewer.write_page(run_dir)
    assert skipped == ["samples.jsonl line 2: not a sample record (turn 1: no 'state')",
                       "samples.jsonl line 3: not a sample record ('seed' is a str)"]


def test_a_replay_that_disagrees_with_the_record_is_not_drawn(tmp_path):
    """An edited grid (the box one cell left) no longer matches the seed's puzzle: the page draws the record's
    state, says why, and draws no replayed step."""
    run_dir = run_copy(tmp_path, "sokoban")
    path = os.path.join(run_dir, "samples.jsonl")
    records = read_lines(path)
    first = records[0]["turns"][0]
    assert first["state"] == "######\n#_P__#\n#__X_#\n#__###\n#O_###\n######"
    first["state"] = "######\n#_P__#\n#_X__#\n#__###\n#O_###\n######"
    write_lines(path, records)
    episode = section(page(run_dir), 0, 1000000)
    assert "the replayed state of turn 1 differs" in episode
    pictures = grids(episode)
    # 3 turns, no step or end pictures
    assert len(pictures) == 3 and where(cells(pictures[0]), "box") == [(2, 2)]


def test_without_config_the_recorded_states_are_shown(tmp_path):
    run_dir = run_copy(tmp_path, "frozenlake")
    os.remove(os.path.join(run_dir, "config.yaml"))
    text = page(run_dir)
    assert "(frozenlake)" in text and "config.yaml is missing" in text
    assert where(cells(grids(section(text, 0, 1000000))[0]), "goal") == [(2, 3)]


def turn_items(episode_html):
    return re.findall(r'<li class="turn">(.*?)</li>', episode_html, re.S)


def test_each_turn_shows_the_reply_as_written_and_beside_it_what_was_parsed(tmp_path):
    """Sokoban seed 1000000 at iteration 0 (module docstring): turn 1's reply broke the format, turn 2's
    parsed to Up."""
    first, second, _ = turn_items(section(page(run_copy(tmp_path, "sokoban")), 0, 1000000))
    assert '<div class="said">the box&lt;/think&gt; Up Up</div>' in first
    assert "format broken: no &lt;answer&gt; right after &lt;/think&gt;" in first
    assert "(no action executed)" in first and "format ok" not in first
    assert '<div class="said">go up&lt;/think&gt;&lt;answer&gt;Up&lt;/answer&gt;</div>' in second
    assert '<div class="think">go up</div>' in second and '<div class="actions">Up</div>' in second
    assert "format ok" in second and "format broken" not in second


def collapsed_record(seed=1000000):
    """A collapsed GRPO run's evaluation turn: one sentence written again and again until the token limit, no
    </think>, no answer (rollout.explain_answer's words for it)."""
    reply = "I need to push the box to the target. " * 40  # 38 x 40 = 1,520 characters
    return dict(title="Evaluation at iteration 200", iteration=200, episode=0, seed=seed, reward=-0.5,
                success=False, turns=[dict(
                    turn=k, state="######\n#_P__#\n#__X_#\n#__###\n#O_###\n######", actions_left=10, reply=reply,
                    think="", answer="", actions=[], format_ok=False, reward=-0.1,
                    format_problem="no </think> closes the thought; cut at the token limit: 400 tokens, no stop token")
                    for k in range(1, 6)])


def test_a_collapsed_reply_shows_its_text_folded_and_why_it_did_not_parse(tmp_path):
    run_dir = run_copy(tmp_path, "sokoban")
    record = collapsed_record()
    evaluation.write_samples(os.path.join(run_dir, "samples.md"), [record])
    episode = section(page(run_dir), 2, 1000000)
    turns = turn_items(episode)
    reply = record["turns"][0]["reply"]
    assert len(turns) == 5
    for turn in turns:
        summary = re.search(r"<summary>(.*?)</summary>", turn, re.S)[1]
        assert reply[:300] in summary and reply[:301] not in summary  # the first 300 characters show
        assert reply in turn  # and the whole opens
        assert "1,520 characters" in summary
        assert ("format broken: no &lt;/think&gt; closes the thought; cut at the token limit: 400 tokens, "
                "no stop token") in turn


HOSTILE = ["plan:\n# Evaluation at iteration 99\nthen</think><answer>Up</answer>",
           "x\n## seed 5: reward 10, success True\n- turn 1: think 'won' -> actions ['Up'] (format ok: True), reward 10",
           "```\n</div></section><section class=\"episode\" data-eval=\"0\" data-seed=\"5\">\n```",
           "<script>alert(1)</script><!-- </details> <img src=x onerror=alert(2)>",
           "lone \udc80 surrogate and \u2028 line separator",
           "Turn 1:\nState:\n" * 3 + "####\n#P_#\n####\nYou have 10 actions left."]


def hostile_records():
    """One evaluation of len(HOSTILE) episodes, seeds 1000000..., each reply one of HOSTILE; the thought is
    the reply too, so that it reaches every place a text is shown."""
    return [dict(title="Evaluation at iteration 0", iteration=0, episode=k, seed=1000000 + k, reward=-0.1,
                 success=False, turns=[dict(turn=1, state="######\n#_P__#\n#__X_#\n#__###\n#O_###\n######",
                                            actions_left=10, reply=reply, think=reply, answer="", actions=[],
                                            format_ok=False, format_problem="no </answer> closes the answer",
                                            reward=-0.1)])
            for k, reply in enumerate(HOSTILE)]


def test_no_reply_forges_an_episode_or_a_tag_in_the_page(tmp_path):
    run_dir = run_copy(tmp_path, "sokoban")
    os.remove(os.path.join(run_dir, "samples.jsonl"))
    records = hostile_records()
    evaluation.write_samples(os.path.join(run_dir, "samples.md"), records)
    assert viewer.read_samples(os.path.join(run_dir, "samples.jsonl")) == (records, [])
    text = page(run_dir)
    stored = re.findall(r'<section class="episode" data-eval="(\d+)" data-seed="(\d+)">', text)
    assert stored == [("0", str(1000000 + k)) for k in range(len(HOSTILE))]
    assert text.count("<script") == 1 and "<img" not in text and "<!--" not in text  # the page's own script
    assert re.findall(r'class="ok"', text) == []  # no episode shows as a success
    for k, reply in enumerate(HOSTILE):
        shown = html.escape(reply.encode("utf-8", "backslashreplace").decode("utf-8"))
        assert text.count(f'<div class="said">{shown}</div>') == 1, k


@pytest.mark.slow
def test_a_lone_surrogate_neither_stops_the_records_nor_the_page(tmp_path):
    run_dir = run_copy(tmp_path, "sokoban")
    record = hostile_records()[4]
    evaluation.write_samples(os.path.join(run_dir, "samples.md"), [record])
    with open(os.path.join(run_dir, "samples.jsonl"), "rb") as f:
        assert f.read().isascii()
    assert viewer.read_samples(os.path.join(run_dir, "samples.jsonl"))[0][-1] == record  # the surrogate back
    done = subprocess.run([sys.executable, os.path.join(ROOT, "viewer.py"), run_dir], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert not os.path.exists(os.path.join(run_dir, "viewer.html.tmp"))
    with open(os.path.join(run_dir, "viewer.html"), encoding="utf-8") as f:
        assert "lone \\udc80 surrogate" in f.read()  # the text \udc80, in place of the invalid character


def test_a_300_kb_adversarial_reply_renders_in_well_under_a_few_seconds(tmp_path):
    """20,000 `Turn 1:\nState:` lines (the old state pattern took 45 s on 16,000) and as many backticks."""
    run_dir = run_copy(tmp_path, "sokoban")
    record = collapsed_record()
    record["turns"][0]["reply"] = "Turn 1:\nState:\n" * 20_000 + "`" * 10_000
    assert len(record["turns"][0]["reply"]) > 300_000
    started = time.perf_counter()
    evaluation.write_samples(os.path.join(run_dir, "samples.md"), [record])
    text = page(run_dir)
    assert time.perf_counter() - started < 2.0
    assert len(text) < 500_000  # the page shows SHOW_AT_MOST characters of a text, the record keeps it whole
    assert "more characters in the record" in section(text, 2, 1000000)


def test_a_spaced_grid_draws_the_same_cells():
    """env.spaced_grid=true renders `# _ P #`: the spaces are no cells."""
    grid = cells(viewer.grid_svg("# # #\n# P #\n# X #\n# O #\n# # #", "sokoban", 10))
    assert len(grid) == 15 and len(where(grid, "wall")) == 12
    assert (where(grid, "player") == [(1, 1)] and where(grid, "box") == [(2, 1)]
            and where(grid, "target") == [(3, 1)])


def test_a_planted_link_is_never_written_through(tmp_path):
    run_dir = run_copy(tmp_path, "sokoban")
    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_text("keep me")
    os.symlink(elsewhere, os.path.join(run_dir, "viewer.html.tmp"))
    page(run_dir)
    assert (elsewhere.read_text() == "keep me"
            and not os.path.lexists(os.path.join(run_dir, "viewer.html.tmp")))


@pytest.mark.parametrize("make, says", [
    (lambda p: str(p / "absent"), "is not a folder"),
    (lambda p: str(p), "has no samples.jsonl: not a run folder"),
    (lambda p: (p / "thoughts.json").write_text("{}") and str(p), "kept only thoughts.json"),
    (lambda p: (p / "samples.jsonl").write_text("hello\n") and str(p), "no readable record"),
    # an older ragen-mini's folder: its markdown is not read, and the message says what to do
    (lambda p: (p / "samples.md").write_text("# Evaluation at iteration 0\n") and str(p),
     "its samples.md was written by an older ragen-mini"),
])
def test_a_folder_with_nothing_to_show_gives_one_line(tmp_path, make, says):
    run_dir = make(tmp_path)
    with pytest.raises(viewer.ViewerError) as error:
        viewer.write_viewer(run_dir)
    assert says in str(error.value) and run_dir in str(error.value) and "\n" not in str(error.value)


def test_command_line_error_is_one_line(tmp_path):
    done = subprocess.run([sys.executable, os.path.join(ROOT, "viewer.py"), str(tmp_path)],
                          capture_output=True, text=True)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert (done.stderr.strip().count("\n") == 0
            and done.stderr.startswith(f"error: {tmp_path} has no samples.jsonl"))


@pytest.mark.slow  # matplotlib's import and a figure: seconds
def test_plots_command_rebuilds_plots_and_viewer_and_labels_every_y_axis(tmp_path):
    import plots
    run_dir = run_copy(tmp_path, "sokoban")
    with open(os.path.join(run_dir, "metrics.jsonl"), "w") as f:
        f.write('{"iteration": 0, "eval/success": 0.0}\n'
                '{"iteration": 10, "eval/success": 1.0, "rollout/success": 0.5}\n')
    fig = plots.figure([run_dir])
    assert len(fig.axes) == len(plots.PANELS) and all(ax.get_ylabel() for ax in fig.axes)
    assert fig.axes[0].get_ylabel() == "fraction of episodes"
    done = subprocess.run([sys.executable, os.path.join(ROOT, "plots.py"), run_dir],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert os.path.getsize(os.path.join(run_dir, "plots.png")) > 0
    assert os.path.getsize(os.path.join(run_dir, "viewer.html")) > 0


def test_the_end_of_run_summary_names_the_viewer_and_the_records(tmp_path):
    folder_line = [line for line in bookkeeping.run_summary(str(tmp_path), 60).splitlines()
                   if line.startswith("run folder:")]
    assert len(folder_line) == 1 and all(name in folder_line[0] for name in ("viewer.html", "samples.jsonl",
                                                                            "samples.md", "metrics.jsonl"))
