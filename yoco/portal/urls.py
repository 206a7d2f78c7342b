from django.urls import path

from yoco.portal import views

app_name = "portal"

urlpatterns = [
    path("", views.home, name="home"),
    path("contracts/<int:pk>/", views.contract_detail, name="contract"),
    path("incidents/", views.incident_list, name="incidents"),
    path("incidents.csv", views.incidents_csv, name="incidents-csv"),
    path("incidents/<int:pk>/", views.incident_detail, name="incident"),
    path("years.csv", views.years_csv, name="years-csv"),
]
