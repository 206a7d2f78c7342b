"""A training script that forgets to register its state."""

import agent

run = agent.attach()
for _ in run.steps(3):
    run.step()
