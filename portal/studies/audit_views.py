"""The study's audit view: its events newest first with filters, an object's history, one event in full, the
filtered list as CSV, and the chain's status. For the study's coordinators and ethics officers. The pages of the
audit log live with the study (they check the study's roles, which the audit app, below access, cannot)."""

from __future__ import annotations

import json
from urllib.parse import quote, urlencode

from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html

from portal.access.models import Role
from portal.access.permissions import study_view
from portal.audit import study_log
from portal.audit.forms import AuditFilter
from portal.audit.models import AuditEvent
from portal.core import display
from portal.core.pagination import list_page

COORDINATOR, ETHICS = Role.COORDINATOR, Role.ETHICS_OFFICER


def _history_links(study, target_type: str, target_id: str) -> dict:
    """The object's own events, and the wider history it belongs to (a recording's, a demonstrator's)."""
    base = reverse("audit-list", args=[study.code])
    links = {"object": f"{base}?{urlencode({'target_type': target_type, 'target_id': target_id})}"}
    wider = study_log.whose_history(study, target_type, target_id)
    if wider is not None:
        kind, value, label = wider
        links["wider"] = {"kind": kind, "label": label, "url": f"{base}?{urlencode({kind: value})}"}
    return links


def _without_cursor(request: HttpRequest) -> str:
    query = request.GET.copy()
    query.pop("cursor", None)
    return query.urlencode()


@study_view(COORDINATOR, ETHICS)
def audit_list(request: HttpRequest, study) -> HttpResponse:
    filters = AuditFilter(request.GET)
    log = filters.log()
    found = study_log.events(study, log) if log is not None else AuditEvent.objects.none()
    wider = None
    if log is not None and log.target_type and log.target_id:
        wider = _history_links(study, log.target_type, log.target_id).get("wider")
    # Counted along the page's own index range: a study holding most of a large log is otherwise counted by a
    # sequential scan that re-reads its pages from outside PostgreSQL's buffers on every request.
    page = list_page(request, found, study_log.ORDER, count_in_order=True, columns=study_log.LISTED)
    audit_url = reverse("audit-list", args=[study.code])
    return render(request, "audit/list.html", {
        "study": study, "filters": filters, "log": log, "wider": wider,
        "page": page, "rows": event_rows(page.rows, audit_url), "status": study_log.chain_status(),
        "export_query": _without_cursor(request), "audit_url": audit_url,
    })


# One row of the audit view's table (the text the template's loop printed, escaped as it escaped).
EVENT_ROW = """
    <tr data-seq="{seq}">
      <td class="ident"><a href="{url}{seq}/">{seq}</a></td>
      <td class="ident">{created}</td>
      <td class="ident">{actor}</td>
      <td class="ident">{action}</td>
      <td><small>{target_type}</small> {target_label}</td>
      <td>{history}</td>
    </tr>
    """


def event_rows(events, audit_url: str) -> list[str]:
    """The audit view's rows as HTML, made once per row in Python from named rows of ``study_log.LISTED``: an
    event's page is ``audit_url`` plus its seq, its object's history the view filtered on the object
    (``urlencode`` as the filter does)."""
    return [display.row_html(EVENT_ROW, seq=event.seq, url=audit_url,
        created=timezone.localtime(event.created_at).strftime("%Y-%m-%d %H:%M:%S"),
        actor=event.actor_label, action=event.action,
        target_type=event.target_type or "—", target_label=event.target_label,
        history=format_html('<a href="{}" class="history">history</a>',
                            f"{audit_url}?target_type={quote(str(event.target_type), safe='/')}"
                            f"&target_id={quote(str(event.target_id), safe='/')}") if event.target_id else "",
    ) for event in events]


@study_view(COORDINATOR, ETHICS)
def audit_event(request: HttpRequest, study, seq: int) -> HttpResponse:
    event = get_object_or_404(AuditEvent, study_id=study.pk, seq=seq)
    return render(request, "audit/event.html", {
        "study": study, "event": event, "links": _history_links(study, event.target_type, event.target_id),
        "before": json.dumps(event.before, indent=2, sort_keys=True, ensure_ascii=False) if event.before else "",
        "after": json.dumps(event.after, indent=2, sort_keys=True, ensure_ascii=False) if event.after else "",
    })


@study_view(COORDINATOR, ETHICS)
def audit_export(request: HttpRequest, study) -> HttpResponse:
    """Every event the filters match, as CSV, streamed (the export is itself an audit event)."""
    filters = AuditFilter(request.GET)
    log = filters.log()
    if log is None:
        return HttpResponse("; ".join(f"{name}: {' '.join(errors)}" for name, errors in filters.errors.items()),
                            status=400, content_type="text/plain; charset=utf-8")
    response = StreamingHttpResponse(study_log.export_csv(request.user, study, log),
                                     content_type="text/csv; charset=utf-8")
    name = f"audit-{study.code}-{timezone.now():%Y%m%d-%H%M%S}.csv"
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response
