"""The dashboard: one panel per study and role held, an honest empty state, and the site administrators' list of
every study."""

import pytest


@pytest.mark.parametrize("username, panel", [
    ("coordinator", "coordinator"), ("ethics1", "ethics_officer"), ("researcher", "researcher"),
])
def test_each_role_sees_its_panel(client, demo, username, panel):
    signed_in = client.post("/accounts/login/", {"username": username, "password": f"ceres-demo-{username}"})
    assert signed_in.status_code == 302
    page = client.get("/").content.decode()
    assert f'data-role="{panel}"' in page
    assert demo.title in page


def test_user_without_roles_sees_an_honest_empty_state(client, make_user):
    client.force_login(make_user("newcomer"))
    page = client.get("/").content.decode()
    assert "You have no role in any study yet" in page
    # They ask for access themselves on Data access; they are not sent to a coordinator to ask for them.
    assert 'yourself on <a href="/research/">Data access</a>' in page and "coordinator to request" not in page


def test_a_site_administrator_sees_every_study_read_only_with_links_to_manage_it(client, demo, make_study):
    make_study("other", title="Another study", status="draft")
    assert client.post("/accounts/login/", {"username": "admin", "password": "ceres-demo-admin"}).status_code == 302
    page = client.get("/").content.decode()
    assert "ask a site administrator" not in page and "You have no role in any study yet" not in page
    assert 'id="site-studies"' in page
    for study in ("demo", "other"):
        assert f'<tr data-study="{study}">' in page
    assert "Study coordinator <span class=\"count\">1</span>" in page
    assert "Ethics officer <span class=\"count\">2</span>" in page
    assert f'href="/admin/access/rolegrant/?study__id__exact={demo.pk}">Role grants</a>' in page
    assert f'href="/admin/studies/study/{demo.pk}/change/">Study record</a>' in page
    assert 'href="/studies/demo/"' not in page, "staff status opens no study page"


def test_people_without_staff_status_do_not_see_the_site_overview(client, demo):
    signed_in = client.post("/accounts/login/", {"username": "coordinator", "password": "ceres-demo-coordinator"})
    assert signed_in.status_code == 302
    assert 'id="site-studies"' not in client.get("/").content.decode()
