from celery import shared_task


@shared_task(acks_late=True)
def process_events_task(pks: list[int]) -> None:
    """After an ingest: its stored events, then some of any backlog."""
    from yoco.events.processing import process_after_ingest

    process_after_ingest(pks)


@shared_task
def process_pending_task() -> int:
    """The periodic sweep (Celery beat): every event a crash or a failed task left pending."""
    from yoco.events.processing import process_pending

    return process_pending()


@shared_task(acks_late=True)
def refold_contract_task(contract_id: int) -> None:
    """Re-fold every incident and job of the clusters a (new) contract covers."""
    from yoco.events.fold import fold
    from yoco.events.models import Event
    from yoco.guarantee.models import Contract

    for cluster in Contract.objects.get(pk=contract_id).clusters.all():
        events = Event.objects.filter(cluster=cluster)
        subjects = set(events.exclude(subject=None).values_list("subject", flat=True))
        sources = set(events.values_list("source", flat=True))
        if subjects or sources:
            fold(cluster, subjects, sources)


@shared_task
def expire_pending_task() -> int:
    from yoco.events.fold import expire_pending

    return expire_pending()
