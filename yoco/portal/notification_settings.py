"""The notifications settings page (SPEC 4.8): the customer's e-mail contacts and webhook
endpoints (a new endpoint's signing secret is shown on the answer to its form, once), a "send
test" button per endpoint, and the delivery log. Every change is a `yoco.notifications` action."""

from django import forms
from django.contrib import messages
from django.db.models import Prefetch
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from yoco.lib.errors import ActionError
from yoco.notifications import actions
from yoco.notifications.models import Contact, DeliveryAttempt, Endpoint, Notification
from yoco.portal.views import customer_view

LOG_SIZE = 50


class ContactForm(forms.Form):
    email = forms.EmailField(label="E-mail address")


class EndpointForm(forms.Form):
    url = forms.URLField(label="Webhook URL", max_length=500, assume_scheme="https")


def _page(request, *, new_secret=None, status=200):
    customer = request.customer
    log = (
        Notification.objects.filter(customer=customer)
        .select_related("endpoint")
        .prefetch_related(
            Prefetch("delivery_attempts", queryset=DeliveryAttempt.objects.order_by("number"))
        )[:LOG_SIZE]
    )
    context = {
        "contacts": Contact.objects.filter(customer=customer).order_by("kind", "email"),
        "endpoints": Endpoint.objects.filter(customer=customer).order_by("-active", "pk"),
        "log": log,
        "contact_form": ContactForm(),
        "endpoint_form": EndpointForm(),
        "new_secret": new_secret,
    }
    return render(request, "portal/notifications.html", context, status=status)


@customer_view
def notification_settings(request):
    return _page(request)


def _act(request, apply, success: str):
    try:
        apply()
    except ActionError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, success)
    return redirect("portal:notifications")


@require_POST
@customer_view
def add_contact(request):
    form = ContactForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Enter a valid e-mail address.")
        return redirect("portal:notifications")
    email = form.cleaned_data["email"]
    return _act(
        request,
        lambda: actions.do_add_contact(request.customer, email=email, actor=request.user),
        f"{email} will be told of every change.",
    )


@require_POST
@customer_view
def remove_contact(request, pk):
    contact = get_object_or_404(Contact, pk=pk, customer=request.customer)
    return _act(
        request,
        lambda: actions.do_remove_contact(contact, actor=request.user),
        f"{contact.email} removed.",
    )


@require_POST
@customer_view
def add_endpoint(request):
    form = EndpointForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Enter a valid http(s) URL.")
        return redirect("portal:notifications")
    try:
        endpoint, secret = actions.do_add_endpoint(
            url=form.cleaned_data["url"], customer=request.customer, actor=request.user
        )
    except ActionError as exc:
        messages.error(request, str(exc))
        return redirect("portal:notifications")
    # Rendered, not redirected: the secret is in this answer only, never stored in a session.
    return _page(request, new_secret={"endpoint": endpoint, "secret": secret}, status=201)


@require_POST
@customer_view
def disable_endpoint(request, pk):
    endpoint = get_object_or_404(Endpoint, pk=pk, customer=request.customer)
    return _act(
        request,
        lambda: actions.do_disable_endpoint(endpoint, actor=request.user),
        f"{endpoint.url} disabled.",
    )


@require_POST
@customer_view
def send_test(request, pk):
    endpoint = get_object_or_404(Endpoint, pk=pk, customer=request.customer)
    return _act(
        request,
        lambda: actions.do_send_test(endpoint, actor=request.user),
        f"A signed test event is on its way to {endpoint.url}; see the delivery log.",
    )
