"""The permission matrices' one check: a URL asked by every persona, with each renderer for a GET."""

from __future__ import annotations

from django.urls import reverse

ACCEPTS = ("application/json", "text/html")


def ask_every_persona(client, world: dict, name: str, arguments, expected, personas) -> None:
    """Ask URL ``name`` (its ``arguments`` filled from ``world``) as each of ``personas``: those a check names get
    its status, the anonymous visitor the login redirect (a 403 on the API), everyone else 403. A GET is asked
    with each of ``ACCEPTS`` (the browsable API must render too), other methods once."""
    kwargs = {arg: world["study"].code if arg == "study_code" else world["values"][arg] for arg in arguments}
    url = reverse(name, kwargs=kwargs)
    for method, roles, status in expected:
        for accept in ACCEPTS if method == "GET" else ("*/*",):
            for persona in personas:
                user = world["users"][persona]
                if user is not None:
                    client.force_login(user)
                response = client.generic(method, url, headers={"accept": accept})
                where = f"{method} {url} ({accept}) as {persona}: {response.status_code}"
                if persona == "anonymous":
                    assert response.status_code == (403 if url.startswith("/api/") else 302), where
                elif persona in roles:
                    assert response.status_code == status, where
                else:
                    assert response.status_code == 403, where
                client.logout()
