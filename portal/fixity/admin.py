"""Read-only admin of fixity runs, the problems they found and the alerts. Site administrators see here the
problems that belong to no study (orphans outside every known study's folder), which no study page shows."""

from django.contrib import admin

from portal.core.admin import BigTableAdmin, ReadOnlyAdmin
from portal.fixity.models import Alert, FixityProblem, FixityRun, FixityRunStudy


class FixityRunStudyInline(admin.TabularInline):
    model = FixityRunStudy
    fields = ["study", "objects_listed", "objects_checked", "bytes_checked", "problem_count"]
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(FixityRun)
class FixityRunAdmin(ReadOnlyAdmin):
    list_display = ["pk", "kind", "scope_label", "started_at", "finished_at", "objects_checked", "bytes_checked",
                    "problem_count", "error"]
    list_filter = ["kind"]
    inlines = [FixityRunStudyInline]


@admin.register(FixityProblem)
class FixityProblemAdmin(BigTableAdmin):
    list_display = ["object_name", "kind", "storage", "study", "run", "alert", "detail"]
    list_filter = ["kind", "storage", ("study", admin.EmptyFieldListFilter), "study"]
    list_select_related = ["study", "run", "alert"]
    search_fields = ["object_name"]
    ordering = ["-pk"]
    sortable_by = []


@admin.register(Alert)
class AlertAdmin(ReadOnlyAdmin):
    list_display = ["message", "study", "kind", "state", "created_at", "acknowledged_at", "resolved_at"]
    list_filter = ["study", "kind", "state"]
    list_select_related = ["study"]
