"""Fixtures every test file of the Python package uses."""

import pytest

import gradd
from checks import SYNC, write_policy


@pytest.fixture
def sync_policy(tmp_path):
    """A policy whose compiles are synchronous: plans serve every backward."""
    return write_policy(tmp_path, SYNC, "sync.yaml")


@pytest.fixture(autouse=True)
def fresh_gradd():
    """Each test starts from an empty plan cache and zero statistics, and
    leaves gradd disabled."""
    gradd.reset()
    yield
    assert not gradd.is_enabled()
