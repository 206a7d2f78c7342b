"""torch.distributed.checkpoint (on a bare torch DTensor and sympy come with it: about a second
of CPU, paid by the coordinator of every job) is imported when a checkpoint is saved or restored,
not as a process of a job starts; in transparent mode a script that imports it later still has
its DCP saves skipped while a spare catches up."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.agent.conftest import REPO

pytestmark = pytest.mark.agent

# One fresh process (its imports are what is checked) for both halves: each costs a torch import.
CHECK = """
import sys
import agent.cli, agent.coordinator, agent.launcher, agent.runtime, agent.transparent
from agent import catchup
agent.transparent.install_patches()  # with transparent mode's side-effect guards
print('torch.distributed.checkpoint' in sys.modules)
import torch
import torch.distributed.checkpoint as dcp
catchup.SUPPRESSED.begin()
dcp.save({'t': torch.ones(2)}, checkpoint_id=sys.argv[1], no_dist=True)
catchup.SUPPRESSED.end()
dcp.save({'t': torch.ones(2)}, checkpoint_id=sys.argv[2], no_dist=True)
print('saved')
"""


def test_dcp_is_not_imported_at_start_and_saves_nothing_while_catching_up(tmp_path):
    skipped, kept = tmp_path / "skipped", tmp_path / "kept"
    done = subprocess.run(
        [sys.executable, "-c", CHECK, str(skipped), str(kept)],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["False", "saved"], done.stdout
    assert not skipped.exists()
    assert kept.is_dir() and any(kept.iterdir())
