"""Content-Security-Policy on every kind of response, and templates that need nothing it forbids."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.urls import reverse

REPO = Path(__file__).resolve().parents[3]


def _policy(response) -> dict[str, list[str]]:
    header = response["Content-Security-Policy"]
    return {part.split()[0]: part.split()[1:] for part in header.split(";") if part.strip()}


@pytest.fixture
def staff_client(client, make_user, study):
    admin = make_user("siteadmin", study, ["coordinator"])
    admin.is_staff = admin.is_superuser = True
    admin.save()
    client.force_login(admin)
    return client


@pytest.mark.parametrize("path", [
    "/accounts/login/", "/", "/studies/alpha/", "/accounts/", "/api/docs/", "/api/schema/", "/api/studies/",
    "/admin/", "/admin/auth/user/", "/healthz",
])
def test_every_response_carries_the_policy(staff_client, path, settings):
    response = staff_client.get(path)
    assert response.status_code == 200, path
    policy = _policy(response)
    assert policy["default-src"] == ["'self'"]
    assert policy["script-src"] == ["'self'"] and policy["style-src"] == ["'self'"]
    assert policy["frame-ancestors"] == ["'none'"] and policy["object-src"] == ["'none'"]
    # One other origin, and only for forms: a download button's redirect to the releases bucket's signed link.
    allowed = {"form-action": set(settings.CONTENT_SECURITY_POLICY["DIRECTIVES"]["form-action"])}
    assert not any("unsafe" in value or ("http" in value and value not in allowed.get(name, ()))
                   for name, values in policy.items() for value in values)
    assert policy["form-action"][0] == "'self'" and len(policy["form-action"]) == (
        2 if settings.STORAGE_BACKEND == "s3" else 1)


def test_form_action_names_the_releases_bucket_origin_only_on_s3():
    from portal import settings as portal_settings

    assert portal_settings._download_origins() == (
        [] if portal_settings.STORAGE_BACKEND == "local"
        else [portal_settings.STORAGES["releases"]["OPTIONS"]["endpoint_url"].rstrip("/")])


def test_api_docs_load_swagger_ui_from_the_portal(staff_client):
    page = staff_client.get("/api/docs/").content.decode()
    sources = re.findall(r'(?:src|href)="([^"]+)"', page)
    assert sources and all(source.startswith("/") for source in sources), sources
    assert any("drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js" in s for s in sources)
    assert "<script>" not in page and "<style" not in page
    # Swagger UI's start-up code is a script file of its own (drf-spectacular's split view), not inline.
    assert "/api/docs/?script=" in sources
    script = staff_client.get("/api/docs/?script=")
    assert script.status_code == 200 and "SwaggerUIBundle" in script.content.decode()


def test_templates_hold_no_inline_script_or_style():
    offenders = []
    for template in (REPO / "templates").rglob("*.html"):
        text = template.read_text()
        if re.search(r"<script(?![^>]*\bsrc=)[^>]*>", text) or re.search(r"\sstyle=", text) or "<style" in text:
            offenders.append(str(template.relative_to(REPO)))
        if re.search(r"\son[a-z]+=", text):
            offenders.append(f"{template.relative_to(REPO)} (event handler attribute)")
    assert not offenders, offenders


def test_the_login_page_is_framed_by_nobody(client):
    response = client.get(reverse("login"))
    assert response["X-Frame-Options"] == "DENY"
