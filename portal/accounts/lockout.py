"""The login lockout's storage (django-axes' database handler) with one change: what a success clears.

Axes' own reset on success deletes every failure that shares a lockout parameter with the successful
sign-in, the address included: anyone signing in correctly from an address (a colleague behind the same
NAT, or an attacker holding one account) wiped the failures counted against every other username guessed
from there. Here a success clears only the failures of the username that signed in.
"""

from __future__ import annotations

from axes.handlers.database import AxesDatabaseHandler
from axes.helpers import get_client_username
from axes.models import AccessAttempt


class UsernameResetHandler(AxesDatabaseHandler):
    def reset_user_attempts(self, request, credentials: dict | None = None) -> int:
        username = get_client_username(request, credentials)
        if not username:
            return 0
        count, _ = AccessAttempt.objects.filter(username=username).delete()
        return count
