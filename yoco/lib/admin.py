"""What the account team's admin pages share.

The admin never writes a model itself: every change is a `do_*` action (one transaction with
its audit record). So the model admins here are read-only views with admin actions; an action
that needs a reason or a value asks for it on an intermediate form first.
"""

from functools import wraps

from django import forms
from django.contrib import admin, messages
from django.template.response import TemplateResponse

from yoco.lib.errors import ActionError


class ReasonForm(forms.Form):
    reason = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3, "cols": 60}),
        help_text="Why: kept in the audit history.",
    )


def each_action(*, description: str):
    """An admin action calling the decorated `apply(modeladmin, request, obj)` for each selected
    object: it returns a message to show (or None); an ActionError is shown as an error and the
    other objects still go through."""

    def decorate(apply):
        @admin.action(description=description)
        @wraps(apply)
        def action(modeladmin, request, queryset):
            _apply_each(modeladmin, request, queryset, lambda obj: apply(modeladmin, request, obj))

        return action

    return decorate


def form_action(*, description: str, title: str, explanation: str, form_class=ReasonForm):
    """An admin action that first asks for `form_class` (a reason, a value) on an intermediate
    page, then calls the decorated `apply(modeladmin, request, obj, cleaned_data)` for each
    selected object, as `each_action` does."""

    def decorate(apply):
        @admin.action(description=description)
        @wraps(apply)
        def action(modeladmin, request, queryset):
            form = form_class(request.POST if "apply" in request.POST else None)
            if "apply" in request.POST and form.is_valid():
                _apply_each(
                    modeladmin,
                    request,
                    queryset,
                    lambda obj: apply(modeladmin, request, obj, form.cleaned_data),
                )
                return None  # back to the change list
            return TemplateResponse(
                request,
                "admin/yoco/action_form.html",
                {
                    **modeladmin.admin_site.each_context(request),
                    "title": title,
                    "description": explanation,
                    "form": form,
                    "queryset": queryset,
                    "action": request.POST.get("action"),
                    "opts": modeladmin.model._meta,
                },
            )

        return action

    return decorate


def _apply_each(modeladmin, request, queryset, apply):
    for obj in queryset:
        try:
            message = apply(obj)
        except ActionError as exc:
            modeladmin.message_user(request, f"{obj}: {exc}", messages.ERROR)
        else:
            if message:
                modeladmin.message_user(request, f"{obj}: {message}", messages.SUCCESS)


def show_key_once(modeladmin, request, label: str, key: str) -> None:
    modeladmin.message_user(
        request,
        f"{label}: {key} — copy it now: it is stored hashed and will not be shown again.",
        messages.WARNING,
    )


class ReadOnlyInline(admin.TabularInline):
    """Rows shown beside their parent, changed only through actions. Set `fields`."""

    extra = 0
    can_delete = False
    show_change_link = True

    def get_readonly_fields(self, request, obj=None):
        return self.fields

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


class ReadOnlyAdmin(admin.ModelAdmin):
    """View pages only: changes happen through the admin actions (the `do_*` functions)."""

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def get_actions(self, request):
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)
        return actions
