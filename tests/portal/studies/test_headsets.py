import io
from datetime import date, timedelta

import pytest
from django.utils import timezone
from django_scopes import scope

from portal.audit.models import AuditEvent
from portal.studies.exceptions import HeadsetImportError, RegistryError
from portal.studies.models import Headset
from portal.studies.services.headsets import (
    declare_assigned_on,
    headset_for_recording,
    import_headsets_csv,
    not_the_studys_on,
    register_headset,
    retire_headset,
)
from portal.studies.services.study import set_study_status


def _csv(text: str) -> io.BytesIO:
    return io.BytesIO(text.encode("utf-8"))


def test_register_is_audited(study, coordinator):
    headset = register_headset(coordinator, study, headset_id="HS-0001", model="Quest 3")
    event = AuditEvent.objects.get(action="headset.registered")
    assert event.target_id == str(headset.pk) and event.after["headset_id"] == "HS-0001"
    assert event.actor_label == "coord" and event.study_id == study.pk


def test_a_headset_is_the_studys_from_its_registration_date_or_an_earlier_declared_one(study, coordinator):
    today = timezone.localdate()
    plain = register_headset(coordinator, study, headset_id="HS-0001")
    declared = register_headset(coordinator, study, headset_id="HS-0002", assigned_on=today - timedelta(days=40))
    assert (plain.assigned_on, declared.assigned_on) == (today, today - timedelta(days=40))
    event = AuditEvent.objects.get(action="headset.registered", target_id=str(declared.pk))
    assert event.after["assigned_on"] == (today - timedelta(days=40)).isoformat()
    with pytest.raises(RegistryError, match=f"cannot be the study's from {today + timedelta(days=1)}, after its "
                                            f"registration on {today}"):
        register_headset(coordinator, study, headset_id="HS-0003", assigned_on=today + timedelta(days=1))
    with scope(study=study):
        assert not Headset.objects.filter(headset_id="HS-0003").exists()


def test_the_studys_headset_on_a_date_is_assigned_by_then_and_not_yet_retired(study, coordinator):
    headset = register_headset(coordinator, study, headset_id="HS-0001", assigned_on=date(2026, 3, 1))
    assert not_the_studys_on(headset, date(2026, 3, 1)) is None
    assert not_the_studys_on(headset, date(2026, 2, 28)) == ("HS-0001 was assigned to the study on 2026-03-01, "
                                                             "after the recording date 2026-02-28")
    retire_headset(coordinator, headset, date(2026, 4, 1))
    assert not_the_studys_on(headset, date(2026, 3, 31)) is None
    assert not_the_studys_on(headset, date(2026, 4, 1)) == ("HS-0001 was retired on 2026-04-01, on or before the "
                                                            "recording date 2026-04-01")


def test_declaring_an_earlier_assignment_is_audited_and_bounded(study, coordinator, headset):
    registered_on = timezone.localdate(headset.registered_at)
    earlier = registered_on - timedelta(days=10)
    declare_assigned_on(coordinator, headset, earlier)
    assert headset.assigned_on == earlier
    with scope(study=study):
        assert Headset.objects.get(pk=headset.pk).assigned_on == earlier
    event = AuditEvent.objects.get(action="headset.assignment_declared")
    assert (event.before["assigned_on"], event.after["assigned_on"]) == (registered_on.isoformat(), earlier.isoformat())
    assert event.actor_label == "coord"
    with pytest.raises(RegistryError, match="is already the study's since"):
        declare_assigned_on(coordinator, headset, earlier)
    with pytest.raises(RegistryError, match="after its registration on"):
        declare_assigned_on(coordinator, headset, registered_on + timedelta(days=1))
    declare_assigned_on(coordinator, headset, registered_on)  # back to the registration date: allowed
    retire_headset(coordinator, headset, earlier)
    with pytest.raises(RegistryError, match=f"it was retired on {earlier}, on or before that date"):
        declare_assigned_on(coordinator, headset, earlier)
    assert AuditEvent.objects.filter(action="headset.assignment_declared").count() == 2


def test_duplicate_headset_id_is_refused(study, coordinator, headset):
    with pytest.raises(RegistryError, match="'HS-0001' is already registered in study alpha"):
        register_headset(coordinator, study, headset_id="HS-0001")


def test_same_headset_id_in_another_study_is_fine(study, coordinator, headset, make_study):
    other = make_study("beta")
    again = register_headset(coordinator, other, headset_id="HS-0001")
    assert again.pk != headset.pk and again.study == other and again.headset_id == "HS-0001"
    with scope(study=other):
        assert list(Headset.objects.values_list("pk", flat=True)) == [again.pk]
    with scope(study=study):
        assert list(Headset.objects.values_list("pk", flat=True)) == [headset.pk]
    registered = AuditEvent.objects.filter(action="headset.registered").order_by("seq")
    assert [(e.study_id, e.target_id) for e in registered] == [(study.pk, str(headset.pk)), (other.pk, str(again.pk))]


@pytest.mark.parametrize(("headset_id", "fault"), [
    ("", "empty"),
    ("A", "shorter than two bytes"),
    (" HS-1", "white space"),
    ("HS\x001", "control character"),
    ("H" * 129, "longer than 128"),
])
def test_bad_headset_ids_are_refused(study, coordinator, headset_id, fault):
    with pytest.raises(RegistryError, match=fault):
        register_headset(coordinator, study, headset_id=headset_id)


def test_one_non_ascii_character_is_a_valid_headset_id(study, coordinator):
    assert register_headset(coordinator, study, headset_id="é").headset_id == "é"


def test_csv_import_registers_every_row(study, coordinator):
    headsets = import_headsets_csv(coordinator, study, _csv("headset_id,model\nHS-1,Quest 3\nHS-2,\n"))
    assert [(h.headset_id, h.model) for h in headsets] == [("HS-1", "Quest 3"), ("HS-2", "")]
    assert AuditEvent.objects.filter(action="headset.registered").count() == 2


def test_csv_may_declare_when_each_headset_joined_the_study(study, coordinator):
    today = timezone.localdate()
    headsets = import_headsets_csv(coordinator, study, _csv("headset_id,assigned_on\nHS-1,2026-01-15\nHS-2,\n"))
    assert [(h.headset_id, h.assigned_on) for h in headsets] == [("HS-1", date(2026, 1, 15)), ("HS-2", today)]
    tomorrow = today + timedelta(days=1)
    with pytest.raises(HeadsetImportError) as caught:
        import_headsets_csv(coordinator, study, _csv(f"headset_id,assigned_on\nHS-3,15.01.2026\nHS-4,{tomorrow}\n"))
    assert caught.value.errors == [
        (2, "assigned_on '15.01.2026' is not a date (YYYY-MM-DD)"),
        (3, f"the headset cannot be the study's from {tomorrow}, after its registration on {today}")]


def test_csv_with_one_bad_row_imports_nothing_and_names_the_row(study, coordinator, headset):
    text = "headset_id,model\nHS-2,Quest 3\nX,Quest 3\nHS-3,Quest 2\n"
    with pytest.raises(HeadsetImportError) as caught:
        import_headsets_csv(coordinator, study, _csv(text))
    assert caught.value.errors == [(3, "headset ID 'X' is shorter than two bytes of UTF-8")]
    assert "row 3" in str(caught.value)
    with scope(study=study):
        assert list(Headset.objects.values_list("headset_id", flat=True)) == ["HS-0001"]
    assert AuditEvent.objects.filter(action="headset.registered").count() == 1  # the fixture's headset only


def test_csv_reports_every_bad_row(study, coordinator, headset):
    text = "headset_id\nHS-0001\nHS-9\nHS-9\n\nA\n"
    with pytest.raises(HeadsetImportError) as caught:
        import_headsets_csv(coordinator, study, _csv(text))
    rows = [row for row, _ in caught.value.errors]
    assert rows == [2, 4, 6]
    assert "already registered" in caught.value.errors[0][1]
    assert "repeats row 3" in caught.value.errors[1][1]


@pytest.mark.parametrize(("text", "fault"), [
    ("model\nQuest\n", "needs a headset_id column"),
    ("headset_id,serial\nHS-1,123\n", "unknown column(s) serial; expected headset_id, model, assigned_on"),
    ("headset_id\n", "no headset rows"),
    ("headset_id,model\nHS-1\n", "1 values for 2 columns"),
])
def test_csv_structure_faults(study, coordinator, text, fault):
    with pytest.raises(HeadsetImportError, match=fault.replace("(", r"\(").replace(")", r"\)")):
        import_headsets_csv(coordinator, study, _csv(text))


def test_csv_that_is_not_utf8_is_refused(study, coordinator):
    with pytest.raises(HeadsetImportError, match="not UTF-8"):
        import_headsets_csv(coordinator, study, io.BytesIO(b"headset_id\n\xff\xfe\n"))


def test_retired_headset_refuses_recordings_from_its_retirement_date(study, coordinator, headset):
    retire_headset(coordinator, headset, date(2026, 5, 1))
    assert headset_for_recording(study, "HS-0001", date(2026, 4, 30)) == headset
    with pytest.raises(RegistryError, match="retired on 2026-05-01"):
        headset_for_recording(study, "HS-0001", date(2026, 5, 1))
    with pytest.raises(RegistryError, match="already retired"):
        retire_headset(coordinator, headset, date(2026, 6, 1))
    event = AuditEvent.objects.get(action="headset.retired")
    assert event.before["retired_on"] is None and event.after["retired_on"] == "2026-05-01"


def test_unknown_headset_refuses_recordings(study, headset, make_study):
    with pytest.raises(RegistryError, match="'HS-9' is not registered in study alpha"):
        headset_for_recording(study, "HS-9", date(2026, 5, 1))
    other = make_study("beta")
    with pytest.raises(RegistryError, match="not registered in study beta"):
        headset_for_recording(other, "HS-0001", date(2026, 5, 1))


def test_closed_study_registers_no_headsets(study, coordinator):
    set_study_status(coordinator, study, "closed")
    with pytest.raises(RegistryError, match="closed"):
        register_headset(coordinator, study, headset_id="HS-0002")


def test_oversized_csv_is_refused_before_parsing(study, coordinator):
    """2 MiB at most (docs/registry.md); one byte more is refused before a row is read."""
    header = b"headset_id\n"
    rows = b"HS-1\n" * ((2 * 1024 * 1024 - len(header)) // 5)
    padding = b"\n" * (2 * 1024 * 1024 - len(header) - len(rows))  # blank lines are skipped
    with pytest.raises(HeadsetImportError, match=r"the file is larger than 2048 KiB") as caught:
        import_headsets_csv(coordinator, study, io.BytesIO(header + rows + padding + b"\n"))
    assert caught.value.errors == [(0, "the file is larger than 2048 KiB")]
