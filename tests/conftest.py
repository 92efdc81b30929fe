"""Shared by every test file."""
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
