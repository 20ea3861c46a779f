"""Admin pages of accounts: read-only lists whose only actions go through the audited services."""

from __future__ import annotations

from axes.models import AccessAttempt
from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.template.response import TemplateResponse
from django.utils.cache import add_never_cache_headers
from django_otp.plugins.otp_static.models import StaticDevice
from django_otp.plugins.otp_totp.models import TOTPDevice

from portal.accounts import services
from portal.accounts.models import ApiToken, EnrolmentCode
from portal.core.admin import ReadOnlyAdmin


@admin.register(ApiToken)
class ApiTokenAdmin(ReadOnlyAdmin):
    """Keys are never stored, so none can be shown; a site administrator can revoke a token."""

    list_display = ["user", "name", "prefix", "study", "created_at", "expires_at", "last_used_at"]
    list_filter = ["study"]
    list_select_related = ["user", "study"]
    search_fields = ["user__username", "name", "prefix"]
    exclude = ["key_hash"]
    actions = ["revoke"]

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request, queryset):
        for token in queryset.select_related("user", "study"):
            services.revoke_token(request.user, token)
        messages.success(request, f"{len(queryset)} token(s) revoked.")


@admin.register(AccessAttempt)
class AccessAttemptAdmin(ReadOnlyAdmin):
    """Failed logins counted by django-axes. Unlocking clears them and is an audit event."""

    list_display = ["username", "ip_address", "failures_since_start", "attempt_time", "path_info"]
    search_fields = ["username", "ip_address"]
    fields = list_display
    actions = ["unlock_usernames", "unlock_addresses"]

    @admin.action(description="Unlock the usernames of the selected rows")
    def unlock_usernames(self, request, queryset):
        for username in sorted({row.username for row in queryset if row.username}):
            services.unlock(request.user, username=username)
            messages.success(request, f"{username} can sign in again.")

    @admin.action(description="Unlock the addresses of the selected rows")
    def unlock_addresses(self, request, queryset):
        for address in sorted({row.ip_address for row in queryset if row.ip_address}):
            services.unlock(request.user, ip_address=address)
            messages.success(request, f"{address} can sign in again.")


admin.site.unregister(TOTPDevice)
# Recovery codes are made by their owner only (account page, audited) and go with the reset of the second factor:
# django-otp's own editable page for them would let codes be written past the audit trail.
admin.site.unregister(StaticDevice)


@admin.register(TOTPDevice)
class SecondFactorAdmin(ReadOnlyAdmin):
    """Authenticators, without their secrets; a site administrator resets one for a user who lost it."""

    list_display = ["user", "name", "confirmed", "last_used_at"]
    list_select_related = ["user"]
    search_fields = ["user__username"]
    fields = list_display
    actions = ["reset"]

    @admin.action(description="Reset the second factor of the selected users (they set up a new one)")
    def reset(self, request, queryset):
        for user in {device.user for device in queryset.select_related("user")}:
            services.remove_second_factor(request.user, user)
            messages.success(request, f"{user} sets up a new second factor at the next sign-in (with an enrolment "
                                      f"code if their roles require one: issue it on the Users page).")


@admin.register(EnrolmentCode)
class EnrolmentCodeAdmin(ReadOnlyAdmin):
    """Enrolment codes issued, without the codes (only their hashes are stored, and those are not shown)."""

    list_display = ["user", "issued_by", "created_at", "expires_at", "redeemed_at"]
    list_select_related = ["user"]
    search_fields = ["user__username", "issued_by"]
    fields = list_display


User = get_user_model()
_UserAdmin = type(admin.site._registry[User])


class UserAdmin(_UserAdmin):
    """Django's user admin, with the action that issues second-factor enrolment codes (shown once, on the page
    the action answers with)."""

    actions = [*(_UserAdmin.actions or []), "issue_enrolment_code"]

    @admin.action(description="Issue a second-factor enrolment code to the selected users")
    def issue_enrolment_code(self, request, queryset):
        issued, refused = [], []
        for user in queryset.order_by("username"):
            try:
                row, code = services.issue_enrolment_code(request.user, user)
            except services.AccountError as exc:
                refused.append((user, str(exc)))
            else:
                issued.append((user, code, row.expires_at))
        response = TemplateResponse(request, "admin/accounts/enrolment_codes.html", {
            **self.admin_site.each_context(request), "title": "Second-factor enrolment codes",
            "issued": issued, "refused": refused, "opts": self.model._meta})
        add_never_cache_headers(response)
        return response


admin.site.unregister(User)
admin.site.register(User, UserAdmin)
