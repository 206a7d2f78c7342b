"""YOCO agent: live migration of in-memory training state (model-aware mode).

import agent
run = agent.attach()
...build model, optimizer, scheduler, data...
run.register(model=model, optimizer=optimizer, scheduler=scheduler, data=data)
for step in run.steps(total):
    ...forward, backward...
    run.step()
"""

__all__ = ["RegistrationError", "Run", "SpareHasNoRank", "attach"]


def __getattr__(name: str):
    # Imported on first use: the operator's CLI (drain, inject, status) must not pay for torch.
    if name in __all__:
        from agent import runtime

        return getattr(runtime, name)
    raise AttributeError(name)
