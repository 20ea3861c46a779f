"""Every study URL of the accounts app against every kind of caller."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.portal.urlwalk import study_url_patterns

# URL name -> (method, roles allowed, status for them)
EXPECTED = {
    "study-lockouts": ("GET", {"coordinator"}, 200),
}
STUDY_PATTERNS = study_url_patterns("portal.accounts")


def test_every_accounts_study_url_has_an_expectation():
    assert set(STUDY_PATTERNS) == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_permission_matrix(client, make_user, make_study, study, name):
    method, allowed, status = EXPECTED[name]
    callers = {role: make_user(role, study, [role]) for role in ("coordinator", "ethics_officer", "researcher")}
    callers["other_study"] = make_user("outsider", make_study("beta"), ["coordinator"])
    url = reverse(name, args=[study.code])
    for persona, user in callers.items():
        client.force_login(user)
        answer = client.generic(method, url).status_code
        assert answer == (status if persona in allowed else 403), f"{method} {url} as {persona}: {answer}"
    client.logout()
    anonymous = client.generic(method, url)
    assert anonymous.status_code == 302 and anonymous["Location"].startswith(reverse("login"))
