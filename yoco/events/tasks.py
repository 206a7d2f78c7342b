from celery import shared_task

from yoco.accounts.models import Cluster


@shared_task(acks_late=True)
def fold_events_task(cluster_id: int, subjects: list[str], sources: list[str]) -> None:
    from yoco.events.fold import fold
    from yoco.guarantee.expiry import expire_pending

    fold(Cluster.objects.get(pk=cluster_id), subjects, sources)
    expire_pending()  # ingest is also when stored outcomes catch up with the clock


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
