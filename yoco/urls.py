from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.http import JsonResponse
from django.urls import include, path
from django.views import defaults
from drf_spectacular.views import SpectacularAPIView

from yoco.events.api.views import EventIngestView
from yoco.guarantee.api.billing import BillingCreditAckView, BillingCreditListView
from yoco.guarantee.api.disputes import IncidentDisputesView
from yoco.guarantee.api.views import ContractYearsView, IncidentListView

api_v1 = [
    path("api/v1/events", EventIngestView.as_view(), name="api-events"),
    path("api/v1/incidents", IncidentListView.as_view(), name="api-incidents"),
    path(
        "api/v1/incidents/<int:incident_id>/disputes",
        IncidentDisputesView.as_view(),
        name="api-incident-disputes",
    ),
    path(
        "api/v1/contracts/<int:contract_id>/years",
        ContractYearsView.as_view(),
        name="api-contract-years",
    ),
    path("api/v1/billing/credits", BillingCreditListView.as_view(), name="api-billing-credits"),
    path(
        "api/v1/billing/credits/<int:credit_id>/ack",
        BillingCreditAckView.as_view(),
        name="api-billing-credit-ack",
    ),
    path("api/v1/schema", SpectacularAPIView.as_view(), name="api-schema"),
]

urlpatterns = [
    path("admin/", admin.site.urls),
    *api_v1,
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("", include("yoco.portal.urls")),
]


def not_found(request, exception):
    """An unknown URL under /api/ answers JSON like every API error; elsewhere the 404 page."""
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": "Not found."}, status=404)
    return defaults.page_not_found(request, exception)


handler404 = not_found
