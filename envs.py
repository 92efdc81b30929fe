"""The three text environments of RAGEN (Bandit, Sokoban, FrozenLake) and the answer parser.

Everything the agent sees is plain text: `render()` returns the state (a grid, or the bandit's arms)
and the trainer wraps it in the prompt of docs/paper.md §2 using each env's `instruction`, `symbols`
and `actions`. The API follows gymnasium's order without depending on it:

    env = make_env("sokoban", dim_room=6, num_boxes=1, max_actions=10)
    obs, info = env.reset(seed=0)                 # obs == env.render()
    obs, reward, terminated, truncated, info = env.step("Up")
    info["success"], info["effective"]            # solved? did the action change the state?

Variants are keyword arguments: Sokoban `dim_room`, `num_boxes`, `max_actions`, `search_depth`;
FrozenLake `size`, `p_frozen`, `is_slippery`, `max_actions`; both `spaced_grid` (`# _ P #`, not the
paper's `#_P#`); Bandit `high_name`, `low_name`, `low_payout`, `high_payout`, `high_prob`. BanditRev
swaps which name is the risky one: `make_env("bandit", high_name="Phoenix", low_name="Dragon")`; the
generalisation pairs are other names, e.g. `make_env("bandit", high_name="Teacher", low_name="Engineer")`.

Each env has `actions` (valid action names; Bandit's are in the order shown, a coin flip made by
reset), `max_actions` (the per-trajectory budget, after which `truncated` is True; Bandit 1),
`instruction` (the paper's task text; Bandit's is empty, its state text holds the task) and `symbols`
(symbol -> meaning, in display order). `parse_answer` turns a reply into canonical action names.

`reset(seed)` fixes everything random in the episode (puzzle, map, slips, payout): the same seed and
the same actions give the same trajectory; `copy_env(env)` copies an env mid-episode, random state
included. Sokoban and FrozenLake also accept `reset(seed, grid=text)` to play a hand-written grid in
the symbols below (the tests use it).

Sokoban puzzle generation is timed by `python bench/puzzle_time.py` (docs/performance.md).
"""
import copy
import inspect
import random
import re
from collections import namedtuple


def _check_step(env, action):
    # The rollout parses answers before stepping, so both errors mean a bug in the caller.
    if env.done:
        raise RuntimeError("the episode is over (or reset() was never called): call reset() first")
    if action not in env.actions:
        raise ValueError(f"unknown action {action!r}; valid actions: {env.actions}")


def _grid_text(grid, spaced):
    """Rows of cells as text. A BPE tokenizer merges runs of equal cells (SmolLM2 reads `###P_#` as `###`,
    `P`, `_`, `#`); `spaced` makes each cell a token of its own (` #`, ` P`):

        >>> print(_grid_text([["#", "P"], ["_", "#"]], spaced=True))
        # P
        _ #
    """
    return "\n".join((" " if spaced else "").join(row) for row in grid)


def _parse_grid(grid, symbols):
    """A hand-written grid -> ({(row, col): symbol}, rows, cols)."""
    lines = grid.strip("\n").split("\n")
    cells = {(r, c): ch for r, line in enumerate(lines) for c, ch in enumerate(line)}
    if len({len(line) for line in lines}) != 1 or not set(cells.values()) <= set(symbols):
        raise ValueError(f"a grid needs rows of equal length made of the symbols {list(symbols)}")
    return cells, len(lines), len(lines[0])


def _find(cells, symbols):
    return frozenset(cell for cell, ch in cells.items() if ch in symbols)


def _end_of_step(env, terminated):
    # The per-trajectory budget ends an unfinished episode with truncated=True (gymnasium's meaning:
    # cut short, not failed); an action that finishes the episode is a termination, not a truncation.
    env.num_actions += 1
    truncated = not terminated and env.num_actions >= env.max_actions
    env.done = terminated or truncated
    return truncated


# ----------------------------------------------------------------------------------------------
# Bandit: one turn, one action. The only information is in the arms' names, so the task tests
# whether the model's prior about "Dragon" (risky, big) vs "Phoenix" (safe) is put to use.

class Bandit:
    instruction = ""  # the paper's Bandit has no instruction: its state text below is the whole task
    symbols = {}
    max_actions = 1

    def __init__(self, high_name="Dragon", low_name="Phoenix", low_payout=0.1, high_payout=1.0,
                 high_prob=0.25):
        # The defaults make the risky arm the right choice: 0.25 * 1.0 = 0.25 > 0.1 on average.
        if not high_name.strip() or high_name.strip() == low_name.strip():
            raise ValueError(f"the arms need two different, non-empty names, not {high_name!r} and "
                             f"{low_name!r}: an answer naming one would pull both")
        if not (0 <= high_prob <= 1 and max(abs(low_payout), abs(high_payout)) <= 1000):
            raise ValueError("high_prob must be in [0, 1] and the payouts within [-1000, 1000]")
        self.high_name, self.low_name = high_name, low_name
        self.low_payout, self.high_payout, self.high_prob = low_payout, high_payout, high_prob
        self.actions = [high_name, low_name]
        self.done, self.pulled = True, None

    def reset(self, seed=None):
        self.rng = random.Random(seed)
        # Coin flip for the order of the names, and `actions` follows it: the trainer lists the valid
        # actions in the prompt, and a fixed order would let the model learn "pick the first one".
        low_first = self.rng.random() < 0.5
        self.actions = [self.low_name, self.high_name] if low_first else [self.high_name, self.low_name]
        self.done, self.num_actions, self.pulled = False, 0, None
        return self.render(), {"success": False}

    def step(self, action):
        _check_step(self, action)
        if action == self.low_name:
            reward = self.low_payout
        else:
            reward = self.high_payout if self.rng.random() < self.high_prob else 0.0
        self.pulled = (action, reward)
        _end_of_step(self, terminated=True)
        # Success is the decision, not the luck: the risky arm is right even when it paid 0.
        info = {"success": action == self.high_name, "effective": True}
        return self.render(), reward, True, False, info

    def render(self):
        a, b = self.actions
        text = ("You are playing a bandit game. Goal: Maximize your total reward by choosing which arm to "
                f"pull. \nGame Rules: \n1. There are 2 arms, named {a} and {b}\n2. Each arm has its own "
                "reward distribution, related to their names. \n3. Analyze the symbolic meaning of each "
                "arm's name to guess how their reward distribution might behave.\n4. Based on the symbolic "
                "meaning of their names, which arm do you think is more likely to give higher rewards on "
                f"average? Choose between {a} and {b}, and output like <answer> {a} </answer> or "
                f"<answer> {b} </answer>.\n")
        if self.pulled is not None:
            text += f"\nYou pulled {self.pulled[0]} and received {self.pulled[1]} points."
        return text


# ----------------------------------------------------------------------------------------------
# Sokoban. A state is (player, boxes): the cell of the player and a frozenset of box cells; the
# room never changes (`floor`: the free cells, everything else is wall; `targets`). Using sets of
# (row, col) cells instead of a 2-D array makes states hashable, which both the puzzle generator
# and breadth-first search need, and makes "outside the grid" simply "not floor".

SOKOBAN_MOVES = {"Up": (-1, 0), "Down": (1, 0), "Left": (0, -1), "Right": (0, 1)}


def sokoban_move(floor, boxes, player, action):
    """One forward move: returns the new (player, boxes), both unchanged when the move is blocked.

    `floor` is the set of free (row, col) cells (every other cell is wall, outside the grid included),
    `boxes` a frozenset of box cells, `player` a (row, col) tuple, `action` a key of SOKOBAN_MOVES
    (rows grow downwards: "Up" is (-1, 0)). With ahead = player + SOKOBAN_MOVES[action]:
    - ahead is not floor (a wall): blocked.
    - ahead is floor without a box: the player steps onto it; boxes unchanged.
    - ahead holds a box: the box is pushed to beyond = ahead + the same step, and the player steps
      onto ahead, but only if beyond is floor and holds no box (never into a wall, never into a
      second box: two boxes in a row do not move). Otherwise blocked.
    - blocked: returns the given (player, boxes) unchanged.
    Boxes are never pulled, and targets play no part in a move. `boxes` is not changed in place: a
    push returns a new frozenset.

    Worked example, a corridor: row 1, columns 1 to 4 are floor (P player, X box, # wall; the picture
    is the first call's state):

        ######        floor = {(1, 1), (1, 2), (1, 3), (1, 4)}
        #PX  #
        ######

        sokoban_move(floor, frozenset({(1, 2)}), (1, 1), "Right")   # push
          -> ((1, 2), frozenset({(1, 3)}))
        sokoban_move(floor, frozenset({(1, 2)}), (1, 3), "Right")   # step, the box stays behind
          -> ((1, 4), frozenset({(1, 2)}))
        sokoban_move(floor, frozenset({(1, 4)}), (1, 3), "Right")   # blocked: the box is at the wall
          -> ((1, 3), frozenset({(1, 4)}))
        sokoban_move(floor, frozenset({(1, 2), (1, 3)}), (1, 1), "Right")   # blocked: two boxes in a row
          -> ((1, 1), frozenset({(1, 2), (1, 3)}))
        sokoban_move(floor, frozenset({(1, 2)}), (1, 1), "Up")   # blocked: (0, 1) is wall
          -> ((1, 1), frozenset({(1, 2)}))
    """
    # BEGIN SOLUTION ex1-sokoban
    dr, dc = SOKOBAN_MOVES[action]
    ahead = (player[0] + dr, player[1] + dc)
    if ahead not in floor:
        return player, boxes
    if ahead in boxes:
        beyond = (ahead[0] + dr, ahead[1] + dc)
        # A box only moves into free floor: never into a wall, never into another box
        # (the player is not strong enough to push two boxes in a row).
        if beyond not in floor or beyond in boxes:
            return player, boxes
        boxes = boxes - {ahead} | {beyond}
    return ahead, boxes
    # END SOLUTION


def solve_sokoban(floor, targets, boxes, player, max_len):
    """Breadth-first search: a shortest list of actions that solves the puzzle, or None if none
    has at most `max_len` actions. The generator uses it to keep puzzles within the budget and
    baselines.py for the optimal policy."""
    parent = {(player, boxes): None}
    frontier = [(player, boxes)]
    for depth in range(max_len + 1):
        next_frontier = []
        for state in frontier:
            if state[1] <= targets:
                path = []
                while parent[state] is not None:
                    state, action = parent[state]
                    path.append(action)
                return path[::-1]
            if depth < max_len:
                for action in SOKOBAN_MOVES:
                    nxt = sokoban_move(floor, state[1], state[0], action)
                    if nxt not in parent:  # also skips blocked moves, which give back the same state
                        parent[nxt] = (state, action)
                        next_frontier.append(nxt)
        frontier = next_frontier
    return None


# gym-sokoban's five 3x3 carving masks, as offsets from the walker's cell: a line across, a line
# down, two L-shapes and a 2x2 block. Stamping them along a random walk gives rooms with corridors.
_CARVE_MASKS = (((0, -1), (0, 0), (0, 1)), ((-1, 0), (0, 0), (1, 0)), ((0, -1), (0, 0), (1, 0)),
                ((0, -1), (0, 0), (1, -1), (1, 0)), ((0, 0), (0, 1), (1, 0)))


def _carve_room(rng, rows, cols):
    direction = rng.choice(list(SOKOBAN_MOVES.values()))
    r, c = rng.randint(1, rows - 1), rng.randint(1, cols - 1)
    floor = set()
    for _ in range(int(1.7 * (rows + cols))):  # gym-sokoban's walk length: 20 steps for 6x6
        if rng.random() < 0.35:
            direction = rng.choice(list(SOKOBAN_MOVES.values()))
        r = min(max(r + direction[0], 1), rows - 2)
        c = min(max(c + direction[1], 1), cols - 2)
        floor.update((r + dr, c + dc) for dr, dc in rng.choice(_CARVE_MASKS))
    # The outer ring is always wall, so a room drawn as text is closed.
    return {(r, c) for r, c in floor if 0 < r < rows - 1 and 0 < c < cols - 1}


def _reverse_play(floor, targets, player, depth):
    """Play backwards from the solved state: the player walks and PULLS boxes off their targets.
    Every pull undoes a push, so any state reached this way can be solved by replaying the moves
    forwards in reverse order: the puzzle is solvable by construction, without a solver.

    Depth-first and capped (gym-sokoban): at most `depth` moves, each state visited once. Among the
    states with no box on a target it keeps the one with the largest score = (number of times the
    pulled box changed) x (total Manhattan distance of the boxes from their own targets): far-moved
    boxes make longer puzzles, and the first factor favours puzzles where boxes must be interleaved.
    Returns (player, boxes, displacement), or None when no pull was possible."""
    best, best_score, seen = None, 0, set()

    def dfs(player, boxes, switches, last_pulled, moves_left):
        nonlocal best, best_score
        if (player, frozenset(boxes)) in seen:
            return
        seen.add((player, frozenset(boxes)))
        displacement = sum(abs(b[0] - t[0]) + abs(b[1] - t[1]) for b, t in zip(boxes, targets))
        if switches * displacement > best_score and not set(boxes) & set(targets):
            best, best_score = (player, boxes, displacement), switches * displacement
        if moves_left == 0:
            return
        for dr, dc in SOKOBAN_MOVES.values():
            step = (player[0] + dr, player[1] + dc)
            if step not in floor or step in boxes:
                continue
            behind = (player[0] - dr, player[1] - dc)
            if behind in boxes:  # the box behind the player follows it: a pull
                i = boxes.index(behind)  # boxes[i] started on targets[i], hence the tuple
                pulled = boxes[:i] + (player,) + boxes[i + 1:]
                dfs(step, pulled, switches + (i != last_pulled), i, moves_left - 1)
            else:
                dfs(step, boxes, switches, last_pulled, moves_left - 1)

    dfs(player, targets, 0, None, depth)
    return best


def _wander(rng, floor, boxes, player, move_prob):
    # After reverse play the player always stands next to a box (its last move was a pull), which
    # gives away the first push. RAGEN walks it 1 to 3 free cells away (more often when the box
    # only moved one cell, as those puzzles would otherwise be trivial).
    if rng.random() > move_prob:
        return player
    visited = {player}
    for _ in range(3):
        options = [(player[0] + dr, player[1] + dc) for dr, dc in SOKOBAN_MOVES.values()]
        options = [cell for cell in options if cell in floor and cell not in boxes | visited]
        if not options:
            break
        player = rng.choice(options)
        visited.add(player)
        if rng.random() > 0.5:
            break
    return player


def generate_sokoban(rng, rows, cols, num_boxes, search_depth, max_actions):
    """Random room, random targets and player, reverse play, random player offset; a puzzle whose
    shortest solution exceeds `max_actions` is thrown away (rare for 6x6: the paper's puzzles all fit
    10 actions), so every puzzle can be solved within the budget the agent gets."""
    for _ in range(1000):
        floor = _carve_room(rng, rows, cols)
        cells = sorted(floor)  # sorted: set order must not decide what a seed generates
        if len(cells) <= num_boxes + 1:
            continue
        player = rng.choice(cells)
        targets = tuple(rng.sample([cell for cell in cells if cell != player], num_boxes))
        found = _reverse_play(floor, targets, player, search_depth)
        if found is None:
            continue
        player, boxes, displacement = found
        targets, boxes = frozenset(targets), frozenset(boxes)
        player = _wander(rng, floor, boxes, player, 0.8 if displacement == 1 else 0.5)
        if solve_sokoban(floor, targets, boxes, player, max_actions) is not None:
            return floor, targets, boxes, player
    raise RuntimeError(f"no {rows}x{cols} puzzle with {num_boxes} boxes solvable in {max_actions} "
                       "actions after 1000 tries: use a larger room or fewer boxes")


class Sokoban:
    instruction = ("You are solving the Sokoban puzzle. You are the player and you need to push all "
                   "boxes to targets. When you are right next to a box, you can push it by moving in "
                   "the same direction. You cannot push a box through a wall, and you cannot pull a "
                   "box. The answer should be a sequence of actions, like "
                   "<answer>Right || Right || Up</answer>")
    symbols = {"#": "wall", "_": "empty", "O": "target", "√": "box on target", "X": "box", "P": "player",
               "S": "player on target"}

    def __init__(self, dim_room=6, num_boxes=1, max_actions=10, search_depth=30, spaced_grid=False):
        self.dim_room = (dim_room, dim_room) if isinstance(dim_room, int) else tuple(dim_room)
        # bounds that keep one room's generation well under a second (4 boxes in a 10x10 room take 16 s)
        if not (len(self.dim_room) == 2 and all(isinstance(n, int) and 5 <= n <= 12 for n in self.dim_room)
                and 1 <= num_boxes <= 2 and 1 <= search_depth <= 50):
            raise ValueError("need dim_room from 5 to 12 (or a [rows, cols] pair of such), num_boxes 1 or 2, "
                             "search_depth from 1 to 50")
        self.num_boxes, self.max_actions, self.search_depth = num_boxes, max_actions, search_depth
        self.spaced_grid = spaced_grid
        self.actions = list(SOKOBAN_MOVES)
        self.done = True

    def reset(self, seed=None, grid=None):
        if grid is None:
            self.rows, self.cols = self.dim_room
            self.floor, self.targets, self.boxes, self.player = generate_sokoban(
                random.Random(seed), self.rows, self.cols, self.num_boxes, self.search_depth,
                self.max_actions)
        else:
            self._load(grid)
        self.done, self.num_actions = False, 0
        return self.render(), {"success": self.boxes <= self.targets}

    def _load(self, grid):
        cells, rows, cols = _parse_grid(grid, self.symbols)
        players, boxes, targets = _find(cells, "PS"), _find(cells, "X√"), _find(cells, "O√S")
        if len(players) != 1 or not boxes or len(boxes) != len(targets):
            raise ValueError("a Sokoban grid needs one player and as many boxes as targets")
        self.floor, self.targets, self.boxes = set(cells) - _find(cells, "#"), targets, boxes
        (self.player,) = players
        self.rows, self.cols = rows, cols

    def step(self, action):
        _check_step(self, action)
        old_player, old_boxes = self.player, self.boxes
        self.player, self.boxes = sokoban_move(self.floor, self.boxes, self.player, action)
        # gym-sokoban's rewards: every action costs 0.1 (a bump into a wall too, so that wasted
        # actions are not free); +1 / -1 when a box enters / leaves a target, +10 once all are in.
        # One push moves one box, so the change in boxes-on-target is -1, 0 or +1.
        solved = self.boxes <= self.targets
        reward = -0.1 + len(self.boxes & self.targets) - len(old_boxes & self.targets) + 10.0 * solved
        truncated = _end_of_step(self, terminated=solved)
        info = {"success": solved, "effective": self.player != old_player}
        return self.render(), reward, solved, truncated, info

    def render(self):
        # walls, then the floor, targets, boxes and the player on top (rendered after every step:
        # painting the pieces costs less than asking every cell what it holds)
        grid = [["#"] * self.cols for _ in range(self.rows)]
        for r, c in self.floor:
            grid[r][c] = "_"
        for r, c in self.targets:
            grid[r][c] = "O"
        for r, c in self.boxes:
            grid[r][c] = "√" if (r, c) in self.targets else "X"
        r, c = self.player
        grid[r][c] = "S" if self.player in self.targets else "P"
        return _grid_text(grid, self.spaced_grid)


# ----------------------------------------------------------------------------------------------
# FrozenLake (gymnasium's, with RAGEN's random start and goal). The ice is slippery: the same
# answer can succeed or fail, so the agent must re-plan from each new observation.

class FrozenLake:
    instruction = ("You are solving the FrozenLake puzzle. Forbid the whole and go to the target. You may "
                   "move to the unintended direction due to the slippery ice. Example answer format: "
                   "<think>To forbid the hole and go to the target, I should go left then go up.</think>"
                   "<answer>Left || Up</answer>")
    symbols = {"P": "player", "_": "empty", "O": "hole", "G": "goal", "X": "player in hole",
               "√": "player on goal"}
    _MOVES = {"Left": (0, -1), "Down": (1, 0), "Right": (0, 1), "Up": (-1, 0)}

    def __init__(self, size=4, p_frozen=0.8, is_slippery=True, max_actions=10, spaced_grid=False):
        if not 2 <= size <= 100:
            raise ValueError("FrozenLake needs a size from 2 (start and goal are different cells) to 100")
        if not 0.5 <= p_frozen <= 1:  # fewer frozen cells and a map with a path can take minutes to draw
            raise ValueError("p_frozen must be from 0.5 to 1")
        self.size, self.p_frozen, self.is_slippery = size, p_frozen, is_slippery
        self.max_actions, self.spaced_grid = max_actions, spaced_grid
        # gymnasium's order: with it, the two neighbours of an action in the cycle
        # Left, Down, Right, Up are exactly its two perpendicular directions.
        self.actions = list(self._MOVES)
        self.done = True

    def reset(self, seed=None, grid=None):
        # One generator for the map and then for every slip, so the seed fixes the whole episode.
        self.rng = random.Random(seed)
        if grid is None:
            self._generate()
        else:
            self._load(grid)
        self.done, self.num_actions = False, 0
        return self.render(), {"success": self.player == self.goal}

    def _neighbours(self, cell):
        return [(cell[0] + dr, cell[1] + dc) for dr, dc in self._MOVES.values()
                if 0 <= cell[0] + dr < self.rows and 0 <= cell[1] + dc < self.cols]

    def _generate(self):
        # RAGEN's generate_random_map: each cell frozen with probability p, start and goal anywhere
        # (distinct), redrawn until the goal can be reached without stepping into a hole.
        self.rows = self.cols = n = self.size
        while True:
            holes = {(r, c) for r in range(n) for c in range(n) if self.rng.random() >= self.p_frozen}
            start = (self.rng.randrange(n), self.rng.randrange(n))
            goal = (self.rng.randrange(n), self.rng.randrange(n))
            if start == goal:
                continue
            self.holes, self.goal, self.player = holes - {start, goal}, goal, start
            reached, stack = {start}, [start]
            while stack:
                for nxt in self._neighbours(stack.pop()):
                    if nxt not in reached and nxt not in self.holes:
                        reached.add(nxt)
                        stack.append(nxt)
            if goal in reached:
                return

    def _load(self, grid):
        cells, rows, cols = _parse_grid(grid, self.symbols)
        players, goals = _find(cells, "PX√"), _find(cells, "G√")
        if len(players) != 1 or len(goals) != 1:
            raise ValueError("a FrozenLake grid needs one player and one goal")
        (self.player,), (self.goal,) = players, goals
        self.holes, self.rows, self.cols = _find(cells, "OX"), rows, cols

    def outcomes(self, cell, action):
        """Where `action` from `cell` may lead, each with the same probability (1/3 when slippery:
        the intended direction or one of the two perpendicular ones, never the opposite)."""
        i = self.actions.index(action)
        directions = [self.actions[i - 1], action, self.actions[(i + 1) % 4]]
        if not self.is_slippery:
            directions = [action]
        # Moving into the border leaves the player where it is (gymnasium's rule).
        return [(min(max(cell[0] + self._MOVES[d][0], 0), self.rows - 1),
                 min(max(cell[1] + self._MOVES[d][1], 0), self.cols - 1)) for d in directions]

    def step(self, action):
        _check_step(self, action)
        old = self.player
        self.player = self.rng.choice(self.outcomes(self.player, action))
        terminated = self.player in self.holes or self.player == self.goal
        reward = 1.0 if self.player == self.goal else 0.0  # no step cost: only reaching the goal pays
        truncated = _end_of_step(self, terminated)
        info = {"success": self.player == self.goal, "effective": self.player != old}
        return self.render(), reward, terminated, truncated, info

    def render(self):
        grid = [["_"] * self.cols for _ in range(self.rows)]  # frozen ice, then the holes, goal and player
        for r, c in self.holes:
            grid[r][c] = "O"
        grid[self.goal[0]][self.goal[1]] = "G"
        r, c = self.player
        grid[r][c] = "X" if self.player in self.holes else "√" if self.player == self.goal else "P"
        return _grid_text(grid, self.spaced_grid)


# ----------------------------------------------------------------------------------------------
ENVS = {"bandit": Bandit, "sokoban": Sokoban, "frozenlake": FrozenLake}


def copy_env(env):
    """An independent copy of an env mid-episode (a group's N rollouts start from one reset). Steps replace
    the state's values (tuples, frozensets) instead of changing them, so a shallow copy may share them;
    only the random generator (slips, payouts) gets a state of its own. copy.deepcopy would do the same
    but copies the generator's 625 numbers one by one, several times slower (docs/performance.md)."""
    twin = copy.copy(env)
    if hasattr(env, "rng"):
        twin.rng = random.Random()
        twin.rng.setstate(env.rng.getstate())
    return twin


def make_env(name, **kwargs):
    if name not in ENVS:
        raise ValueError(f"unknown environment {name!r}; valid names: {list(ENVS)}")
    parameters = inspect.signature(ENVS[name]).parameters
    unknown = [key for key in kwargs if key not in parameters]
    if unknown:
        raise TypeError(f"{name} has no keyword {unknown}; valid keywords: {list(parameters)}")
    for key, value in kwargs.items():  # YAML reads `is_slippery: 'no'` as a string, which would count as true
        default = parameters[key].default
        wrong_kind = isinstance(default, (bool, str)) and type(value) is not type(default)
        not_a_number = isinstance(default, float) and (isinstance(value, bool)
                                                       or not isinstance(value, (int, float)))
        if wrong_kind or not_a_number:
            raise TypeError(f"{name}'s {key} must be a {type(default).__name__} like {default!r}, "
                            f"not {value!r}")
    return ENVS[name](**kwargs)


# ----------------------------------------------------------------------------------------------
# Parsing the model's reply (docs/paper.md §2, as RAGEN's code does it).

ParsedAnswer = namedtuple("ParsedAnswer", ["think", "actions", "format_ok"])
_SPACE_THEN_ANSWER = re.compile(r"\s*<answer>")


PAPER_SPECIAL_STRINGS = ("<think>", "</think>", "<answer>", "</answer>", "<|im_start|>", "<|im_end|>")


def cleaned_pair(text, require_think=True):
    """The paper's code's reading of a reply (docs/paper.md §9.6): the first think/answer pair, as
    parse_answer finds it, with the special strings deleted inside both texts -> (think, answer) or None.

    >>> cleaned_pair("<think>go</think> <answer><answer>Up</answer></answer>")
    ('go', 'Up')
    """
    pair = _first_pair(text, require_think)
    if pair is None:
        return None
    think, answer = pair
    for special in PAPER_SPECIAL_STRINGS:
        think, answer = think.replace(special, ""), answer.replace(special, "")
    return think, answer


def without_special_strings(text, require_think=True):
    """The paper's code's parser, as a rewrite before parse_answer (rollout.delete_special_strings): the
    first pair rebuilt from cleaned_pair's texts (the text itself when there is no pair), which
    parse_answer then reads as the paper's code did.

    >>> without_special_strings("<think>go</think> <answer><answer>Up</answer></answer>")
    '<think>go</think><answer>Up</answer>'
    """
    pair = cleaned_pair(text, require_think)
    if pair is None:
        return text
    think, answer = pair
    tagged = f"<answer>{answer}</answer>"
    return f"<think>{think}</think>{tagged}" if require_think else tagged


def _first_pair(text, require_think):
    r"""What re.search(r"<think>(.*?)</think>\s*<answer>(.*?)</answer>", text, re.DOTALL) finds (or the
    `<answer>(.*?)</answer>` part alone), as (think, answer) or None, in one pass over the text. The
    regular expression retries its lazy `.*?` from every `<think>`: quadratic on a reply such as
    `<think>` x 16,000. Only the first `<think>` can start the match: a later one sees a subset of the
    closing tags the first one sees."""
    if not require_think:
        start = text.find("<answer>")
        end = text.find("</answer>", start + len("<answer>")) if start >= 0 else -1
        return None if end < 0 else ("", text[start + len("<answer>"):end])
    start = text.find("<think>")
    close = text.find("</think>", start + len("<think>")) if start >= 0 else -1
    while close >= 0:  # the first </think> followed by whitespace and <answer>
        opened = _SPACE_THEN_ANSWER.match(text, close + len("</think>"))
        if opened:
            end = text.find("</answer>", opened.end())
            return None if end < 0 else (text[start + len("<think>"):close], text[opened.end():end])
        close = text.find("</think>", close + len("</think>"))
    return None


def parse_answer(text, valid_actions, max_actions, require_think=True):
    """Returns ParsedAnswer(think, actions, format_ok). Never raises.

    - The first `<think>..</think> <answer>..</answer>` pair counts (only `<answer>..</answer>`
      with require_think=False, and think is then ""); text around it is ignored. No pair:
      ParsedAnswer("", [], False).
    - think is the text between the tags with its surrounding whitespace stripped (str.strip()).
    - The answer is split on "||" and each piece is stripped of surrounding whitespace (str.strip())
      before anything else; pieces empty after stripping (e.g. a trailing "||", or " || ") are
      ignored, as in RAGEN.
    - Only the first `max_actions` pieces are kept, BEFORE checking them (RAGEN's order): the extra
      ones are dropped unread and do not break the format. A long answer wastes nothing but tokens;
      the format penalty is kept for answers that cannot be executed as written.
    - Each kept piece is matched case-insensitively to `valid_actions` and returned in canonical
      spelling; invalid pieces (misspelt names, "Up, Down", full-width letters) are dropped.
    - format_ok: a pair was found, at least one action was kept and every kept piece was valid.
      The tags themselves are case-sensitive, as in RAGEN.
    - Special strings inside the captured texts (`<think>`, `<answer>`, `<|im_end|>`, ...) are NOT
      deleted, unlike the paper's code (docs/paper.md §9.6): they stay in think, and an answer piece
      holding one ("Up<|im_end|>") is invalid.

    Example, with valid_actions ["Up", "Left"] and max_actions 5:
        "<think> go <think> up </think> <answer> up || left<|im_end|> || </answer>"
        -> ParsedAnswer(think="go <think> up", actions=["Up"], format_ok=False)
    """
    # BEGIN SOLUTION ex2-parser
    pair = _first_pair(text, require_think)
    if pair is None:
        return ParsedAnswer("", [], False)
    think, answer = pair[0].strip(), pair[1]
    pieces = [piece.strip() for piece in answer.split("||")]
    pieces = [piece for piece in pieces if piece][:max_actions]
    canonical = {action.lower(): action for action in valid_actions}
    actions = [canonical[piece.lower()] for piece in pieces if piece.lower() in canonical]
    return ParsedAnswer(think, actions, bool(actions) and len(actions) == len(pieces))
    # END SOLUTION


def random_turn_actions(rng, actions, max_actions_per_turn):
    """One turn of the random policy (`rng` is a random.Random): a uniform number of actions in
    1..max_actions_per_turn, each uniform over `actions`. The format warm-up and baselines.py use it."""
    return [rng.choice(actions) for _ in range(rng.randint(1, max_actions_per_turn))]

