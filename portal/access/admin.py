from django.contrib import admin

from portal.access import services
from portal.access.models import RoleGrant


@admin.register(RoleGrant)
class RoleGrantAdmin(admin.ModelAdmin):
    list_display = ["user", "study", "role", "expires_at", "granted_by", "granted_at"]
    list_filter = ["role", "study"]
    list_select_related = ["user", "study", "granted_by"]
    search_fields = ["user__username", "study__code"]
    readonly_fields = ["granted_by", "granted_at", "access_request"]

    def get_readonly_fields(self, request, obj=None):
        # An existing grant keeps its user, study and role; only the expiry changes.
        return [*self.readonly_fields, "user", "study", "role"] if obj else self.readonly_fields

    def save_model(self, request, obj, form, change):
        saved = services.grant_role(request.user, obj.user, obj.study, obj.role, expires_at=obj.expires_at)
        obj.pk = saved.pk

    def delete_model(self, request, obj):
        services.revoke_role(request.user, obj)

    def delete_queryset(self, request, queryset):
        for grant in queryset:
            services.revoke_role(request.user, grant)
