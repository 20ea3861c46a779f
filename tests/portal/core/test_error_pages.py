"""400, 403, 404 and 500 pages are the portal's own (layout, navigation, what to do next), with CERES_DEBUG=0.

They used to be Django's bare "403 Forbidden" / "Not Found" text with no way back.
"""

import re

import pytest
from django.test import Client

ERROR_URLS = "tests.portal.core.error_urls"


def login(client, username: str) -> None:
    signed_in = client.post("/accounts/login/", {"username": username, "password": f"ceres-demo-{username}"})
    assert signed_in.status_code == 302


def assert_portal_page(response, status: int) -> str:
    page = response.content.decode()
    assert response.status_code == status
    assert 'class="topbar"' in page and "/static/ceres.css" in page, "the portal's layout"
    assert '<a href="/">Go to your dashboard</a>' in page, "a way back"
    return re.sub(r"\s+", " ", page)


def test_a_study_page_for_another_role_names_the_role_needed_and_the_roles_held(client, demo, settings):
    assert not settings.DEBUG
    login(client, "ethics1")
    page = assert_portal_page(client.get("/studies/demo/headsets/"), 403)
    assert "This page needs the role <strong>Study coordinator</strong> in study <strong>demo</strong>." in page
    assert "You hold Ethics officer there." in page
    assert '<a href="/studies/demo/">Back to study demo</a>' in page
    assert '<nav aria-label="Studies">' in page, "the navigation bar of a signed-in user"


def test_a_study_without_a_role_says_so_and_offers_no_way_into_it(client, demo, make_user):
    client.force_login(make_user("visitor"))
    page = assert_portal_page(client.get("/studies/demo/recordings/"), 403)
    assert "the role <strong>Study coordinator or Ethics officer</strong>" in page
    assert "You hold no role there." in page
    assert "Back to study" not in page


def test_a_site_administrator_gets_a_link_to_grant_the_role(client, demo):
    login(client, "admin")
    page = assert_portal_page(client.get("/studies/demo/settings/"), 403)
    assert f'href="/admin/access/rolegrant/add/?study={demo.pk}">grant a role</a>' in page


def test_a_missing_page_is_named_and_escaped(client, demo):
    login(client, "coordinator")
    page = assert_portal_page(client.get("/studies/demo/recordings/00000000-0000-0000-0000-000000000000/"), 404)
    assert "<h1>Page not found</h1>" in page
    page = assert_portal_page(client.get("/no/<b>such</b>/"), 404)
    assert "<b>such" not in page and "<code>/no/%3Cb%3Esuch%3C/b%3E/</code>" in page
    assert_portal_page(Client().get("/no-such-page/"), 404)  # signed out too


@pytest.mark.parametrize(("url", "status", "heading"), [
    ("/fail/400/", 400, "The portal could not read this request"),
    ("/fail/500/", 500, "Something went wrong on the portal's side"),
])
def test_bad_request_and_server_error_pages(client, demo, settings, url, status, heading):
    settings.ROOT_URLCONF = ERROR_URLS
    login(client, "coordinator")
    client.raise_request_exception = False
    page = assert_portal_page(client.get(url), status)
    assert f"<h1>{heading}</h1>" in page


def _form_token(page: str) -> str:
    return re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)


def test_a_form_without_its_csrf_token_gets_the_portals_page_saying_to_reload_it(demo):
    browser = Client(enforce_csrf_checks=True)
    response = browser.post("/accounts/login/", {"username": "coordinator", "password": "ceres-demo-coordinator"})
    page = assert_portal_page(response, 403)
    assert "<h1>This form could not be accepted</h1>" in page
    assert "Reload the page with the form and submit it again." in page
    assert "CSRF verification failed" not in page, "not Django's bare page"
    assert "<style" not in page and "<script" not in page and " style=" not in page, "nothing the CSP forbids"
    assert "script-src 'self'" in response["Content-Security-Policy"]
    assert "_auth_user_id" not in browser.session, "nothing was done"


def test_a_stale_form_after_signing_in_in_another_tab_gets_the_same_page(demo):
    browser = Client(enforce_csrf_checks=True)
    first_tab = _form_token(browser.get("/accounts/login/").content.decode())
    second_tab = _form_token(browser.get("/accounts/login/").content.decode())
    credentials = {"username": "coordinator", "password": "ceres-demo-coordinator"}
    assert browser.post("/accounts/login/", {**credentials, "csrfmiddlewaretoken": first_tab}).status_code == 302
    # Signing in rotated the CSRF secret: the form still open in the second tab is stale.
    page = assert_portal_page(browser.post("/accounts/login/", {**credentials, "csrfmiddlewaretoken": second_tab}), 403)
    assert "Reload the page with the form and submit it again." in page
    assert '<nav aria-label="Studies">' in page, "the navigation bar of the user now signed in"
