"""The incident page shows its event timeline and why it got its outcome."""

from tests.portal.conftest import body


def test_live_resolved_explains_the_deadline_rule(demo, owner):
    page = body(owner.get(f"/incidents/{demo.showcase['live_resolved'].pk}/"))
    assert "Why: Resolved live" in page
    assert "without losing a step" in page and "within the 15-minute deadline" in page
    for kind in ("failure.detected", "migration.started", "migration.completed", "job.resumed"):
        assert kind in page


def test_rollback_names_the_lost_steps(demo, owner):
    page = body(owner.get(f"/incidents/{demo.showcase['rolled_back'].pk}/"))
    assert "Rolled back to a checkpoint" in page and "612 steps" in page


def test_excluded_category_names_the_contract_rule(demo, owner):
    page = body(owner.get(f"/incidents/{demo.showcase['excluded'].pk}/"))
    assert "is excluded by the contract" in page


def test_override_shows_who_and_why(demo, owner):
    page = body(owner.get(f"/incidents/{demo.showcase['overridden'].pk}/"))
    assert "Override by the account team" in page
    assert "ticket FAC-2291" in page
    assert "changed it to" in page and "ops" in page


def test_spare_and_verification_shown(demo, owner):
    page = body(owner.get(f"/incidents/{demo.showcase['live_resolved'].pk}/"))
    assert 'id="spare">standby (a waiting spare)' in page
    assert "id=\"verified\">yes: the target's digest equals the source's" in page
    page = body(owner.get(f"/incidents/{demo.showcase['rolled_back'].pk}/"))
    assert 'id="spare">—' in page and 'id="verified">not reported' in page
