"""Every study URL of every app is in some app's permission matrix.

Each app's matrix walks the URL configuration for its own views; this test walks it for all of them,
so a URL added by a new app (or one whose view moved) cannot slip past both matrices.
"""

from django.urls import URLPattern, URLResolver, get_resolver

from tests.portal.recordings.test_permission_matrix_recordings import EXPECTED as RECORDINGS
from tests.portal.studies.test_permission_matrix import EXPECTED as REGISTRY


def _study_url_names() -> set[str]:
    found: set[str] = set()

    def walk(resolver: URLResolver, inherited: set[str]) -> None:
        for entry in resolver.url_patterns:
            names = inherited | set(entry.pattern.regex.groupindex)
            if isinstance(entry, URLResolver):
                walk(entry, names)
            elif isinstance(entry, URLPattern) and "study_code" in names:
                found.add(entry.name)

    walk(get_resolver(), set())
    return found


def test_every_study_url_is_in_a_permission_matrix():
    covered = set(REGISTRY) | set(RECORDINGS)
    missing = sorted(_study_url_names() - covered)
    assert not missing, f"study URL(s) in no permission matrix: {missing}"
