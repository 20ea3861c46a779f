from django.contrib import admin


class ReadOnlyAdmin(admin.ModelAdmin):
    """Admin pages that only show: every change goes through the pages, the API and the services."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
