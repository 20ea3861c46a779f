"""The portal's password backend (``AUTHENTICATION_BACKENDS``): Django's ``ModelBackend``, whose ``get_user`` (asked
on every signed-in request) reads the user with a query compiled once per process (``core.fixed_query``).

Signing in, permissions and what a request is told are Django's: the same row is read, an inactive user is not
signed in, and Django's ``get_user`` still compares the session's hash with the password's (a changed password
signs the other sessions out on their next request). Nothing is kept across requests.
"""

from __future__ import annotations

from django.contrib.auth import backends, get_user_model

from portal.core.fixed_query import FixedQuery

# Sessions signed in before this backend name Django's; ``accounts.sessions`` reads them as this one (a subclass
# that signs in and reads users exactly as it does), so nobody is signed out by the change.
DJANGO_MODEL_BACKEND = "django.contrib.auth.backends.ModelBackend"
MODEL_BACKEND = "portal.accounts.backends.ModelBackend"


def _user_query(user_id: int):
    model = get_user_model()
    return model._default_manager.filter(pk=user_id).values_list(
        *(field.attname for field in model._meta.concrete_fields))


# Its shape never changes: compiled once per process, run with the session's user id (``core.fixed_query``).
_USER = FixedQuery(_user_query, user_id=(1, 2))


class ModelBackend(backends.ModelBackend):
    def get_user(self, user_id):
        """``backends.ModelBackend.get_user``: the user of that id (every field, as the ORM reads it), or None if
        there is none or it may not sign in (``user_can_authenticate``: an inactive user)."""
        users = _USER.instances(get_user_model(), user_id=user_id)
        if not users:
            return None
        user = users[0]
        return user if self.user_can_authenticate(user) else None
