"""The SPEC's vocabulary (sections 3 and 4.3): every enumerated value, in one place.

Plain constants, no Django: ingest validates against them, the rules decide with them, the
admin and the portal list them. The agent cannot import the platform and keeps its own copy
(agent/events.py); tests/lib/test_vocabulary.py checks that the two agree.
"""

EVENT_TYPE_PREFIX = "io.yoco."

JOB_STARTED = "io.yoco.job.started"
JOB_FINISHED = "io.yoco.job.finished"
FAILURE_DETECTED = "io.yoco.failure.detected"
MIGRATION_STARTED = "io.yoco.migration.started"
MIGRATION_COMPLETED = "io.yoco.migration.completed"
MIGRATION_FAILED = "io.yoco.migration.failed"
CHECKPOINT_RESTORED = "io.yoco.checkpoint.restored"
JOB_RESUMED = "io.yoco.job.resumed"

EVENT_TYPES = (
    JOB_STARTED,
    JOB_FINISHED,
    FAILURE_DETECTED,
    MIGRATION_STARTED,
    MIGRATION_COMPLETED,
    MIGRATION_FAILED,
    CHECKPOINT_RESTORED,
    JOB_RESUMED,
)

# Types whose events must carry ``subject`` (the incident id).
INCIDENT_EVENT_TYPES = (
    FAILURE_DETECTED,
    MIGRATION_STARTED,
    MIGRATION_COMPLETED,
    MIGRATION_FAILED,
    CHECKPOINT_RESTORED,
    JOB_RESUMED,
)

FRAMEWORKS = ("torchtitan", "megatron-lm", "deepspeed", "pytorch")
MODES = ("model_aware", "transparent")
STATE_SOURCES = ("self", "replica", "mirror")
SPARES = ("standby", "reclaimed")
JOB_STATUSES = ("completed", "failed", "cancelled")

TRIGGER_UNPLANNED = "unplanned"
TRIGGER_PREEMPTIVE = "preemptive"
TRIGGER_PLANNED = "planned"
TRIGGERS = (TRIGGER_UNPLANNED, TRIGGER_PREEMPTIVE, TRIGGER_PLANNED)

SCOPE_NODE = "node"
SCOPE_NETWORK_WIDE = "network_wide"
SCOPES = (SCOPE_NODE, SCOPE_NETWORK_WIDE)

CATEGORIES = (
    "gpu_xid",
    "gpu_ecc",
    "gpu_thermal",
    "gpu_hang",
    "nvlink",
    "pcie",
    "node_crash",
    "host_memory",
    "power",
    "network_link",
    "storage",
    "software_infra",
    "software_user",
    "sdc",
    "maintenance",
    "fail_slow",
    "unknown",
)

# Incident outcomes (SPEC 4.3) and the ones that enter compliance (SPEC 4.4).
LIVE_RESOLVED = "live_resolved"
ROLLED_BACK = "rolled_back"
FAILED = "failed"
PENDING = "pending"
EXCLUDED = "excluded"
PLANNED = "planned"

OUTCOMES = (LIVE_RESOLVED, ROLLED_BACK, FAILED, PENDING, EXCLUDED, PLANNED)
ELIGIBLE = (LIVE_RESOLVED, ROLLED_BACK, FAILED)
# What the account team may set by hand: every decided outcome (never "pending").
OVERRIDE_OUTCOMES = (LIVE_RESOLVED, ROLLED_BACK, FAILED, EXCLUDED, PLANNED)
