"""The release journey in the browser, with a real worker: a coordinator asks for a release of three episodes, an
ethics officer reviews an episode in the viewer (video, timeline, plots and hands follow the playhead) and
approves, a second officer approves, the release completes and its objects verify against the signed manifest; under
the demo's redact policy the published videos have the officer's box filled."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import av
import numpy as np
import pytest
from django.core.files.storage import storages
from django_scopes import scope

from exporter.generate import generate_capture
from exporter.receipt import file_digest
from exporter.redact import FILL_YUV, fill_rect
from exporter.release import verify_release
from portal.core import storage
from portal.core.signing import public_key
from portal.faces.models import FaceDetection
from portal.recordings.demo import demo_registry
from portal.recordings.models import Episode
from portal.recordings.services.ingest import ingest_path
from portal.releases.models import ReleaseRequest

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]


def wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def verified_count(study) -> int:
    with scope(study=study):
        return Episode.objects.filter(receipt_status=Episode.Receipt.VERIFIED).count()


def faces_detected(study) -> int:
    with scope(study=study):
        return FaceDetection.objects.filter(state=FaceDetection.State.DONE).count()


def sign_out(page) -> None:
    page.click("text=Sign out")
    page.wait_for_url("**/accounts/login/")


def until(page, function: str, timeout: float = 15) -> None:
    """Wait until ``function`` (JavaScript, no arguments) returns true in the page. Polled from here: Playwright's
    own wait_for_function evaluates a string, which the portal's Content-Security-Policy rightly refuses."""
    wait_for(lambda: page.evaluate(function), timeout, function)


def frame_of(page) -> int:
    return int(page.get_attribute("#viewer", "data-frame"))


@pytest.mark.django_db(transaction=True)
def test_request_review_approve_twice_and_release(demo, pipeline_worker, page, login, shot, tmp_path):
    registry = demo_registry()
    recorded_at = datetime.now(UTC).replace(microsecond=0) - timedelta(days=1)
    with scope(study=demo):
        for seed in (1, 2, 3):
            source = generate_capture(tmp_path / f"capture-{seed}", seconds=4.0, rate_hz=15, seed=seed, width=160,
                                      height=120, retries=2, capture_id=f"release-journey-{seed}",
                                      study=registry.study_block(), recorded_at=recorded_at)
            ingest_path(registry.coordinator, demo, source)
    wait_for(lambda: verified_count(demo) == 3, 180, "three verified episodes")

    # The coordinator asks for a release of the three episodes.
    login(page, "coordinator", "ceres-demo-coordinator")
    page.goto("/studies/demo/releases/new/")
    assert page.locator("#candidates tbody input[name=episodes]").count() == 3
    page.check("#tick-all")
    page.fill("#id_purpose", "Grasp-policy training at the partner lab")
    shot(page, "release-new")
    page.click("#request-form button[type=submit]")
    page.wait_for_url("**/studies/demo/releases/1/")
    # The demo study redacts faces: the worker detects them, and the gate waits for an ethics officer's review.
    wait_for(lambda: faces_detected(demo) == 3, 300, "faces detected in the three episodes")
    sign_out(page)
    login(page, "ethics1", "ceres-demo-ethics1")
    for index in range(3):
        page.goto(f"/studies/demo/releases/1/episodes/{index}/")
        page.wait_for_selector("#faces-state")
        assert page.locator("#faces-review .attention").count() == 1  # not reviewed yet
        page.fill("#id_keyframes", "0 10 10 40 40\n20 20 20 50 50")
        page.click("#faces-add-box button[type=submit]")
        page.locator(".messages", has_text="Box added over frames 0 to 20.").wait_for()
        if index == 0:
            until(page, "() => !!document.getElementById('faces-overlay')")
            page.set_viewport_size({"width": 1280, "height": 1000})
            page.locator("#faces").scroll_into_view_if_needed()
            shot(page, "release-faces-review")
        page.click("#faces-mark-reviewed button")
        page.locator("#faces-review", has_text="Reviewed by ethics1").wait_for()
    sign_out(page)
    login(page, "coordinator", "ceres-demo-coordinator")
    page.goto("/studies/demo/releases/1/")
    page.locator("#gate h2 .status", has_text="every check passes").wait_for(timeout=120_000)
    assert page.locator("#gate tbody tr").count() == 3
    page.click("#submit-form button")
    page.locator("#state .status", has_text="Awaiting approval").wait_for()
    shot(page, "release-submitted-coordinator")
    sign_out(page)

    # The first ethics officer finds it on the dashboard, reviews an episode and approves.
    login(page, "ethics1", "ceres-demo-ethics1")
    page.click("a:has-text('Release requests awaiting your approval')")
    page.click("#requests a:has-text('release-0001')")
    assert page.locator("#gate td.check-pass").count() == 21  # seven checks each, the faces' among them
    shot(page, "release-request-ethics1")
    page.click("#gate tbody tr >> nth=0 >> a")
    page.wait_for_selector("#viewer[data-ready='1']")
    assert page.locator("#timeline .segment").count() >= 1
    assert page.locator("#timeline .retry").count() >= 1  # retries were removed from this capture
    assert page.locator("#pinch-plot canvas").count() >= 1 and page.locator("#tracking-plot canvas").count() >= 1
    until(page, "() => document.getElementById('episode-video').readyState >= 2")
    start_frame = frame_of(page)
    page.keyboard.press("Space")
    until(page, "() => document.getElementById('episode-video').currentTime > 1.0", 20)
    page.keyboard.press("Space")
    played = frame_of(page)
    assert played > start_frame + 10, (start_frame, played)
    assert float(page.evaluate("parseFloat(document.querySelector('#timeline .playhead').style.left)")) > 0
    inked = page.evaluate("""() => { const c = document.getElementById('hands');
        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        let n = 0; for (let i = 3; i < d.length; i += 4) { if (d[i]) n++; } return n; }""")
    assert inked > 200, "the hands were not drawn"
    shot(page, "release-viewer-playing")
    page.keyboard.press("ArrowRight")
    until(page, f"() => document.getElementById('viewer').dataset.frame === '{played + 1}'")
    box = page.locator("#timeline").bounding_box()
    page.mouse.click(box["x"] + box["width"] * 0.25, box["y"] + box["height"] / 2)
    quarter = int(page.get_attribute("#viewer", "data-length")) / 4
    wait_for(lambda: abs(frame_of(page) - quarter) <= 2, 15, "the timeline click to seek a quarter in")
    page.keyboard.press("n")
    page.wait_for_url("**/releases/1/episodes/*/")
    page.wait_for_selector("#viewer[data-ready='1']")
    shot(page, "release-viewer-next-episode")
    page.click("h1 small a:has-text('release-0001')")
    page.once("dialog", lambda dialog: dialog.accept())  # "Approve release-0001? ..."
    page.click("#approve-form button")
    page.locator(".messages", has_text="You approved release-0001.").wait_for()
    shot(page, "release-approved-once")
    sign_out(page)

    # The second officer approves; the worker releases it.
    login(page, "ethics2", "ceres-demo-ethics2")
    page.goto("/studies/demo/releases/1/")
    page.once("dialog", lambda dialog: dialog.accept())  # "Approve release-0001? ..."
    page.click("#approve-form button")
    page.locator(".messages", has_text="That was the last approval needed").wait_for()
    page.locator("#state .status", has_text="Released").wait_for(timeout=180_000)
    assert "Ed25519 by key" in page.locator("#signature-status").inner_text()
    shot(page, "release-released")
    page.goto("/studies/demo/releases/?state=released")
    shot(page, "releases-list-released")

    with scope(study=demo):
        release_request = ReleaseRequest.objects.select_related("release").get(number=1)
    assert release_request.release.objects_copied == release_request.release.objects_total
    folder = tmp_path / "download"
    for name in storage.walk(storages["releases"], release_request.prefix):
        storage.fetch(storages["releases"], name, folder / name[len(release_request.prefix):])
    manifest = verify_release(Path(folder), public_key())
    assert [a["officer"] for a in manifest["approvals"]] == ["ethics1", "ethics2"]
    # Under the demo's redact policy each episode is published as its derived shard: the manifest names both
    # receipts, and the box the officer added over frames 0 to 20 is filled in the released video.
    with scope(study=demo):
        items = {item.episode_index: item for item in release_request.items.all()}
    assert [entry["episode_index"] for entry in manifest["redacted_episodes"]] == sorted(items)
    for entry in manifest["redacted_episodes"]:
        item = items[entry["episode_index"]]
        assert entry["original_receipt_sha256"] == item.receipt_sha256 != entry["receipt_sha256"]
        assert entry["redaction"]["officer_added"] == 1 and entry["redaction"]["reviewed_by"] == "ethics1"
        video = next((folder / item.folder).rglob("*.mp4"))
        original = next(f["sha256"] for f in item.files if f["path"].endswith(".mp4"))
        assert file_digest(video)[0] != original
        with av.open(str(video)) as media:
            first = next(media.decode(video=0))
            luma = first.to_ndarray(format="yuv420p")[: first.height]
        x0, y0, x1, y1 = fill_rect((10, 10, 40, 40), first.width, first.height)
        assert np.abs(luma[y0:y1, x0:x1].astype(int) - FILL_YUV[0]).mean() <= 2
