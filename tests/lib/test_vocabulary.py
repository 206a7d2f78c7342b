"""The agent's copy of the SPEC vocabulary (agent/events.py) equals the platform's
(yoco/lib/vocabulary.py): the agent cannot import the platform, so this test is the link."""

from agent import events as agent_events
from yoco.lib import vocabulary


def test_enumerations_agree():
    assert agent_events.TRIGGERS == set(vocabulary.TRIGGERS)
    assert agent_events.CATEGORIES == set(vocabulary.CATEGORIES)
    assert agent_events.STATE_SOURCES == set(vocabulary.STATE_SOURCES)
    assert agent_events.MODES == set(vocabulary.MODES)
    assert agent_events.JOB_STATUSES == set(vocabulary.JOB_STATUSES)
    assert agent_events.TYPE_PREFIX == vocabulary.EVENT_TYPE_PREFIX
    assert {agent_events.TYPE_PREFIX + kind for kind in agent_events.INCIDENT_TYPES} == set(
        vocabulary.INCIDENT_EVENT_TYPES
    )


def test_the_agent_builds_every_event_type_and_only_those():
    factory = agent_events.EventFactory("east", "job-1")
    incident = agent_events.new_incident_id()
    built = [
        factory.job_started(
            world_size=8, model="m", gpus=8, spares=2, parallelism={"dp_replicate": 8}
        ),
        factory.job_finished("completed", step=10),
        factory.failure_detected(
            incident,
            trigger="unplanned",
            category="fail_slow",
            rank=3,
            node="n1",
            device="0",
            step=5,
            xid=None,
            detail="straggler",
        ),  # fmt: skip
        factory.migration_started(
            incident,
            state_source="replica",
            source={"node": "n1"},
            target={"node": "n2"},
            nbytes=1,
        ),  # fmt: skip
        factory.migration_completed(
            incident, steps_lost=0, duration_ms=1, nbytes=1, recompute_ms=0, resumed_step=5
        ),
        factory.migration_failed(incident, "no spare"),
        factory.checkpoint_restored(incident, steps_lost=1, checkpoint_step=4, duration_ms=1),
        factory.job_resumed(incident, step=5, downtime_ms=1),
    ]
    assert sorted(event["type"] for event in built) == sorted(vocabulary.EVENT_TYPES)
    assert built[2]["data"]["category"] in vocabulary.CATEGORIES
