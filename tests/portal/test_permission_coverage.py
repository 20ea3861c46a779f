"""Every study URL of every app is in some app's permission matrix.

Each app's matrix walks the URL configuration for its own views; this test walks it for all of them,
so a URL added by a new app (or one whose view moved) cannot slip past both matrices.
"""

from tests.portal.accounts.test_permission_matrix_accounts import EXPECTED as ACCOUNTS
from tests.portal.recordings.test_permission_matrix_recordings import EXPECTED as RECORDINGS
from tests.portal.releases.test_permission_matrix_releases import EXPECTED as RELEASES
from tests.portal.studies.test_permission_matrix import EXPECTED as REGISTRY
from tests.portal.urlwalk import study_url_patterns


def test_every_study_url_is_in_a_permission_matrix():
    covered = set(REGISTRY) | set(RECORDINGS) | set(ACCOUNTS) | set(RELEASES)
    missing = sorted(set(study_url_patterns()) - covered)
    assert not missing, f"study URL(s) in no permission matrix: {missing}"
