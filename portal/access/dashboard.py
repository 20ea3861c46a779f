"""What a site administrator sees on the dashboard: every study, read-only, with its people per role and links to
where they manage it."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db.models import Count, Q
from django.urls import reverse
from django.utils import timezone

from portal.access.models import Role, RoleGrant
from portal.studies.models import Study


@dataclass
class SiteStudy:
    """A study as a site administrator sees it on the dashboard: read-only, with links into the admin."""

    study: Study
    people_by_role: list[tuple[str, int]]
    admin_links: list[tuple[str, str]] = field(default_factory=list)


def site_studies(user) -> list[SiteStudy]:
    """Every study with its number of people per role (active grants), and the admin pages ``user`` may open.

    Study metadata only: staff status opens the admin, not a study's data (that needs a grant).
    """
    active = Q(expires_at__isnull=True) | Q(expires_at__gt=timezone.now())
    grants = RoleGrant.objects.filter(active).values("study", "role").annotate(people=Count("user", distinct=True))
    counts = {(row["study"], row["role"]): row["people"] for row in grants}
    entries = []
    for study in Study.objects.order_by("code"):
        entry = SiteStudy(study, [(label, counts.get((study.pk, value), 0)) for value, label in Role.choices])
        if user.has_perm("access.view_rolegrant"):
            entry.admin_links.append(
                ("Role grants", f"{reverse('admin:access_rolegrant_changelist')}?study__id__exact={study.pk}"))
        if user.has_perm("access.add_rolegrant"):
            entry.admin_links.append(("Grant a role", f"{reverse('admin:access_rolegrant_add')}?study={study.pk}"))
        if user.has_perm("studies.view_study"):
            entry.admin_links.append(("Study record", reverse("admin:studies_study_change", args=[study.pk])))
        entries.append(entry)
    return entries
