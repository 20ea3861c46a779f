"""The officers' review of an episode's faces (edits, audit, who may) and the release gate's faces line under each
policy, a detector upgrade included; the viewer's faces section and the API."""

from __future__ import annotations

import hashlib

import pytest
from django.urls import reverse
from django_scopes import scope

from portal.audit.models import AuditEvent
from portal.core import storage
from portal.faces.exceptions import FacesError, FacesRefused
from portal.faces.models import FaceRemoval, FaceReview, FaceSpan
from portal.faces.services import review
from portal.releases.services import gate, release_requests
from portal.studies.services.face_policy import set_face_policy
from tests.portal.faces.conftest import DETECTOR, NEWER

pytestmark = pytest.mark.django_db


def _actions(study) -> list[str]:
    return list(AuditEvent.objects.filter(study_id=study.pk).order_by("pk").values_list("action", flat=True))


def _faces_line(request, episode=None):
    with scope(study=request.study):
        checks = [check for item in gate.evaluate(request).episodes for check in item.checks
                  if check.key == "faces" and (episode is None or item.item.episode_id == episode.pk)]
    return checks


def test_officer_edits_merge_interpolate_and_are_audited(reg, verified, policy, detector_id, store_detections):
    policy("redact")
    episode = verified(1)[0]
    store_detections(episode, {0: [(1, 1, 5, 5), (10, 10, 14, 14)], 3: [(2, 2, 6, 6)]})
    with scope(study=reg.study):
        span = review.add_span(reg.ethics, episode, [[2, 0, 0, 4, 4], [4, 4, 4, 8, 8]])
        removed = review.remove_detection(reg.ethics, episode, frame=0, index=1)
        merged = review.merged_boxes(episode)
        assert merged[0] == [(1.0, 1.0, 5.0, 5.0)]
        assert merged[2] == [(0.0, 0.0, 4.0, 4.0)]
        assert merged[3] == [(2.0, 2.0, 6.0, 6.0), (2.0, 2.0, 6.0, 6.0)]  # detected, and the added box halfway
        assert merged[4] == [(4.0, 4.0, 8.0, 8.0)]
        assert 1 not in merged and 5 not in merged
        assert removed.box == [10.0, 10.0, 14.0, 14.0]
        with pytest.raises(FacesError, match="was removed already"):
            review.remove_detection(reg.ethics, episode, frame=0, index=1)
        with pytest.raises(FacesError, match=r"frame 3 of .* has 1 detection"):
            review.remove_detection(reg.ethics, episode, frame=3, index=1)
        with pytest.raises(FacesError, match="does not come after frame 4"):
            review.add_span(reg.ethics, episode, [[4, 0, 0, 4, 4], [4, 0, 0, 4, 4]])
        with pytest.raises(FacesError, match="reaches outside the 32x24 frame"):
            review.add_span(reg.ethics, episode, [[0, 0, 0, 40, 4]])
        with pytest.raises(FacesError, match="not a frame of the episode"):
            review.add_span(reg.ethics, episode, [[episode.length, 0, 0, 4, 4]])
        reviewed = review.mark_reviewed(reg.ethics, episode)
        assert reviewed.detector_id == DETECTOR and review.reviewed(episode, DETECTOR) == reviewed
        review.remove_span(reg.ethics, span)
        assert review.reviewed(episode, DETECTOR) is None  # changed since: reviewed again
        assert 2 not in review.merged_boxes(episode)
    assert [a for a in _actions(reg.study) if a.startswith("faces.") and a != "faces.detection_queued"] == [
        "faces.detected", "faces.box_added", "faces.detection_removed", "faces.reviewed", "faces.box_span_removed"]


def test_a_coordinator_and_another_studys_officer_cannot_review(reg, verified, policy, detector_id,
                                                               store_detections, make_study, make_user):
    policy("redact")
    episode = verified(1)[0]
    store_detections(episode, {0: [(1, 1, 5, 5)]})
    outsider = make_user("faces-outsider", make_study(f"{reg.study.code}-x"), ["ethics_officer"])
    with scope(study=reg.study):
        for who in (reg.coordinator, outsider):
            with pytest.raises(FacesRefused, match="only an ethics officer"):
                review.mark_reviewed(who, episode)
            with pytest.raises(FacesRefused):
                review.add_span(who, episode, [[0, 0, 0, 4, 4]])
            with pytest.raises(FacesRefused):
                review.remove_detection(who, episode, frame=0, index=0)
        assert not FaceReview.objects.exists() and not FaceSpan.objects.exists()
        assert not FaceRemoval.objects.exists()


def test_off_has_no_faces_line(reg, verified, make_request, detector_id):
    request = make_request(verified(1))  # the registry's study: policy off
    assert request.face_policy == "off"
    assert _faces_line(request) == []
    assert request.state == request.State.AWAITING_APPROVAL


def test_detect_needs_detections(reg, verified, make_request, policy, detector_id, store_detections):
    policy("detect")
    episode = verified(1)[0]
    request = make_request([episode], submit=False)
    [line] = _faces_line(request)
    assert line.status == gate.FAIL and "queued" in line.detail
    with scope(study=reg.study), pytest.raises(Exception, match="bystanders' faces detected and reviewed"):
        release_requests.submit(reg.coordinator, request)
    store_detections(episode, {0: [(1, 1, 5, 5)]})
    [line] = _faces_line(request)
    assert line.status == gate.PASS and line.detail.startswith("policy detect: 1 box(es)")


def test_redact_needs_an_officers_review_of_the_current_detectors_detections(reg, verified, make_request, policy,
                                                                              detector_id, store_detections):
    policy("redact")
    episode = verified(1)[0]
    request = make_request([episode], submit=False)
    store_detections(episode, {0: [(1, 1, 5, 5)]})
    [line] = _faces_line(request)
    assert line.status == gate.FAIL and "not reviewed by an ethics officer" in line.detail
    with scope(study=reg.study):
        review.mark_reviewed(reg.ethics, episode)
    [line] = _faces_line(request)
    assert line.status == gate.PASS and f"reviewed by {reg.ethics}" in line.detail
    # A change of the study's policy after the request does not move it: the request keeps "redact".
    set_face_policy(reg.ethics, reg.study, "off")
    assert _faces_line(request)[0].status == gate.PASS
    with scope(study=reg.study):
        release_requests.submit(reg.coordinator, request)


def test_a_detector_upgrade_asks_for_new_detections_and_a_new_review(reg, verified, make_request, policy,
                                                                      detector_id, store_detections):
    policy("redact")
    episode = verified(1)[0]
    store_detections(episode, {0: [(1, 1, 5, 5)]})
    with scope(study=reg.study):
        review.mark_reviewed(reg.ethics, episode)
    request = make_request([episode], submit=False)
    assert _faces_line(request)[0].status == gate.PASS
    detector_id(NEWER)
    [line] = _faces_line(request)
    assert line.status == gate.FAIL and f"detections of the older {DETECTOR} do not count" in line.detail
    store_detections(episode, {0: [(1, 1, 5, 5)]}, detector=NEWER)
    [line] = _faces_line(request)
    assert line.status == gate.FAIL and "not reviewed" in line.detail  # the older review does not count either
    with scope(study=reg.study):
        review.mark_reviewed(reg.ethics, episode)
        assert FaceReview.objects.filter(episode=episode).count() == 2
    assert _faces_line(request)[0].status == gate.PASS


def test_the_viewer_shows_the_faces_and_an_officer_reviews_there(client, reg, verified, make_request, policy,
                                                                 detector_id, store_detections):
    policy("redact")
    episode = verified(1)[0]
    store_detections(episode, {0: [(1, 1, 5, 5)], 1: [(1, 1, 5, 5)], 5: [(2, 2, 9, 9)]})
    request = make_request([episode], submit=False)
    args = [reg.study.code, request.number, episode.episode_index]
    client.force_login(reg.coordinator)
    page = client.get(reverse("release-episode", args=args)).content.decode()
    assert 'id="faces"' in page and "frames 0 to 1" in page and "frames 5 to 5" in page
    assert 'id="faces-mark-reviewed"' not in page and "releases/faces.js" in page
    client.force_login(reg.ethics)
    assert 'id="faces-mark-reviewed"' in client.get(reverse("release-episode", args=args)).content.decode()
    client.post(reverse("release-episode-faces-add-box", args=args), {"keyframes": "2 0 0 4 4\n4 4 4 8 8"})
    client.post(reverse("release-episode-faces-remove-detection", args=args), {"frame": "5", "index": "0"})
    client.post(reverse("release-episode-faces-reviewed", args=args))
    data = client.get(reverse("release-episode-faces", args=args)).json()
    assert data["ranges"] == [[0, 4]] and data["removed"] == 1 and data["review"]["reviewed_by"] == str(reg.ethics)
    assert [d["removed"] for d in data["detections"]] == [False, False, True]
    response = client.post(reverse("release-episode-faces-add-box", args=args), {"keyframes": "2 0 0"},
                           follow=True)
    assert "line 1: expected 5 numbers" in response.content.decode()


def test_the_api_reads_and_edits_through_the_services(client, reg, verified, policy, detector_id, store_detections):
    policy("redact")
    episode = verified(1)[0]
    store_detections(episode, {0: [(1, 1, 5, 5)]})
    url = f"/api/studies/{reg.study.code}/faces/{episode.episode_index}/"
    client.force_login(reg.coordinator)
    assert client.get(url).json()["detection"]["box_count"] == 1
    assert client.post(url + "reviewed/").status_code == 403
    client.force_login(reg.ethics)
    answer = client.post(url + "add-box/", {"keyframes": [[0, 1, 1, 3, 3]]}, content_type="application/json")
    assert answer.status_code == 200 and len(answer.json()["spans"]) == 1
    bad = client.post(url + "add-box/", {"keyframes": [[0, 3, 1, 1, 3]]}, content_type="application/json")
    assert bad.status_code == 400 and "x0 < x1" in bad.content.decode()
    assert client.post(url + "remove-detection/", {"frame": 0, "index": 0},
                       content_type="application/json").json()["removed"] == 1
    assert client.post(url + "reviewed/").json()["review"]["detector_id"] == DETECTOR
    with scope(study=reg.study):
        stored = review.current_detection(episode)
    assert hashlib.sha256(storage.shards().open(stored.key, "rb").read()).hexdigest() == stored.sha256
