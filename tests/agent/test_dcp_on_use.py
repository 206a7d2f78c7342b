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


def _run(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_no_process_of_a_job_imports_dcp_as_it_starts():
    loaded = _run(
        "import sys\n"
        "import agent.cli, agent.coordinator, agent.launcher, agent.runtime, agent.transparent\n"
        "agent.transparent.install_patches()\n"
        "print(sorted(m for m in ('torch.distributed.checkpoint', 'sympy') if m in sys.modules))"
    )
    assert loaded == "[]"


def test_dcp_imported_after_the_guards_saves_nothing_while_catching_up(tmp_path):
    skipped, kept = tmp_path / "skipped", tmp_path / "kept"
    saved = _run(
        "import torch\n"
        "from agent import catchup\n"
        "catchup.install_side_effect_guards()\n"
        "import torch.distributed.checkpoint as dcp\n"
        "catchup.SUPPRESSED.begin()\n"
        f"dcp.save({{'t': torch.ones(2)}}, checkpoint_id={str(skipped)!r}, no_dist=True)\n"
        "catchup.SUPPRESSED.end()\n"
        f"dcp.save({{'t': torch.ones(2)}}, checkpoint_id={str(kept)!r}, no_dist=True)\n"
        "print('saved')"
    )
    assert saved == "saved"
    assert not skipped.exists()
    assert kept.is_dir() and any(kept.iterdir())
