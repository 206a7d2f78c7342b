from celery import shared_task


@shared_task
def close_years_task() -> list[int]:
    from yoco.guarantee.actions import do_close_due_years

    return [year.pk for year in do_close_due_years()]


@shared_task
def expire_pending_task() -> int:
    from yoco.guarantee.expiry import expire_pending

    return expire_pending()
