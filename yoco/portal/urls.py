from django.urls import path

from yoco.portal import notification_settings as notify
from yoco.portal import views
from yoco.portal import year_evidence as evidence

app_name = "portal"

urlpatterns = [
    path("", views.home, name="home"),
    path("contracts/<int:pk>/", views.contract_detail, name="contract"),
    path(
        "contracts/<int:pk>/years/<int:number>/statement.pdf",
        evidence.year_statement,
        name="year-statement",
    ),
    path("contracts/<int:pk>/years/<int:number>/verify", evidence.year_verify, name="year-verify"),
    path("incidents/", views.incident_list, name="incidents"),
    path("incidents.csv", views.incidents_csv, name="incidents-csv"),
    path("incidents/<int:pk>/", views.incident_detail, name="incident"),
    path("incidents/<int:pk>/dispute", views.incident_dispute, name="incident-dispute"),
    path("years.csv", views.years_csv, name="years-csv"),
    path("notifications/", notify.notification_settings, name="notifications"),
    path("notifications/contacts", notify.add_contact, name="notifications-add-contact"),
    path(
        "notifications/contacts/<int:pk>/remove",
        notify.remove_contact,
        name="notifications-remove-contact",
    ),  # fmt: skip
    path("notifications/endpoints", notify.add_endpoint, name="notifications-add-endpoint"),
    path(
        "notifications/endpoints/<int:pk>/disable",
        notify.disable_endpoint,
        name="notifications-disable-endpoint",
    ),  # fmt: skip
    path("notifications/endpoints/<int:pk>/test", notify.send_test, name="notifications-test"),
]
