"""REST API authentication by ``Authorization: Token <key>``, against the hashed ``ApiToken`` keys."""

from __future__ import annotations

from rest_framework.authentication import TokenAuthentication
from rest_framework.exceptions import AuthenticationFailed

from portal.accounts import services
from portal.accounts.models import ApiToken


class ApiTokenAuthentication(TokenAuthentication):
    """``request.auth`` is the ``ApiToken``: the permission helper reads its study restriction (``study_id``)."""

    model = ApiToken

    def authenticate_credentials(self, key: str):
        try:
            token = services.token_for_key(key)
        except services.AccountError as exc:
            raise AuthenticationFailed(str(exc)) from None
        return token.user, token
