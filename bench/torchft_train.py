"""The TorchFT baseline of bench/goodput.py: one replica group (of one process) per worker.

    python bench/torchft_train.py lighthouse /tmp/lighthouse &   # address -> /tmp/lighthouse
    REPLICA_GROUP_ID=0 NUM_REPLICA_GROUPS=2 TORCHFT_LIGHTHOUSE=$(cat /tmp/lighthouse) \\
        torchrun --standalone --nproc-per-node 1 --max-restarts 8 bench/torchft_train.py \\
        --steps 600 --progress-dir /tmp/progress

The same model, optimizer, schedule, data and seed as agent/examples/gpt.py, under
torchft.Manager + torchft's DDP and Optimizer wrappers (the layout of torchft's train_ddp.py).
When a replica group dies the others go on without it (fewer samples per step) and torchrun
restarts it; the restarted group fetches the state from a live peer and rejoins. The job is the
same amount of work as the other systems: it ends when ``steps × NUM_REPLICA_GROUPS`` batches
have been committed (torchft's ``batches_committed``), so steps run short-handed are made up.

torchft comes with the project's [bench] extra: ``pip install -e ".[bench]"`` (torchft-nightly,
pinned; the CPU torch already installed is kept).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from datetime import timedelta
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent.examples.data import SyntheticTokens  # noqa: E402
from bench.ckpt_restart_train import Progress, build, model_args  # noqa: E402


def serve_lighthouse(address_file: Path) -> None:
    """The lighthouse, on a port it binds itself (any free one): its address goes to
    `address_file` once it listens; it serves until killed."""
    from torchft.coordination import LighthouseServer

    server = LighthouseServer(
        bind="127.0.0.1:0", min_replicas=1, join_timeout_ms=1000, heartbeat_timeout_ms=1000
    )
    port = server.address().rsplit(":", 1)[1]
    tmp = address_file.with_suffix(".tmp")
    tmp.write_text(f"http://127.0.0.1:{port}")
    os.replace(tmp, address_file)
    while True:
        time.sleep(3600)


def main() -> None:
    if sys.argv[1:2] == ["lighthouse"]:
        serve_lighthouse(Path(sys.argv[2]))
        return
    p = argparse.ArgumentParser(description=__doc__)
    model_args(p)
    args = p.parse_args()

    from torchft import DistributedDataParallel, Manager, Optimizer, ProcessGroupGloo

    torch.set_num_threads(int(os.environ.get("YOCO_THREADS", "1")))
    group = int(os.environ.get("REPLICA_GROUP_ID", 0))
    groups = int(os.environ.get("NUM_REPLICA_GROUPS", 2))
    done = args.progress_dir / "DONE"
    if done.exists():  # restarted after the job finished: there is nothing left to do
        return
    model, inner_optimizer, scheduler = build(args)
    data = SyntheticTokens(args.seed, group, args.batch, args.seq, args.vocab)
    torch.manual_seed(args.seed * 7919 + group)

    def state_dict():
        return {
            "model": model.state_dict(),
            "optim": inner_optimizer.state_dict(),
            "sched": scheduler.state_dict(),
        }

    def load_state_dict(state):
        model.load_state_dict(state["model"])
        inner_optimizer.load_state_dict(state["optim"])
        scheduler.load_state_dict(state["sched"])

    manager = Manager(
        pg=ProcessGroupGloo(timeout=timedelta(seconds=5)),
        min_replica_size=1,
        load_state_dict=load_state_dict,
        state_dict=state_dict,
        replica_id=f"goodput_{group}",
        timeout=timedelta(seconds=10),
    )
    ddp = DistributedDataParallel(manager, model)
    optimizer = Optimizer(manager, inner_optimizer)
    progress = Progress(args.progress_dir, group, manager.current_step())
    target = args.steps * groups
    aborted = 0
    # A group restarted while the others finish must not train the job again on its own.
    while manager.batches_committed() < target and not done.exists():
        optimizer.zero_grad()  # starts the quorum (and any recovery from a peer)
        inputs, targets = data.next_batch()
        loss = ddp(inputs, targets)
        loss.backward()
        before = manager.current_step()
        optimizer.step()  # commits only if every participant's all-reduce succeeded
        if manager.current_step() > before:
            scheduler.step()
        else:
            aborted += 1
        # "step" in full-step equivalents (batches committed / groups), like the other systems
        progress.write(
            step=manager.batches_committed() // groups,
            ft_step=manager.current_step(),
            aborted=aborted,
        )
    done.touch()
    manager.shutdown(wait=False)


if __name__ == "__main__":
    main()
