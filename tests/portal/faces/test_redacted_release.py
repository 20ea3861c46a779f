"""Redacted release shards: under ``redact`` the release publishes, for each episode, a derived shard whose video
has every reviewed box filled, never the original video; the manifest names both receipts; verify-release, the
one-dataset download, fixity and withdrawal treat the derived shard like any released object. Under ``detect``
the original is released unchanged."""

from __future__ import annotations

import hashlib
import json
from io import BytesIO
from pathlib import Path

import av
import numpy as np
import pytest
from django.core.files.storage import storages
from django.utils import timezone
from django_scopes import scope, scopes_disabled

from exporter import generate
from exporter.faces.detector import detect_video
from exporter.faces.testset import face_patch, face_sources
from exporter.receipt import RECEIPT, file_digest
from exporter.redact import FILL_YUV, REDACTION, fill_rect
from exporter.release import MANIFEST, verify_release
from portal.core import storage
from portal.core.signing import signing_key
from portal.faces.models import FaceDetection, FaceRemoval, FaceReview, FaceSpan
from portal.faces.services import detection, review
from portal.fixity.models import Alert
from portal.fixity.services import runs
from portal.releases.models import ReleaseRequest
from portal.releases.services import publish, redacted
from portal.releases.services.approval import approve
from tests.portal.fixity.conftest import local_folders  # noqa: F401 (a fixture: storages of the test's own)
from tests.portal.research import conftest as research
from tests.portal.research.lerobot_kept import keep_for_lerobot

agreement, make_researcher = research.agreement, research.make_researcher  # the research fixtures, shared
pytestmark = pytest.mark.django_db
State = ReleaseRequest.State
AT, SIZE = (120, 90), 80  # where the pasted face's patch goes in the luma plane (x, y), and the face's height


@pytest.fixture
def face_video(monkeypatch):
    """Captures generated from now on show a bystander's face (a photograph bundled with scikit-image, pasted in
    grey into the camera's luma plane, below the frame-code band); returns the face's box."""
    patch = face_patch(face_sources()[0], SIZE, angle=0.0, blur=0.0, brightness=1.0)
    grey = (patch.rgb.astype(np.float32) @ np.array([0.299, 0.587, 0.114], np.float32))
    alpha = patch.alpha.astype(np.float32)
    if alpha.max() > 1:
        alpha = alpha / 255.0
    original = generate.CameraPictures.picture

    def picture(self, index: int) -> np.ndarray:
        planes = original(self, index)
        h, w = grey.shape
        x0, y0 = AT
        luma = planes[: self.height]
        region = luma[y0:y0 + h, x0:x0 + w].astype(np.float32)
        luma[y0:y0 + h, x0:x0 + w] = (grey * alpha + region * (1 - alpha)).clip(0, 255).astype(np.uint8)
        chroma = planes[self.height:].reshape(2, self.height // 2, self.width // 2)
        chroma[:, y0 // 2:(y0 + h) // 2, x0 // 2:(x0 + w) // 2] = 128
        return planes

    monkeypatch.setattr(generate.CameraPictures, "picture", picture)
    x0, y0, x1, y1 = patch.box
    return (AT[0] + x0, AT[1] + y0, AT[0] + x1, AT[1] + y1)


def _publish(request: ReleaseRequest, team) -> ReleaseRequest:
    with scope(study=team.study):
        for officer in (team.reg.ethics, team.ethics2):
            approve(officer, request, manifest_sha256=request.manifest_sha256)
        publish.publish_release(request.pk)
        return ReleaseRequest.objects.select_related("release").get(pk=request.pk)


def _download(prefix: str, folder: Path) -> Path:
    releases = storages["releases"]
    for name in storage.walk(releases, prefix):
        storage.fetch(releases, name, folder / name[len(prefix):])
    return folder


def _video(folder: Path) -> Path:
    return next(folder.rglob("*.mp4"))


def _luma(path: Path) -> list[np.ndarray]:
    with av.open(str(path)) as media:
        return [frame.to_ndarray(format="yuv420p")[: frame.height] for frame in media.decode(video=0)]


def _overlaps(a, b) -> bool:
    return min(a[2], b[2]) > max(a[0], b[0]) and min(a[3], b[3]) > max(a[1], b[1])


def test_a_redact_release_publishes_the_derived_shard_and_the_face_cannot_be_found_again(
        reg, team, verified, make_request, policy, face_video, tmp_path):
    policy("redact")
    episode = verified(1, seconds=1.0, width=320, height=240)[0]
    with scope(study=reg.study):
        job = FaceDetection.objects.get(episode=episode)
        done = detection.run_detection(job.pk)  # the real detector, as the heavy queue runs it
        assert done.state == FaceDetection.State.DONE, done.reason
        found = review.detected_boxes(review.load(done))
        assert found, "the detector found the pasted face"
        assert all(_overlaps(box, face_video) for boxes in found.values() for box, _ in boxes)
        # The officer adds a box over a missed face (a span over the first frames) and reviews.
        review.add_span(reg.ethics, episode, [[0, 10, 150, 60, 200], [4, 20, 150, 70, 200]])
        review.mark_reviewed(reg.ethics, episode)
        merged = review.merged_boxes(episode)
        request = make_request([episode])
    assert request.face_policy == "redact"
    released = _publish(request, team)
    assert released.state == State.RELEASED, released.reason
    with scope(study=reg.study):
        item = released.items.get()

    folder = _download(released.prefix, tmp_path / "release")
    manifest = verify_release(folder, signing_key().public_key())  # every file, the derived receipt included
    [entry] = manifest["redacted_episodes"]
    shard = folder / item.folder
    assert entry["original_receipt_sha256"] == item.receipt_sha256 == manifest["release"]["episodes"][0][
        "receipt_sha256"]
    assert entry["receipt_sha256"] == file_digest(shard / RECEIPT)[0] != item.receipt_sha256
    original_video = next(f for f in item.files if f["path"].endswith(".mp4"))
    assert entry["redaction"]["source_video_sha256"] == original_video["sha256"]
    assert entry["redaction"]["reviewed_by"] == reg.ethics.username and entry["redaction"]["officer_added"] == 1
    record = json.loads((shard / REDACTION).read_bytes())
    assert record["detector_id"] == detection.current_detector_id() and record["weights_sha256"]
    assert record["officer_added"][0]["added_by"] == reg.ethics.username
    assert json.loads((shard / "ceres/episode-metadata.json").read_bytes())["video"]["redaction"] == REDACTION

    # The original video never reached the releases storage.
    releases = storages["releases"]
    for name in storage.walk(releases, released.prefix):
        assert storage.digest(releases, name)[0] != original_video["sha256"], name

    # Inside every margined box the released pixels are the fill.
    frames = _luma(_video(shard))
    assert len(frames) == episode.length
    height, width = frames[0].shape
    for index, boxes in merged.items():
        for box in boxes:
            x0, y0, x1, y1 = fill_rect(box, width, height)
            # The encoder rings a little at the rectangle's edge; inside it, the fill within a few levels.
            inside = np.abs(frames[index][y0:y1, x0:x1].astype(int) - FILL_YUV[0])
            assert inside.mean() <= 2 and inside[2:-2, 2:-2].max() <= 12, (index, box, inside.max())

    # The redaction cannot be undone from the released bytes: no face where a box was.
    again = detect_video(_video(shard))
    for frame, box in zip(again.frames.tolist(), again.boxes.tolist(), strict=True):
        assert not any(_overlaps(box, was) for was in merged.get(frame, [])), (frame, box)

    # The derived shard stays in the shards storage, keyed by release and episode; a re-run reuses it.
    prefix = redacted.derived_prefix(released, item)
    assert storage.shards().exists(prefix + RECEIPT)
    with scope(study=reg.study):
        assert redacted.derive(released, item)["receipt_sha256"] == entry["receipt_sha256"]


@pytest.fixture
def reviewed(reg, verified, store_detections):
    """``reviewed(count, every_frame=False)``: verified episodes, each with a stored detection (a box on its first
    frame, or on every frame) that an ethics officer has reviewed."""
    def make(count: int, *, every_frame: bool = False):
        episodes = verified(count)
        for episode in episodes:
            frames = range(episode.length) if every_frame else [0]
            store_detections(episode, {frame: [(4, 4, 14, 14)] for frame in frames})
            with scope(study=reg.study):
                review.mark_reviewed(reg.ethics, episode)
        return episodes
    return make


@pytest.fixture
def boxed(reg, team, verified, make_request, policy, detector_id, store_detections):
    """A redact release of one episode with a stored detection (box chosen here), reviewed, approved, published."""
    policy("redact")
    episode = verified(1)[0]
    store_detections(episode, {frame: [(4, 4, 14, 14)] for frame in range(episode.length)})
    with scope(study=reg.study):
        review.mark_reviewed(reg.ethics, episode)
    released = _publish(make_request([episode]), team)
    assert released.state == State.RELEASED, released.reason
    return released


def test_the_release_job_shows_which_episode_it_redacts_and_keeps_its_lease_while_it_does(
        reviewed, reg, team, verified, make_request, policy, detector_id, store_detections, monkeypatch):
    policy("redact")
    episodes = reviewed(2, every_frame=True)
    request = make_request(episodes)
    monkeypatch.setattr(publish, "HEARTBEAT_SECONDS", 0)  # every frame's progress written, to see them all
    written = []
    renew = publish.leases.renew

    def renew_and_keep(job, **progress):  # the real heartbeat; what it wrote read back from the row
        renew(job, **progress)
        row = type(job).objects.get(pk=job.pk)
        written.append((row.progress_note, row.lease_until))

    monkeypatch.setattr(publish.leases, "renew", renew_and_keep)
    released = _publish(request, team)
    assert released.state == State.RELEASED, released.reason
    with scope(study=reg.study):
        items = [(item.folder, item.episode.length) for item in released.items.select_related("episode")]
    notes = [note for note, _ in written if note]
    starts = []
    for number, (folder, length) in enumerate(items, start=1):
        doing = f"redacting {folder} ({number} of 2)"
        starts.append(notes.index(doing))
        frames = [note for note in notes if note.startswith(doing + ": frame ")]
        # every frame is boxed, so every frame is re-encoded and reported, in order, up to the last
        assert frames == [f"{doing}: frame {frame} of {length}" for frame in range(1, length + 1)]
    assert starts == sorted(starts)
    # each write renewed the lease, never moving it back; the note is cleared once the copies start
    leases = [until for _, until in written]
    assert all(until is not None for until in leases) and leases == sorted(leases)
    assert written[-1][0] == "" and released.release.progress_note == ""


def test_detect_releases_the_original_unchanged(reg, team, verified, make_request, policy, detector_id,
                                                store_detections, tmp_path):
    policy("detect")
    episode = verified(1)[0]
    store_detections(episode, {0: [(4, 4, 14, 14)]})
    released = _publish(make_request([episode]), team)
    assert released.state == State.RELEASED, released.reason
    folder = _download(released.prefix, tmp_path / "release")
    manifest = verify_release(folder, signing_key().public_key())
    assert "redacted_episodes" not in manifest
    with scope(study=reg.study):
        item = released.items.get()
    assert not (folder / item.folder / REDACTION).exists()
    for entry in item.files:
        assert file_digest(folder / item.folder / entry["path"]) == (entry["sha256"], entry["bytes"])
    assert not storage.walk(storage.shards(), redacted.derived_prefix(released, item))


def test_a_redact_release_that_would_publish_the_original_video_fails(
        reviewed, reg, team, make_request, policy, detector_id, monkeypatch):
    policy("redact")
    [episode] = reviewed(1)
    real = redacted.derive

    def leaky(release, item, progress=None):  # a derived shard listing the original's files: the scan refuses it
        made = real(release, item, progress)
        return {**made, "prefix": item.episode.prefix, "files": item.files}

    monkeypatch.setattr(redacted, "derive", leaky)
    released = _publish(make_request([episode]), team)
    assert released.state == State.FAILED and "original video with bystanders' faces" in released.reason
    assert not storage.walk(storages["releases"], released.prefix)


def test_verify_release_checks_the_derived_receipt_and_old_manifests_still_verify(boxed, tmp_path):
    folder = _download(boxed.prefix, tmp_path / "release")
    manifest = json.loads((folder / MANIFEST).read_bytes())
    assert manifest["redacted_episodes"][0]["files"][0]["path"].startswith("episode-")
    # A released redacted video altered after publication fails verification.
    video = _video(folder)
    video.write_bytes(video.read_bytes()[:-1] + b"\0")
    with pytest.raises(Exception, match=r"SHA-256|bytes"):
        verify_release(folder, signing_key().public_key())


def test_fixity_passes_on_a_redact_release_and_fails_when_a_derived_object_is_altered(reg, boxed):
    def problems(run) -> list[str]:
        with scopes_disabled():
            return list(run.problems.filter(object_name__startswith=boxed.prefix).values_list("object_name",
                                                                                              flat=True))

    assert problems(runs.run_fixity("test", full=True, studies=[reg.study])) == []
    releases = storages["releases"]
    name = next(n for n in storage.walk(releases, boxed.prefix) if n.endswith(REDACTION))
    releases.delete(name)
    storage.put(releases, name, BytesIO(b"{}"))
    assert problems(runs.run_fixity("test", full=True, studies=[reg.study])) == [name]


@pytest.mark.usefixtures("local_folders")  # a whole-store run: on storages of the test's own
def test_the_shards_storage_accounts_for_the_derived_shards(reg, boxed):
    with scope(study=reg.study):
        prefix = redacted.derived_prefix(boxed, boxed.items.get())
    with scopes_disabled():  # a whole-store pass
        run = runs.run_fixity("test", full=True)
        assert not run.problems.filter(object_name__startswith=f"{redacted.PREFIX}{boxed.uid}/").exists()
    shards = storage.shards()
    storage.put(shards, prefix + "planted.bin", BytesIO(b"x"))
    with scopes_disabled():
        run = runs.run_fixity("test", full=True)
        assert run.problems.filter(object_name=prefix + "planted.bin").exists()


def _forge_original(entries):
    entries[0]["original_receipt_sha256"] = "0" * 64


def _forge_twice(entries):
    entries.append(dict(entries[0]))


def _forge_folder(entries):
    entries[0]["files"][0]["path"] = "episode-000009/" + entries[0]["files"][0]["path"].split("/", 1)[1]


def _forge_episode(entries):
    entries[0]["episode_index"] = 9


@pytest.mark.parametrize(("forge", "problem"), [
    (_forge_original, "original_receipt_sha256 is not the approved receipt"),
    (_forge_twice, "not an episode of the release named once"),
    (_forge_episode, "not an episode of the release named once"),
    (_forge_folder, "is not in its folder episode-000000/"),
], ids=["original-receipt", "twice", "other-episode", "other-folder"])
def test_a_forged_redacted_entry_is_refused_by_the_reader(boxed, tmp_path, forge, problem):
    """Signed by the key, and still refused: a reader does not trust the manifest's shape."""
    from exporter.release import json_bytes, sign

    folder = _download(boxed.prefix, tmp_path / "release")
    manifest = json.loads((folder / MANIFEST).read_bytes())
    forge(manifest["redacted_episodes"])
    data = json_bytes(manifest)
    (folder / MANIFEST).write_bytes(data)
    (folder / "release-manifest.json.sig").write_bytes(sign(signing_key(), data))
    with pytest.raises(Exception, match=problem):
        verify_release(folder, signing_key().public_key())


def test_a_withdrawal_of_a_redacted_episode_removes_its_derived_objects(reg, boxed, django_capture_on_commit_callbacks,
                                                                       sent_tasks):
    with scope(study=reg.study):
        item = boxed.items.get()
    derived = redacted.derived_prefix(boxed, item)
    released = f"{boxed.prefix}{item.folder}/"
    assert storage.walk(storage.shards(), derived) and storage.walk(storages["releases"], released)
    assert research.run(research.withdraw(reg, django_capture_on_commit_callbacks, sent_tasks)).state == "done"
    assert storage.walk(storage.shards(), derived) == []
    assert storage.walk(storages["releases"], released) == []


@pytest.fixture
def failed_redact(reviewed, reg, team, verified, make_request, policy, detector_id, store_detections, monkeypatch):
    """A redact release whose job made its derived shard, then failed (a copy refused): the derived shard stays
    for a retry."""
    policy("redact")
    [episode] = reviewed(1)

    def refused(*args, **kwargs):
        raise storage.ObjectMismatch("the copy does not match its receipt")

    with monkeypatch.context() as patched:
        patched.setattr(publish, "_refuse_originals", refused)
        failed = _publish(make_request([episode]), team)
    assert failed.state == State.FAILED, failed.state
    with scope(study=reg.study):
        derived = redacted.derived_prefix(failed, failed.items.get())
    assert storage.walk(storage.shards(), derived)
    return failed, derived


def test_a_withdrawal_removes_the_derived_shard_a_failed_release_kept(reg, failed_redact,
                                                                      django_capture_on_commit_callbacks, sent_tasks):
    failed, derived = failed_redact
    assert research.run(research.withdraw(reg, django_capture_on_commit_callbacks, sent_tasks)).state == "done"
    assert storage.walk(storage.shards(), derived) == []
    assert storage.walk(storages["releases"], failed.prefix) == []


@pytest.mark.parametrize("refusal", ["consent", "approval"])
def test_a_release_stopped_by_a_withdrawal_or_an_unapproved_change_keeps_no_derived_shard(
        reviewed, reg, team, verified, make_request, policy, detector_id, store_detections, monkeypatch, refusal):
    policy("redact")
    [episode] = reviewed(1)
    checks = {"consent": "_require_consent", "approval": "_require_approved"}
    real = getattr(publish, checks[refusal])
    calls = []

    def late(release, **kwargs):  # passes before the copies, refuses at signing / under the final lock
        calls.append(kwargs)
        if len(calls) > 1:
            raise (publish.ConsentGone("consent withdrawn") if refusal == "consent"
                   else publish.NotApproved(["a row changed after the approval"]))
        return real(release, **kwargs)

    monkeypatch.setattr(publish, checks[refusal], late)
    stopped = _publish(make_request([episode]), team)
    assert len(calls) > 1 and stopped.state == State.FAILED, stopped.state
    assert storage.walk(storage.shards(), redacted.release_prefix(stopped)) == []
    assert storage.walk(storages["releases"], stopped.prefix) == []


def test_a_dataset_from_a_redact_release_assembles_with_the_redacted_video(
        reviewed, reg, team, make_request, policy, detector_id, make_researcher, tmp_path, test_output):
    from portal.research.models import Dataset
    from portal.research.services import catalogue, datasets

    policy("redact")
    episodes = reviewed(2, every_frame=True)
    released = _publish(make_request(episodes), team)
    assert released.state == State.RELEASED, released.reason
    researcher = make_researcher("researcher")
    with scope(study=reg.study):
        items = list(catalogue.released_items().filter(request=released).select_related("request"))
        dataset, _ = datasets.request_dataset(researcher, reg.study, items)
        datasets.build_dataset(dataset.pk)
        dataset = Dataset.objects.get(pk=dataset.pk)
        published = redacted.released_files(released)
    assert dataset.state == "ready", dataset.reason
    folder = _download(dataset.prefix, tmp_path / "dataset")
    manifest = verify_release(folder, signing_key().public_key())
    assert [e["source_receipt_sha256"] for e in manifest["dataset"]["episodes"]] == [
        published[item.episode_index][0] for item in sorted(items, key=lambda i: i.episode_index)]
    assert len(list(folder.rglob("redaction.json"))) == 2  # the assembler keeps each episode's record
    for video in folder.rglob("*.mp4"):
        frames = _luma(video)
        height, width = frames[0].shape
        x0, y0, x1, y1 = fill_rect((4, 4, 14, 14), width, height)
        assert all(np.abs(frame[y0:y1, x0:x1].astype(int) - FILL_YUV[0]).mean() <= 2 for frame in frames)
    # Kept for LeRobot's own reader (tests/compat/lerobot_check.sh --also): its pixels are compared with the
    # released (redacted) shards' videos.
    shards = _download(released.prefix, tmp_path / "release")
    keep_for_lerobot(test_output, "portal-dataset-redacted", folder, items, shards)


def test_a_rerun_reuses_a_whole_derived_shard_and_remakes_one_left_half_stored(reg, boxed):
    shards = storage.shards()
    with scope(study=reg.study):
        item = boxed.items.get()
        prefix = redacted.derived_prefix(boxed, item)
        first = redacted.derive(boxed, item)
        video = next(f["path"] for f in first["files"] if f["path"].endswith(".mp4"))
        # A job killed before it stored the receipt: the derived shard is made again, byte for byte.
        shards.delete(prefix + RECEIPT)
        shards.delete(prefix + video)
        assert redacted.derive(boxed, item) == first
        # An altered derived file is not reused either.
        shards.delete(prefix + video)
        storage.put(shards, prefix + video, BytesIO(b"not a video"))
        assert redacted.derive(boxed, item) == first
        assert storage.digest(shards, prefix + video)[0] == next(f["sha256"] for f in first["files"]
                                                                  if f["path"] == video)


@pytest.mark.usefixtures("local_folders")  # a whole-store run: on storages of the test's own
def test_fixity_accounts_for_the_stored_detections(reg, boxed):
    with scope(study=reg.study):
        job = FaceDetection.objects.get(episode=boxed.items.get().episode)
    folder = job.key.rsplit("/", 1)[0] + "/"
    with scopes_disabled():  # a whole-store pass
        run = runs.run_fixity("test", full=True)
        assert not run.problems.filter(object_name__startswith=folder).exists()
    storage.put(storage.shards(), folder + "planted.parquet", BytesIO(b"x"))
    storage.shards().delete(job.key)
    storage.put(storage.shards(), job.key, BytesIO(b"changed"))
    with scopes_disabled():
        run = runs.run_fixity("test", full=True)
        assert sorted(run.problems.filter(object_name__startswith=folder).values_list("object_name", flat=True)) \
            == sorted([job.key, folder + "planted.parquet"])


second = research.second


def test_a_superseding_release_of_a_redact_release_publishes_its_own_derived_shards(
        reg, team, second, verified_factory, make_request, policy, detector_id, store_detections,
        django_capture_on_commit_callbacks, sent_tasks, tmp_path):
    policy("redact")
    episodes = [verified_factory(reg), verified_factory(second)]
    for episode in episodes:
        store_detections(episode, {0: [(4, 4, 14, 14)]})
        with scope(study=reg.study):
            review.mark_reviewed(reg.ethics, episode)
    first = _publish(make_request(episodes), team)
    assert first.state == State.RELEASED, first.reason
    with django_capture_on_commit_callbacks(execute=True):
        research.run(research.withdraw(reg, django_capture_on_commit_callbacks, sent_tasks))
    with scope(study=reg.study):
        successor = ReleaseRequest.objects.get(supersedes=first)
        assert successor.face_policy == "redact"
        publish.publish_release(successor.pk)
        successor.refresh_from_db()
        kept = successor.items.get()
    assert successor.state == State.RELEASED, successor.reason
    manifest = verify_release(_download(successor.prefix, tmp_path / "successor"), signing_key().public_key())
    [entry] = manifest["redacted_episodes"]
    assert entry["episode_index"] == kept.episode_index and entry["original_receipt_sha256"] == kept.receipt_sha256
    # The withdrawn episode's derived shard is gone; the kept one's is there for each release.
    with scope(study=reg.study):
        gone = first.items.exclude(episode_index=kept.episode_index).get()
    assert storage.walk(storage.shards(), redacted.derived_prefix(first, gone)) == []
    assert storage.walk(storage.shards(), redacted.derived_prefix(successor, kept))


def test_the_face_policy_is_approved_with_the_section_and_a_database_write_after_approval_is_refused(
        reviewed, reg, team, verified, make_request, policy, detector_id, store_detections):
    """The officers approve the policy with the episodes: someone who flips the request's policy in the database
    after the approvals (to publish the original videos) changes the section's digest, and the job refuses."""
    policy("redact")
    [episode] = reviewed(1)
    request = make_request([episode])
    with scope(study=reg.study):
        from portal.releases.services import manifest as release_manifest

        assert release_manifest.section(request)["face_policy"] == "redact"
        for officer in (team.reg.ethics, team.ethics2):
            approve(officer, request, manifest_sha256=request.manifest_sha256)
    with scope(study=reg.study):
        ReleaseRequest.objects.filter(pk=request.pk).update(face_policy="off")  # a database writer
        publish.publish_release(request.pk)
        request = ReleaseRequest.objects.get(pk=request.pk)
    assert request.state == State.FAILED and "not the approved" in request.reason
    assert not storage.walk(storages["releases"], request.prefix)


def test_a_redact_manifest_without_a_videos_redacted_shard_is_refused_by_the_reader(boxed, tmp_path):
    """Signed by the key, and still refused: under the approved redact policy an episode with a video must come
    as its derived shard, never as the original."""
    from exporter.release import json_bytes, sign

    folder = _download(boxed.prefix, tmp_path / "release")
    manifest = json.loads((folder / MANIFEST).read_bytes())
    assert manifest["release"]["face_policy"] == "redact"
    manifest["redacted_episodes"] = []
    data = json_bytes(manifest)
    (folder / MANIFEST).write_bytes(data)
    (folder / "release-manifest.json.sig").write_bytes(sign(signing_key(), data))
    with pytest.raises(Exception, match="has a video but no redacted shard"):
        verify_release(folder, signing_key().public_key())


def test_an_episode_without_video_has_no_face_to_look_for_and_is_published_as_it_is(
        reg, team, verified, make_request, policy, detector_id, tmp_path):
    policy("redact")
    episode = verified(1, camera="none")[0]
    with scope(study=reg.study):
        assert detection.queue_detection(reg.ethics, episode) is None  # nothing to look at
    request = make_request([episode])
    with scope(study=reg.study):
        from portal.releases.services import gate

        faces = [check for check in gate.evaluate(request).episodes[0].checks if check.key == "faces"]
        assert [(check.status, check.detail) for check in faces] == [("pass", "no video: no face to look for")]
    released = _publish(request, team)
    assert released.state == State.RELEASED, released.reason
    manifest = verify_release(_download(released.prefix, tmp_path / "release"), signing_key().public_key())
    assert manifest["release"]["face_policy"] == "redact" and "redacted_episodes" not in manifest


def _delete_the_added_box(reg, episode, detector):
    FaceSpan.objects.filter(episode=episode).delete()
    return "stands in the audit log but not in the database"


def _take_the_added_box_back(reg, episode, detector):
    FaceSpan.objects.filter(episode=episode).update(removed_at=timezone.now())
    return "stands in the audit log but not in the database"


def _shrink_the_added_box(reg, episode, detector):
    span = FaceSpan.objects.get(episode=episode)
    FaceSpan.objects.filter(pk=span.pk).update(keyframes=[[0, 4, 4, 5, 5], *span.keyframes[1:]])
    return "keyframes are not the ones the audit log recorded"


def _garble_the_added_box(reg, episode, detector):
    FaceSpan.objects.filter(episode=episode).update(keyframes=[["x", None]])
    return "keyframes are not the ones the audit log recorded"


def _remove_a_detection(reg, episode, detector):
    FaceRemoval.objects.create(study=episode.study, episode=episode, detector_id=detector, frame=1, index=0,
                               box=[4, 4, 14, 14], removed_by=reg.ethics)
    return "detection 0 of frame 1 is removed in the database but the audit log records no officer removing it"


def _swap_the_detections(reg, episode, detector):
    job = FaceDetection.objects.get(episode=episode, detector_id=detector)
    data = b"other detections"
    storage.put(storage.shards(), job.key + ".other", BytesIO(data))
    FaceDetection.objects.filter(pk=job.pk).update(key=job.key + ".other", sha256=hashlib.sha256(data).hexdigest())
    return "are not the ones the audit log recorded when they were stored"


@pytest.mark.parametrize("tamper", [_delete_the_added_box, _take_the_added_box_back, _shrink_the_added_box,
                                    _garble_the_added_box, _remove_a_detection, _swap_the_detections])
def test_boxes_a_database_writer_changed_after_approval_stop_the_release(
        reg, team, verified, make_request, policy, detector_id, store_detections, tamper):
    """The officers added a box over a missed face, reviewed and approved; someone who can write to the database
    (not the audit log's events) then deletes, takes back or shrinks that box, removes a true detection, or swaps
    the stored detections: the release job reads the boxes back from the audit log, refuses to publish, names the
    difference, alerts the study and leaves nothing in the releases storage."""
    policy("redact")
    episode = verified(1)[0]
    store_detections(episode, {frame: [(4, 4, 14, 14)] for frame in range(episode.length)})
    with scope(study=reg.study):
        review.add_span(reg.ethics, episode, [[0, 16, 4, 26, 14], [2, 18, 4, 28, 14]])
        review.mark_reviewed(reg.ethics, episode)
        request = make_request([episode])
        for officer in (team.reg.ethics, team.ethics2):
            approve(officer, request, manifest_sha256=request.manifest_sha256)
        assert redacted.box_mismatches(request) == []
        expected = tamper(reg, episode, detection.current_detector_id())  # a database writer
        publish.publish_release(request.pk)
        request = ReleaseRequest.objects.get(pk=request.pk)
        assert request.state == State.FAILED and expected in request.reason, request.reason
        assert Alert.objects.filter(study=reg.study, kind=Alert.Kind.RELEASE_INTEGRITY).exists()
    assert not storage.walk(storages["releases"], request.prefix)


def test_a_review_written_into_the_database_is_not_one_the_release_accepts(
        reviewed, reg, team, verified, make_request, policy, detector_id, store_detections):
    """An officer added a box after the last review (so the episode needs a new one); a database writer makes a
    review row instead of an officer's review: the gate would pass, the release job does not."""
    policy("redact")
    [episode] = reviewed(1)
    with scope(study=reg.study):
        review.add_span(reg.ethics, episode, [[0, 16, 4, 26, 14]])
        assert review.reviewed(episode, detection.current_detector_id()) is None
        FaceReview.objects.create(study=reg.study, episode=episode, detector_id=detection.current_detector_id(),
                                  reviewed_by=reg.ethics)  # a database writer
        assert review.reviewed(episode, detection.current_detector_id()) is not None
        request = make_request([episode])
        for officer in (team.reg.ethics, team.ethics2):
            approve(officer, request, manifest_sha256=request.manifest_sha256)
        publish.publish_release(request.pk)
        request = ReleaseRequest.objects.get(pk=request.pk)
    assert request.state == State.FAILED and "records no such review after the last change" in request.reason
    assert not storage.walk(storages["releases"], request.prefix)
