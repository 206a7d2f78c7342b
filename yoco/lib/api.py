"""Pieces every API view shares: who the reader is, pagination, extra error types."""

from django.core.exceptions import ImproperlyConfigured
from rest_framework import exceptions, permissions
from rest_framework.authentication import SessionAuthentication
from rest_framework.pagination import PageNumberPagination

from yoco.lib.auth import BillingKeyAuthentication, ReadKeyAuthentication


class TooLarge(exceptions.APIException):
    status_code = 413
    default_detail = "the request is too large"
    default_code = "too_large"


class LengthRequired(exceptions.APIException):
    status_code = 411
    default_detail = "the request must state its length (Content-Length)"
    default_code = "length_required"


class CustomerReadAccess(permissions.BasePermission):
    """A customer read token, or a logged-in portal user; sets `request.customer`."""

    def has_permission(self, request, view):
        record = request.auth
        if record is not None and hasattr(record, "customer_id"):
            request.customer = record.customer
            return True
        user = request.user
        membership = getattr(user, "membership", None) if user else None
        if user is not None and user.is_authenticated and membership is not None:
            request.customer = membership.customer
            return True
        if record is None and not (user and user.is_authenticated):
            raise exceptions.NotAuthenticated("send 'Authorization: Bearer <read token>'")
        return False


class BillingAccess(permissions.BasePermission):
    def has_permission(self, request, view):
        if request.auth is None:
            raise exceptions.NotAuthenticated("send 'Authorization: Bearer <billing token>'")
        return True


READ_AUTHENTICATION = [ReadKeyAuthentication, SessionAuthentication]
BILLING_AUTHENTICATION = [BillingKeyAuthentication]


class OrderedPageNumberPagination(PageNumberPagination):
    """Page numbers, refusing a queryset with no explicit order (pages would overlap)."""

    page_size = 100
    page_size_query_param = "page_size"
    max_page_size = 1000

    def paginate_queryset(self, queryset, request, view=None):
        if not queryset.ordered:
            raise ImproperlyConfigured(f"{view!r} paginates an unordered queryset")
        return super().paginate_queryset(queryset, request, view)
