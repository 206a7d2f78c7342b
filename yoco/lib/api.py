"""Pieces every API view shares: pagination and extra error types (who may read is
`yoco.accounts.auth`'s business)."""

from django.core.exceptions import ImproperlyConfigured
from rest_framework import exceptions
from rest_framework.pagination import PageNumberPagination


class TooLarge(exceptions.APIException):
    status_code = 413
    default_detail = "the request is too large"
    default_code = "too_large"


class LengthRequired(exceptions.APIException):
    status_code = 411
    default_detail = "the request must state its length (Content-Length)"
    default_code = "length_required"


class OrderedPageNumberPagination(PageNumberPagination):
    """Page numbers, refusing a queryset with no explicit order (pages would overlap)."""

    page_size = 100
    page_size_query_param = "page_size"
    max_page_size = 1000

    def paginate_queryset(self, queryset, request, view=None):
        if not queryset.ordered:
            raise ImproperlyConfigured(f"{view!r} paginates an unordered queryset")
        return super().paginate_queryset(queryset, request, view)
