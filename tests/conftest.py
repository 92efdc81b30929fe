"""Shared by every test file."""
import signal

import pytest
import torch

import models


@pytest.fixture(autouse=True, scope="session")
def threads_as_they_are():
    """The command line's automatic thread count (train.threads=0) reads the machine's load, which changes
    while the suite runs: a test that compares two runs would see two counts, and float sums that differ in
    the last bits. Here train.threads=0 keeps the test process's count; a given number still applies.
    Session-wide, so that it holds in module-wide fixtures too, which run before a test's own fixtures."""
    real = models.cpu_threads
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(models, "cpu_threads", lambda threads, **machine: real(threads, **machine)
                      if threads > 0 or machine else (torch.get_num_threads(), "tests"))
        yield


@pytest.fixture
def signals_as_in_a_terminal():
    """Ctrl-C, SIGTERM and SIGHUP as an interactive shell leaves them (Python's own Ctrl-C, the others' defaults),
    for a test that sends them: a suite started as a shell script's background job ignores Ctrl-C, one under
    nohup SIGHUP, and the trainer leaves an ignored signal ignored (bookkeeping.CtrlC)."""
    wanted = {signal.SIGINT: signal.default_int_handler, signal.SIGTERM: signal.SIG_DFL, signal.SIGHUP: signal.SIG_DFL}
    previous = {signum: signal.signal(signum, handler) for signum, handler in wanted.items()
                if signal.getsignal(signum) is signal.SIG_IGN}
    yield
    for signum, handler in previous.items():
        signal.signal(signum, handler)
