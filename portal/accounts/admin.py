"""Admin pages of accounts: read-only lists whose only actions go through the audited services."""

from __future__ import annotations

from axes.models import AccessAttempt
from django.contrib import admin, messages
from django_otp.plugins.otp_totp.models import TOTPDevice

from portal.accounts import services
from portal.accounts.models import ApiToken
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
            messages.success(request, f"{user} sets up a new second factor at the next sign-in.")
