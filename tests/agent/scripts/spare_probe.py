"""A model-aware script that reports what its own process sees, for tests/agent/test_spares.py.

    spare_probe.py OUT_DIR STEPS

Every process writes OUT_DIR/<pid>.json: its role at attach(), when it started, the nice value of
each of its threads when it joined as a spare (`spare_nice`), once its model was loaded
(`loaded_nice`) and when it first trained as a rank (`rank_nice`, `rank`). A spare takes
PROBE_SPARE_LOAD_S seconds to "load its model" (a slow model build); with PROBE_SPARE_CRASH=1 it
dies while loading instead.
"""

import json
import os
import sys
import time
from pathlib import Path

STARTED = time.time()

import torch  # noqa: E402

import agent  # noqa: E402
from agent.priority import thread_nice_values  # noqa: E402

out, steps = Path(sys.argv[1]), int(sys.argv[2])
record = {"pid": os.getpid(), "started": STARTED}


def save() -> None:
    tmp = out / f"{os.getpid()}.tmp"
    tmp.write_text(json.dumps(record))
    os.replace(tmp, out / f"{os.getpid()}.json")


run = agent.attach()
record["role"] = run.role
if run.role == "spare":
    record["spare_nice"] = thread_nice_values(os.getpid())
    save()
    if os.environ.get("PROBE_SPARE_CRASH") == "1":
        os._exit(1)
    time.sleep(float(os.environ.get("PROBE_SPARE_LOAD_S", "0")))
    record["loaded_nice"] = thread_nice_values(os.getpid())
torch.manual_seed(0)
model = torch.nn.Linear(16, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
run.register(model=model, optimizer=optimizer)
save()
for step in run.steps(steps):
    torch.manual_seed(step)
    model(torch.randn(4, 16)).square().mean().backward()
    if run.step() and "rank_nice" not in record:
        record.update(rank=run.rank, rank_nice=thread_nice_values(os.getpid()))
        save()
    time.sleep(0.02)
