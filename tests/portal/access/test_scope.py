import pytest
from django.contrib.auth import get_user_model
from django_scopes import ScopeError, scope

from portal.studies.models import Headset


@pytest.fixture
def two_studies(make_study, db):
    user = get_user_model().objects.create_user("registrar")
    first, second = make_study("alpha"), make_study("beta")
    for study, ids in ((first, ["A-1", "A-2"]), (second, ["B-1"])):
        for headset_id in ids:
            Headset.objects.create(study=study, headset_id=headset_id, registered_by=user)
    return first, second


def test_unscoped_query_of_study_data_raises(two_studies):
    with pytest.raises(ScopeError):
        list(Headset.objects.all())


def test_scoped_query_sees_only_its_study(two_studies):
    first, second = two_studies
    with scope(study=first):
        assert sorted(Headset.objects.values_list("headset_id", flat=True)) == ["A-1", "A-2"]
    with scope(study=second):
        assert list(Headset.objects.values_list("headset_id", flat=True)) == ["B-1"]
        assert not Headset.objects.filter(headset_id="A-1").exists()
