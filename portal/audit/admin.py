from django.contrib import admin
from django.utils import timezone
from django.utils.functional import cached_property

from portal.audit.models import AuditEvent
from portal.core.admin import BigTableAdmin, DistinctValuesFilter, EstimatingPaginator


class ChainPaginator(EstimatingPaginator):
    """The whole log newest first (no filter, no search) is numbered by ``seq``, which has no gaps: the count
    is the last ``seq`` and page N starts at a known ``seq``, so the last page costs what the first costs.
    Filtered lists page like any big table."""

    def _whole_chain(self) -> bool:
        query = self.object_list.query
        # The admin may name the order more than once ("-seq", "-seq").
        return not query.where and set(query.order_by) == {"-seq"}

    @cached_property
    def count(self) -> int:
        if self._whole_chain():
            return AuditEvent.objects.order_by("-seq").values_list("seq", flat=True).first() or 0
        return super().count

    def page(self, number):
        if not self._whole_chain():
            return super().page(number)
        number = self.validate_number(number)
        newest = self.count - (number - 1) * self.per_page
        return self._get_page(self.object_list.filter(seq__lte=newest)[: self.per_page], number, self)


@admin.register(AuditEvent)
class AuditEventAdmin(BigTableAdmin):
    list_display = ["seq", "when", "actor_label", "action", "target", "study_id"]
    list_filter = [("action", DistinctValuesFilter), ("target_type", DistinctValuesFilter)]
    search_fields = ["action", "actor_label", "target_label", "target_id"]
    ordering = ["-seq"]
    sortable_by = ["seq"]
    paginator = ChainPaginator
    list_defer = ("before", "after", "prev_hash", "hash")

    @admin.display(description="when")
    def when(self, event: AuditEvent) -> str:
        return f"{timezone.localtime(event.created_at):%Y-%m-%d %H:%M:%S}"

    @admin.display(description="target")
    def target(self, event: AuditEvent) -> str:
        return f"{event.target_type.rpartition('.')[2]} {event.target_label}"

    def changelist_view(self, request, extra_context=None):
        # The event list needs the page's width at 1280 px: no app sidebar here (the other admin pages keep it).
        return super().changelist_view(request, {**(extra_context or {}), "is_nav_sidebar_enabled": False})
