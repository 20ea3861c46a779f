"""Download links: what the link endpoints of releases and datasets answer, and the links issued in a study (a
researcher's own; every one for its coordinators and ethics officers)."""

from __future__ import annotations

from rest_framework import mixins, serializers, viewsets

from portal.access.models import Role
from portal.access.permissions import StudyScopedAPIMixin
from portal.research.models import IssuedLink
from portal.research.services import links

COORDINATOR, ETHICS, RESEARCHER = Role.COORDINATOR, Role.ETHICS_OFFICER, Role.RESEARCHER
STEWARDS = (COORDINATOR, ETHICS)


def absolute(request, link: links.Link) -> dict:
    url = link.url if "://" in link.url else request.build_absolute_uri(link.url)
    return {"path": link.path, "url": url, "expires_at": link.expires_at}


class LinkSerializer(serializers.Serializer):
    path = serializers.CharField()
    url = serializers.URLField(help_text="A signed link to this one object, refused after expires_at.")
    expires_at = serializers.DateTimeField()


class LinksSerializer(serializers.Serializer):
    links = LinkSerializer(many=True)


class LinksRequestSerializer(serializers.Serializer):
    paths = serializers.ListField(child=serializers.CharField(max_length=500), required=False, default=list,
                                  help_text="Files (paths in the release or dataset folder); empty: every file, the "
                                            "manifest and its signature included.")


class IssuedLinkSerializer(serializers.ModelSerializer):
    user = serializers.CharField(source="user.username")
    release = serializers.CharField(source="release.release_id", allow_null=True, default=None)
    dataset = serializers.CharField(source="dataset.dataset_id", allow_null=True, default=None)

    class Meta:
        model = IssuedLink
        fields = ["id", "user", "release", "dataset", "episode_index", "path", "issued_at", "expires_at", "via"]


class IssuedLinkViewSet(StudyScopedAPIMixin, mixins.ListModelMixin, viewsets.GenericViewSet):
    """Download links issued in the study: a researcher's own; every one for coordinators and ethics officers."""

    queryset = IssuedLink.objects.none()
    serializer_class = IssuedLinkSerializer
    keyset = ("-issued_at", "-pk")
    required_roles = (COORDINATOR, ETHICS, RESEARCHER)

    def get_queryset(self):
        rows = IssuedLink.objects.select_related("user", "release", "dataset").defer(
            "dataset__manifest", "dataset__signature")
        if not (set(self.study_roles) & set(STEWARDS)):
            rows = rows.filter(user=self.request.user)
        return rows

