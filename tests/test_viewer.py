"""viewer.py: the trajectory page of a run folder.

The fixtures under tests/fixtures/viewer-*/ are small samples.md files in the trainer's format, written by
hand (two evaluations, two seeds each) with the env section of a run's config.yaml. The facts the tests check
were counted by hand from those files, not taken from the viewer's own output:

Sokoban seed 1000000 (tests/fixtures/viewer-sokoban/samples.md, turn 1):

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
"""
import os
import re
import shutil
import subprocess
import sys
from xml.etree import ElementTree

import pytest

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
    for evaluation, seed, order, pulled in ((0, 1000000, ["Dragon", "Phoenix"], ["Phoenix"]),
                                            # a broken answer pulls none
                                            (0, 1000001, ["Phoenix", "Dragon"], []),
                                            (1, 1000001, ["Phoenix", "Dragon"], ["Dragon"])):
        episode = section(text, evaluation, seed)
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


def test_eval_samples_md_joins_the_page(tmp_path):
    run_dir = run_copy(tmp_path, "sokoban")
    with open(os.path.join(run_dir, "samples.md"), encoding="utf-8") as f:
        last = f.read().split("\n# Evaluation at iteration 10\n")[1]
    with open(os.path.join(run_dir, "eval_samples.md"), "w", encoding="utf-8") as f:
        f.write("\n# Evaluation of the checkpoint at iteration 10\n" + last)
    text = page(run_dir)
    assert "Evaluation of the checkpoint at iteration 10 (eval_samples.md)" in text
    assert len(re.findall(r'<section class="episode"', text)) == 6


def test_a_file_cut_anywhere_still_gives_a_page(tmp_path):
    run_dir = run_copy(tmp_path, "sokoban")
    path = os.path.join(run_dir, "samples.md")
    with open(path, encoding="utf-8") as f:
        full = f.read()
    second = full.index("\n# Evaluation at iteration 10")
    for cut in list(range(second + 40, len(full), 211)) + [full.index("- turn 2", second) + 12]:
        with open(path, "w", encoding="utf-8") as f:
            f.write(full[:cut])
        text = page(run_dir)
        # the whole first evaluation
        assert len(re.findall(r'<section class="episode" data-eval="0"', text)) == 2
    # cut inside the last turn line of seed 1000000 at iteration 10: that line is skipped and said so
    assert "skipped: " in text and "an unreadable turn line" in text
    # cut in the middle of its conversation: the turns are there, the page says the conversation is cut
    with open(path, "w", encoding="utf-8") as f:
        f.write(full[:full.index("Turn 2:", second)])
    text = page(run_dir)
    assert "the conversation is cut short" in text
    assert len(grids(section(text, 1, 1000000))) >= 1


def test_a_replay_that_disagrees_with_the_text_is_not_drawn(tmp_path):
    """An edited grid (the box one cell left) no longer matches the seed's puzzle: the page draws the text's
    state, says why, and draws no replayed step."""
    run_dir = run_copy(tmp_path, "sokoban")
    path = os.path.join(run_dir, "samples.md")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    with open(path, "w", encoding="utf-8") as f:
        f.write(text.replace("#_P__#\n#__X_#", "#_P__#\n#_X__#", 1))  # the first turn of seed 1000000
    episode = section(page(run_dir), 0, 1000000)
    assert "the replayed state of turn 1 differs" in episode
    pictures = grids(episode)
    # 3 turns, no step or end pictures
    assert len(pictures) == 3 and where(cells(pictures[0]), "box") == [(2, 2)]


def test_without_config_the_text_states_are_shown(tmp_path):
    run_dir = run_copy(tmp_path, "frozenlake")
    os.remove(os.path.join(run_dir, "config.yaml"))
    text = page(run_dir)
    assert "(frozenlake)" in text and "config.yaml is missing" in text
    assert where(cells(grids(section(text, 0, 1000000))[0]), "goal") == [(2, 3)]


def test_a_turn_line_inside_the_conversation_is_not_a_turn():
    body = ("\n- turn 1: think 'a' -> actions ['Up'] (format ok: True), reward -0.1\n\n```\nTurn 1:\nState:\n"
            "#P#\nYou have 10 actions left.\n"
            "- turn 2: think 'b' -> actions ['Up'] (format ok: True), reward -0.1\n```\n")
    samples = "\n# Evaluation at iteration 0\n\n## seed 7: reward -0.1, success False\n" + body
    (evaluation,), skipped = viewer.parse_samples(samples)
    assert [turn["number"] for turn in evaluation["episodes"][0]["turns"]] == [1] and skipped == []
    assert evaluation["episodes"][0]["states"][1]["text"] == "#P#"


def test_a_thought_quoting_the_line_format_is_read_whole():
    line = ("- turn 2: think 'I said \"-> actions [\\'Up\\']\" and it\\'s wrong' -> actions ['Left'] "
            "(format ok: True), reward -0.1")
    turn = viewer.parse_turn(line)
    assert turn["think"] == "I said \"-> actions ['Up']\" and it's wrong"
    assert turn["actions"] == ["Left"] and turn["number"] == 2 and turn["reward"] == -0.1
    assert viewer.parse_turn("- turn 2: think 'cut sho") is None


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
    (lambda p: str(p), "has no samples.md: not a run folder"),
    (lambda p: (p / "thoughts.json").write_text("{}") and str(p), "kept only thoughts.json"),
    (lambda p: (p / "samples.md").write_text("hello\n") and str(p), "no readable evaluation"),
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
            and done.stderr.startswith(f"error: {tmp_path} has no samples.md"))


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


def screenshot(url, path, size="1000,700"):
    """Chromium's headless screenshot of a page -> the PNG's path."""
    subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    f"--screenshot={path}", f"--window-size={size}", url],
                   capture_output=True, timeout=60, check=True)
    return path


def count_colour(png, rgb, tolerance=6):
    """How many pixels of the screenshot have this colour (antialiased edges aside)."""
    import numpy as np
    from PIL import Image  # matplotlib's own dependency: no new package
    pixels = np.asarray(Image.open(png).convert("RGB")).astype(int)
    return int((np.abs(pixels - np.array(rgb)).max(axis=2) <= tolerance).sum())


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (Debian: apt-get install chromium)")
def test_a_real_browser_draws_the_grids(tmp_path):
    run_dir = run_copy(tmp_path, "sokoban")
    viewer.write_viewer(run_dir)
    url = "file://" + os.path.join(run_dir, "viewer.html")
    png = screenshot(url + "#left=0&right=1&seed=1000000", str(tmp_path / "shot.png"), "1200,1100")
    wall, box, done_box, player = ((0x5d, 0x40, 0x37), (0xe0, 0x8a, 0x1e), (0x2e, 0x9e, 0x4f),
                                   (0x1e, 0x5b, 0xd8))
    # The two panes' grids at 26 px a cell: 2 x 24 walls of about 25 x 25 px, far more than the legend's one.
    assert count_colour(png, wall) > 2 * 24 * 400
    assert count_colour(png, box) > 2 * 300
    assert count_colour(png, player) > 2 * 200
    # The solved episode is on the right (iteration 10): its end shows the box on the target, in green. With
    # iteration 0 on both sides only the legend's small green box is there; the end picture's is larger.
    before = count_colour(screenshot(url + "#left=0&right=0&seed=1000000", str(tmp_path / "before.png"),
                                     "1200,1100"),
                          done_box)
    # one box of a 26-px cell: about 330 pixels, less its tick
    assert count_colour(png, done_box) > before + 150
