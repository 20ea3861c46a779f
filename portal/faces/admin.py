"""Read-only admin views of the faces records, and one action: queue the current detector again (after a
detector upgrade, or for a failed job). Every other change goes through the viewer, the API or the services."""

from django.contrib import admin, messages
from django_scopes import scope

from portal.core.admin import ReadOnlyAdmin
from portal.faces.models import FaceDetection, FaceRemoval, FaceReview, FaceSpan
from portal.faces.services import detection


@admin.register(FaceDetection)
class FaceDetectionAdmin(ReadOnlyAdmin):
    list_display = ["episode", "study", "detector_id", "state", "progress", "box_count", "finished_at"]
    list_filter = ["study", "state", "detector_id"]
    list_select_related = ["episode", "study"]
    actions = ["detect_again"]

    @admin.action(description="Detect faces again with the current detector")
    def detect_again(self, request, queryset):
        queued = 0
        for job in queryset.select_related("episode__study", "study"):
            with scope(study=job.study):
                queued += detection.queue_detection(request.user, job.episode, again=True) is not None
        messages.success(request, f"{queued} episode(s) queued for {detection.current_detector_id()}.")


@admin.register(FaceSpan)
class FaceSpanAdmin(ReadOnlyAdmin):
    list_display = ["episode", "study", "added_by", "added_at", "removed_at"]
    list_filter = ["study"]
    list_select_related = ["episode", "study", "added_by"]


@admin.register(FaceRemoval)
class FaceRemovalAdmin(ReadOnlyAdmin):
    list_display = ["episode", "study", "detector_id", "frame", "index", "removed_by", "removed_at"]
    list_filter = ["study"]
    list_select_related = ["episode", "study", "removed_by"]


@admin.register(FaceReview)
class FaceReviewAdmin(ReadOnlyAdmin):
    list_display = ["episode", "study", "detector_id", "reviewed_by", "reviewed_at"]
    list_filter = ["study"]
    list_select_related = ["episode", "study", "reviewed_by"]
