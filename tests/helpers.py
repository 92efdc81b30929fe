"""Small tools shared by the test files."""
import concurrent.futures
from pathlib import Path

TINY_YAML = str(Path(__file__).resolve().parent.parent / "configs" / "tiny.yaml")
# The one-turn Bandit: one action, one turn
BANDIT = ["env.name=bandit", "env.max_turns=1", "env.max_actions_per_turn=1", "env.max_actions=1"]


def two_at_once(run, items):
    """[run(item) for item in items], two at a time, each in a thread: for work done in processes of their own (a
    grading, a pytest run), so that the machine's second core takes a share while pytest runs one test at a time."""
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        return list(pool.map(run, items))


class Recorder:
    """Wraps a policy; records what it was shown and what it returned, call by call."""

    def __init__(self, policy):
        self.policy, self.calls = policy, []

    def __call__(self, contexts):
        shown = [list(c) for c in contexts]
        responses = self.policy(contexts)
        self.calls.append((shown, [list(r) for r in responses]))
        return responses


def llm_policy(model, chat, cfg, temperature):
    """rollout.LLMPolicy as the trainer builds it: with rollout.engine=fast, a fast.StaticDecoder sized to the
    first call's batch (the trainer sizes it to its rollout batch)."""
    import rollout

    rollout_model = rollout.RolloutModel(model, chat)
    policy = rollout.LLMPolicy(rollout_model, cfg, temperature)
    if cfg.rollout.engine != "fast":
        return policy
    import fast

    def llm_policy(contexts):
        if rollout_model.decoder is None:
            rollout_model.decoder = fast.StaticDecoder(model, len(contexts), cfg, chat.stop_ids, chat.pad_id)
        return policy(contexts)

    return llm_policy
