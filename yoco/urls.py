from django.contrib import admin
from django.urls import path
from drf_spectacular.views import SpectacularAPIView

from yoco.events.api.views import EventIngestView, IncidentListView
from yoco.guarantee.api.views import ContractYearsView

api_v1 = [
    path("api/v1/events", EventIngestView.as_view(), name="api-events"),
    path("api/v1/incidents", IncidentListView.as_view(), name="api-incidents"),
    path(
        "api/v1/contracts/<int:contract_id>/years",
        ContractYearsView.as_view(),
        name="api-contract-years",
    ),
    path("api/v1/schema", SpectacularAPIView.as_view(), name="api-schema"),
]

urlpatterns = [
    path("admin/", admin.site.urls),
    *api_v1,
]
