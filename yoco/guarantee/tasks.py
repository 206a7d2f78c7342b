"""The guarantee's Celery tasks. Ingest (one layer down, in `yoco.events`) sends
`process_events_task` by name, so it never imports this app; `GuaranteeConfig.ready` imports
this module so that the name is registered in every process (eager mode included)."""

from celery import shared_task


@shared_task(acks_late=True)
def process_events_task(pks: list[int]) -> None:
    """After an ingest: its stored events, then some of any backlog, then the expiry."""
    from yoco.guarantee.processing import process_after_ingest

    process_after_ingest(pks)


@shared_task
def process_pending_task() -> int:
    """The periodic sweep (Celery beat): every event a crash or a failed task left pending."""
    from yoco.guarantee.processing import process_pending

    return process_pending()


@shared_task(acks_late=True)
def refold_contract_task(contract_id: int) -> None:
    """Re-fold every incident and job of the clusters a (new) contract covers."""
    from yoco.events.models import Event
    from yoco.guarantee.fold import fold
    from yoco.guarantee.models import Contract

    for cluster in Contract.objects.get(pk=contract_id).clusters.all():
        events = Event.objects.filter(cluster=cluster)
        subjects = set(events.exclude(subject=None).values_list("subject", flat=True))
        sources = set(events.values_list("source", flat=True))
        if subjects or sources:
            fold(cluster, subjects, sources)


@shared_task
def close_years_task() -> list[int]:
    from yoco.guarantee.actions import do_close_due_years

    return [year.pk for year in do_close_due_years()]


@shared_task
def expire_pending_task() -> int:
    from yoco.guarantee.expiry import expire_pending

    return expire_pending()
