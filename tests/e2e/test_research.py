"""The researcher's journey in the browser, with a real worker: someone without a role asks for access and
accepts the data-use agreement, a coordinator grants it, the new researcher browses the released episodes,
opens one in the read-only viewer, downloads a file through a signed link and the whole release as one ZIP
(which ``verify-release`` accepts once unzipped), and builds a one-dataset download,
watching its progress (the worker is held at one object so the progress is seen for certain)."""

from __future__ import annotations

import zipfile
from datetime import UTC, datetime, timedelta

import pytest
from django.core.files.storage import storages
from django_scopes import scope

from exporter.cli import main as exporter_main
from exporter.generate import generate_capture
from portal.core import signing
from portal.recordings.demo import demo_registry
from portal.recordings.services.ingest import ingest_path
from portal.releases.models import ReleaseRequest
from portal.releases.services import gate, release_requests
from portal.releases.services.approval import approve
from portal.research.models import Dataset
from portal.studies.services.consent import give_consent
from portal.studies.services.demonstrators import create_demonstrator
from portal.studies.services.face_policy import set_face_policy
from tests.e2e.test_releases import sign_out, until, verified_count, wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]


def released_in_the_background(demo, registry, pipeline_worker, tmp_path, blocks=None) -> ReleaseRequest:
    """Three episodes exported, verified and released by the worker (the release journey has its own test);
    ``blocks``: each capture's study block (the demo demonstrator's by default)."""
    recorded_at = datetime.now(UTC).replace(microsecond=0) - timedelta(days=1)
    blocks = blocks or [registry.study_block()] * 3
    from django.contrib.auth import get_user_model

    # Faces are not the point here (test_releases reviews them): an ethics officer turns the policy off first.
    set_face_policy(get_user_model().objects.get(username="ethics1"), demo, "off")
    with scope(study=demo):
        for seed, block in enumerate(blocks, start=1):
            source = generate_capture(tmp_path / f"capture-{seed}", seconds=3.0, rate_hz=15, seed=seed, width=160,
                                      height=120, capture_id=f"research-journey-{seed}",
                                      study=block, recorded_at=recorded_at)
            ingest_path(registry.coordinator, demo, source)
    wait_for(lambda: verified_count(demo) == 3, 180, "three verified episodes")
    users = get_user_model().objects
    with scope(study=demo):
        request = release_requests.create_request(registry.coordinator, demo, episodes=list(
            release_requests.releasable_episodes().order_by("episode_index")), purpose="Grasp-policy training")
        gate.inspect_request(request)
        release_requests.submit(registry.coordinator, request)
        for officer in ("ethics1", "ethics2"):
            approve(users.get(username=officer), request, manifest_sha256=request.manifest_sha256)
    final = wait_for(lambda: state_of(request) in (ReleaseRequest.State.RELEASED, ReleaseRequest.State.FAILED),
                     180, "the release")
    with scope(study=demo):
        assert state_of(request) == ReleaseRequest.State.RELEASED, ReleaseRequest.objects.get(pk=request.pk).reason
    assert final
    return request


def state_of(request) -> str:
    with scope(study=request.study):
        return ReleaseRequest.objects.get(pk=request.pk).state


@pytest.mark.django_db(transaction=True)
def test_ask_be_granted_browse_view_download_and_build_one_dataset(demo, pipeline_worker, page, login, shot,
                                                                    tmp_path):
    released = released_in_the_background(demo, demo_registry(), pipeline_worker, tmp_path)

    # Someone without a role asks for access, accepting the agreement shown.
    login(page, "applicant", "ceres-demo-applicant")
    page.click("nav >> text=Data access")
    shot(page, "research-home-before")
    page.click("#ask a:has-text('Demo')")
    assert "data-use agreement" in page.locator("#agreement").inner_text().lower()
    page.fill("#id_purpose", "Training a grasping policy for the lab's arm")
    page.check("#id_accept")
    shot(page, "research-ask")
    page.click("form button[type=submit]:has-text('Ask for access')")
    page.locator(".messages", has_text="Your request for access").wait_for()
    assert page.locator("#access-requests tr[data-state=pending]").count() == 1
    sign_out(page)

    # A coordinator grants it from the dashboard.
    login(page, "coordinator", "ceres-demo-coordinator")
    page.click("a:has-text('Access requests waiting for a decision')")
    row = page.locator("#access-requests tr[data-researcher=applicant]")
    shot(page, "research-access-requests")
    row.locator("button:has-text('Grant')").click()
    page.locator(".messages", has_text="Access of applicant granted").wait_for()
    sign_out(page)

    # The researcher browses, views an episode read-only, downloads a file.
    login(page, "applicant", "ceres-demo-applicant")
    page.click("a:has-text('Released episodes you can browse')")
    assert page.locator("#released tbody input[name=items]").count() == 3
    shot(page, "research-browse")
    page.click("#released tbody tr[data-episode='1'] a:has-text('view')")
    page.wait_for_selector("#viewer[data-ready='1']")
    until(page, "() => document.getElementById('episode-video').readyState >= 2")
    assert page.locator("#episode-gate").count() == 0 and page.locator("#pinch-plot canvas").count() >= 1
    shot(page, "research-viewer")
    page.click("h1 small a:has-text('release-0001')")
    shot(page, "research-release")
    # Copy-ready commands with the release's id filled in, each with a Copy button (the static copy.js).
    assert "--release demo/release-0001 demo-release-0001" in page.inner_text("#pull pre[data-step=pull]")
    copy = page.locator("#pull pre[data-step=pull] + button.copy")
    copy.click()
    # The clipboard answers asynchronously and the label returns to "Copy" after 2 s: wait for what it did.
    page.wait_for_selector("#pull pre[data-step=pull] + button.copy[data-done]")
    assert copy.get_attribute("data-done") in ("copied", "selected")
    path = "episode-000001/meta/info.json"
    page.click("#episodes tr[data-episode='1'] summary")  # its files, folded away
    with page.expect_download() as download:
        page.click(f"#episodes form:has(input[value='{path}']) button")
    with open(download.value.path(), "rb") as got:
        assert got.read() == storages["releases"].open(f"{released.prefix}{path}").read()
    # The whole release as one ZIP: unzipped, verify-release accepts it.
    with page.expect_download() as download:
        page.click("#zip-download button")
    assert download.value.suggested_filename == "demo-release-0001.zip"
    zipped = tmp_path / "demo-release-0001.zip"
    download.value.save_as(zipped)
    with zipfile.ZipFile(zipped) as archive:
        archive.extractall(tmp_path / "unzipped")
    key = tmp_path / "ceres-release-key.pem"
    key.write_text(signing.public_key_pem())
    assert exporter_main(["verify-release", str(tmp_path / "unzipped" / "demo-release-0001"), "--public-key",
                          str(key)]) == 0

    # One dataset from episodes 0 and 2: the worker is held before one object, so the progress shows.
    pipeline_worker.kill()
    barrier = pipeline_worker.pause_before("dataset-0001/meta/stats.json")
    pipeline_worker.start()
    page.click("nav.subnav a:has-text('Released episodes')")
    page.check("#item-1-0")
    page.check("#item-1-2")
    page.click("#dataset-form button[type=submit]")
    page.wait_for_url("**/studies/demo/datasets/1/")
    wait_for(barrier.paused, 120, "the build to reach its uploads")
    page.locator("#phase", has_text="uploading").wait_for(timeout=15_000)
    assert int(page.inner_text("#done")) < int(page.inner_text("#total"))
    shot(page, "research-dataset-building")
    barrier.release()
    page.locator("#state h2", has_text="Ready").wait_for(timeout=120_000)
    shot(page, "research-dataset-ready")
    with scope(study=demo):
        dataset = Dataset.objects.get(number=1)
    assert dataset.state == Dataset.State.READY and dataset.episode_count == 2
    page.click("nav >> text=Data access")
    assert page.locator("#my-datasets", has_text="demo/dataset-0001").count() == 1
    assert page.locator("#recent-links", has_text=path).count() == 1
    shot(page, "research-home-after")


@pytest.mark.django_db(transaction=True)
def test_a_withdrawal_and_its_reach_report(demo, pipeline_worker, page, login, shot, tmp_path):
    """The coordinator records a withdrawal on the demonstrator's page and watches the worker's reach report
    complete: the release is superseded (all its episodes were this person's, so nothing supersedes it), and an
    ethics officer's dashboard still counts it as published and shows the withdrawal and its reach."""
    registry = demo_registry()
    released = released_in_the_background(demo, registry, pipeline_worker, tmp_path)
    login(page, "coordinator", "ceres-demo-coordinator")
    page.goto(f"/studies/demo/demonstrators/{registry.demonstrator.pk}/")
    page.fill("#withdraw-consent textarea[name=reason]", "The participant asked us to.")
    page.once("dialog", lambda dialog: dialog.accept())  # "Record the withdrawal of ...?"
    page.click("#withdraw-consent button[type=submit]")
    page.wait_for_url("**/studies/demo/withdrawals/*/")
    page.locator(".messages", has_text="no more links are issued").wait_for()
    shot(page, "withdrawal-started")
    page.locator("#state h2", has_text="Done").wait_for(timeout=120_000)
    assert page.locator("#reach", has_text="release-0001 (3 episode(s))").count() == 1
    assert page.locator("#tombstones", has_text="release-0002").count() == 0  # all three were this person's
    shot(page, "withdrawal-reach")
    assert state_of(released) == ReleaseRequest.State.SUPERSEDED
    page.goto("/studies/demo/releases/1/")
    page.locator("#state .status", has_text="Superseded").wait_for()
    shot(page, "release-superseded")
    sign_out(page)
    login(page, "ethics1", "ceres-demo-ethics1")
    panel = page.locator('[data-role="ethics_officer"]')
    published = panel.locator("li", has_text="Releases published (1 since superseded after a withdrawal)")
    assert published.locator(".count").inner_text() == "1"
    reach = panel.locator("li", has_text="Consent withdrawals (reach: 3 episode(s), 1 release(s) superseded")
    assert reach.locator(".count").inner_text() == "1"
    shot(page, "dashboard-after-withdrawal")


@pytest.mark.django_db(transaction=True)
def test_after_a_withdrawal_a_researcher_keeps_the_other_episodes_and_old_bookmarks_lead_to_them(
        demo, pipeline_worker, page, login, shot, tmp_path):
    """Two of three released episodes are the demo demonstrator's, one another's. The demo demonstrator withdraws:
    the superseding release carries the approvals and the worker publishes it with no officer approving again;
    the researcher's old bookmark to the other episode leads to it in the new release; the new release's page says
    the withdrawal made it."""
    registry = demo_registry()
    with scope(study=demo):
        other = create_demonstrator(registry.coordinator, demo, headset=registry.headset)
        give_consent(registry.coordinator, other, document=registry.consent.document,
                     consent_date=registry.consent.event_date, scopes=["episode_release"])
    blocks = [registry.study_block(), registry.study_block(demonstrator_id=other.designator), registry.study_block()]
    released = released_in_the_background(demo, registry, pipeline_worker, tmp_path, blocks)
    with scope(study=demo):
        kept = released.items.get(episode__recording__demonstrator=other).episode_index

    login(page, "coordinator", "ceres-demo-coordinator")
    page.goto(f"/studies/demo/demonstrators/{registry.demonstrator.pk}/")
    page.fill("#withdraw-consent textarea[name=reason]", "The participant asked us to.")
    page.once("dialog", lambda dialog: dialog.accept())  # "Record the withdrawal of ...?"
    page.click("#withdraw-consent button[type=submit]")
    page.wait_for_url("**/studies/demo/withdrawals/*/")
    page.locator("#state h2", has_text="Done").wait_for(timeout=120_000)
    with scope(study=demo):
        successor = ReleaseRequest.objects.get(supersedes=released)
    wait_for(lambda: state_of(successor) in (ReleaseRequest.State.RELEASED, ReleaseRequest.State.FAILED), 180,
             "the superseding release")
    with scope(study=demo):
        assert state_of(successor) == ReleaseRequest.State.RELEASED, ReleaseRequest.objects.get(
            pk=successor.pk).reason
    shot(page, "withdrawal-done-with-successor")
    sign_out(page)

    login(page, "researcher", "ceres-demo-researcher")
    page.goto(f"/studies/demo/released/{released.number}/episodes/{kept}/")
    page.wait_for_url(f"**/studies/demo/released/{successor.number}/episodes/{kept}/")
    shot(page, "old-bookmark-leads-to-the-new-release")
    page.goto(f"/studies/demo/released/{released.number}/")
    page.wait_for_url(f"**/studies/demo/released/{successor.number}/")
    sign_out(page)

    login(page, "ethics1", "ceres-demo-ethics1")
    page.goto(f"/studies/demo/releases/{successor.number}/")
    made_by = page.locator("#made-by").inner_text()
    assert "Made by withdrawal" in made_by and "not requested by anyone" in made_by
    assert "carrying its 2 approvals" in made_by
    shot(page, "release-made-by-withdrawal")
