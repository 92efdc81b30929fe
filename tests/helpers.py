"""Small tools shared by the test files."""


class Recorder:
    """Wraps a policy; records what it was shown and what it returned, call by call."""

    def __init__(self, policy):
        self.policy, self.calls = policy, []

    def __call__(self, contexts):
        shown = [list(c) for c in contexts]
        responses = self.policy(contexts)
        self.calls.append((shown, [list(r) for r in responses]))
        return responses
