"""Time Sokoban puzzle generation: a 6x6 room with 1 box (the paper's), an 8x8 room with 2 boxes.

    python bench/puzzle_time.py
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository root
from envs import Sokoban  # noqa: E402

for dim_room, num_boxes, seeds in ((6, 1, 1000), (8, 2, 200)):
    env = Sokoban(dim_room=dim_room, num_boxes=num_boxes)
    times = []
    for seed in range(seeds):
        start = time.perf_counter()
        env.reset(seed)
        times.append(time.perf_counter() - start)
    print(f"Sokoban {dim_room}x{dim_room}, {num_boxes} box(es): {1000 * sum(times) / seeds:.2f} ms "
          f"per puzzle on average, {1000 * max(times):.1f} ms at most, over {seeds} seeds")
