"""``/api/tokens/``: a user's own API tokens, listed, made and revoked from a signed-in session, never a token."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.authentication import SessionAuthentication
from rest_framework.exceptions import ValidationError
from rest_framework.permissions import BasePermission
from rest_framework.response import Response
from rest_framework.throttling import ScopedRateThrottle

from portal.access.permissions import studies_for
from portal.accounts import services
from portal.accounts.models import ApiToken
from portal.core.integers import api_integer


class ApiTokenSerializer(serializers.ModelSerializer):
    study = serializers.SlugRelatedField(slug_field="code", read_only=True)

    class Meta:
        model = ApiToken
        fields = ["id", "name", "prefix", "study", "created_at", "expires_at", "last_used_at"]


class NewApiTokenSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=100)
    study = serializers.CharField(required=False, allow_null=True, help_text="Code of the one study it opens.")
    days = api_integer(min_value=1, required=False, help_text="Days until it expires (default and most: 90).")


class CreatedApiTokenSerializer(ApiTokenSerializer):
    key = serializers.CharField(help_text="The key: shown this once, never stored.")

    class Meta(ApiTokenSerializer.Meta):
        fields = [*ApiTokenSerializer.Meta.fields, "key"]


class SignedInSessionOnly(BasePermission):
    """Tokens are listed, made and revoked from a signed-in session, never with a token: a leaked token can
    neither mint successors nor find and revoke its owner's other tokens (a study-limited one, those of other
    studies)."""

    message = "an API token cannot list, make or revoke tokens: sign in (with your second factor) on the portal"

    def has_permission(self, request, view) -> bool:
        return bool(request.user and request.user.is_authenticated
                    and isinstance(request.successful_authenticator, SessionAuthentication))


class ApiTokenViewSet(mixins.ListModelMixin, mixins.CreateModelMixin, mixins.DestroyModelMixin,
                      viewsets.GenericViewSet):
    """List, make (the key is in the answer, once) and revoke the caller's API tokens."""

    serializer_class = ApiTokenSerializer
    permission_classes = [SignedInSessionOnly]
    keyset = ("-created_at", "-pk")
    throttle_scope = "token-create"

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # the schema generator has no user
            return ApiToken.objects.none()
        return ApiToken.objects.filter(user=self.request.user).select_related("study").order_by("-created_at")

    def get_throttles(self):
        # Making tokens has its own, lower rate on top of the user's request rate.
        throttles = super().get_throttles()
        return [*throttles, ScopedRateThrottle()] if self.action == "create" else throttles

    def get_serializer_class(self):
        return NewApiTokenSerializer if self.action == "create" else ApiTokenSerializer

    @extend_schema(request=NewApiTokenSerializer, responses={201: CreatedApiTokenSerializer})
    def create(self, request, *args, **kwargs):
        given = NewApiTokenSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        code = given.validated_data.get("study")
        study = studies_for(request.user).filter(code=code).first() if code else None
        if code and study is None:
            raise ValidationError({"study": f"you hold no role in a study {code!r}"})
        token, key = services.issue_token(request.user, name=given.validated_data["name"], study=study,
                                          days=given.validated_data.get("days"),
                                          second_factor=services.made_after_second_factor(request))
        token.key = key
        return Response(CreatedApiTokenSerializer(token).data, status=status.HTTP_201_CREATED)

    def perform_destroy(self, instance: ApiToken) -> None:
        services.revoke_token(self.request.user, instance)
