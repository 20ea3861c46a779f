"""Every URL of the configuration is in exactly one permission matrix.

The walk takes every pattern, whatever its arguments or its name (a study URL whose argument is ``code``,
a pattern without a name, the admin's), so a URL added anywhere cannot slip past: it fails here until
someone decides who may use it. The matrices: the registry's, the recordings', the faces API's, the accounts'
study pages, the researcher access pages, the audit log's, the alerts and fixity pages, the site's own pages and
API, and the admin (every admin URL, walked).
``EXEMPT`` would hold a URL that no matrix can ask, with the reason; it is checked to be exact.
"""

from tests.portal.accounts.test_permission_matrix_accounts import EXPECTED as ACCOUNTS
from tests.portal.audit.test_permission_matrix_audit import EXPECTED as AUDIT
from tests.portal.faces.test_permission_matrix_faces import EXPECTED as FACES
from tests.portal.fixity.test_permission_matrix_fixity import EXPECTED as FIXITY
from tests.portal.recordings.test_permission_matrix_recordings import EXPECTED as RECORDINGS
from tests.portal.releases.test_permission_matrix_releases import EXPECTED as RELEASES
from tests.portal.research.test_permission_matrix_research import EXPECTED as RESEARCH
from tests.portal.studies.test_permission_matrix import EXPECTED as REGISTRY
from tests.portal.test_site_permissions import ADMIN, SITE
from tests.portal.urlwalk import all_routes

# URL key -> why no matrix asks it. Empty: every URL has an expectation.
EXEMPT: dict[str, str] = {}


def test_every_url_is_in_exactly_one_permission_matrix():
    matrices = {"registry": set(REGISTRY), "recordings": set(RECORDINGS), "accounts": set(ACCOUNTS),
                "releases": set(RELEASES), "faces": set(FACES),
                "research": set(RESEARCH), "audit": set(AUDIT), "fixity": set(FIXITY),
                "site": set(SITE), "admin": set(ADMIN), "exempt": set(EXEMPT)}
    keys = {route.key for route in all_routes()}
    missing = sorted(key for key in keys if not any(key in covered for covered in matrices.values()))
    assert not missing, f"URL(s) in no permission matrix: {missing}"
    twice = sorted(key for key in keys if sum(key in covered for covered in matrices.values()) > 1)
    assert not twice, f"URL(s) in more than one matrix (or exempt and covered): {twice}"
    stale = {name: sorted(covered - keys) for name, covered in matrices.items() if covered - keys}
    assert not stale, f"matrix entries for URLs that no longer exist: {stale}"


def test_the_walk_finds_what_a_name_based_walk_missed():
    keys = {route.key for route in all_routes()}
    assert {"api-study-list", "api-study-detail", "api-root", "api-schema", "api-docs", "favicon.ico", "healthz",
            "login", "logout", "admin:index", "admin:login"} <= keys
