"""The portal's session engine (``SESSION_ENGINE``): Django's database sessions, read with a query compiled once.

Every signed-in request reads its session: the same query each time, for another key at another time. The rows,
the table and what a session holds are Django's (``django.contrib.sessions.backends.db``); a session that is
deleted, expired or unknown is not found, on the next request as before. A session signed in with Django's
``ModelBackend`` is read as signed in with the portal's (``accounts.backends``: the same users, read with a
query compiled once).
"""

from __future__ import annotations

from datetime import UTC, datetime

from django.contrib.auth import BACKEND_SESSION_KEY
from django.contrib.sessions.backends import db
from django.utils import timezone

from portal.accounts.backends import DJANGO_MODEL_BACKEND, MODEL_BACKEND
from portal.core.fixed_query import FixedQuery

# The samples are two keys and two times (``core.fixed_query``); no session is read with them.
_SESSION = FixedQuery(
    lambda key, now: db.SessionStore.get_model_class().objects.filter(session_key=key, expire_date__gt=now)
    .values_list("session_data"),
    key=("sample-session-key-1", "sample-session-key-2"),
    now=(datetime(2001, 1, 1, tzinfo=UTC), datetime(2002, 2, 2, tzinfo=UTC)))


class SessionStore(db.SessionStore):
    def load(self) -> dict:
        """``db.SessionStore.load``: the session's data if its key is known and it has not expired; otherwise an
        empty session without a key (a new one gets a new key when saved)."""
        rows = _SESSION.rows(key=self.session_key, now=timezone.now()) if self.session_key else []
        if not rows:
            self._session_key = None
            return {}
        data = self.decode(rows[0][0])
        if data.get(BACKEND_SESSION_KEY) == DJANGO_MODEL_BACKEND:  # signed in before the portal's subclass
            data[BACKEND_SESSION_KEY] = MODEL_BACKEND
        return data
