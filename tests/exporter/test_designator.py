import pytest

from exporter.designator import (
    ANIMALS,
    MATERIALS,
    WORDS_1,
    WORDS_2,
    family_pair,
    generate_designator,
    parse_designator,
    validate_designator,
)


@pytest.mark.parametrize(("words", "size"), [(WORDS_1, 256), (WORDS_2, 256)])
def test_family_lists_have_256_distinct_words(words, size):
    assert len(words) == size
    assert len(set(words)) == size


@pytest.mark.parametrize("words", [ANIMALS, MATERIALS])
def test_random_lists_have_at_least_64_distinct_words(words):
    assert len(words) >= 64
    assert len(set(words)) == len(words)


@pytest.mark.parametrize("words", [WORDS_1, WORDS_2, ANIMALS, MATERIALS])
def test_words_are_lower_case_letters_without_separator(words):
    assert all(word.isascii() and word.isalpha() and word.islower() for word in words)


def test_family_pair_indexes_the_last_two_utf8_bytes():
    # "é" is 0xC3 0xA9 in UTF-8: the pair comes from those two bytes, not from the character.
    assert family_pair("HS-é") == (WORDS_1[0xC3], WORDS_2[0xA9])
    assert family_pair("AB") == (WORDS_1[ord("A")], WORDS_2[ord("B")])
    assert family_pair("x-01") == family_pair("y-01")


def test_one_non_ascii_character_is_two_bytes_and_enough():
    assert family_pair("é") == (WORDS_1[0xC3], WORDS_2[0xA9])


@pytest.mark.parametrize("headset_id", ["A", "7"])
def test_headset_id_shorter_than_two_bytes_is_refused(headset_id):
    with pytest.raises(ValueError, match="1 byte"):
        family_pair(headset_id)
    with pytest.raises(ValueError, match="at least 2"):
        generate_designator(headset_id, lambda _: False)


def test_empty_headset_id_has_no_family_pair():
    with pytest.raises(ValueError, match="0 byte"):
        family_pair("")


def test_same_headset_always_gives_the_same_family_pair():
    pairs = {tuple(generate_designator("HS-0042", lambda _: False).split("-")[:2]) for _ in range(200)}
    assert pairs == {family_pair("HS-0042")}


def test_designators_are_valid_and_parse_back():
    designator = generate_designator("HS-0042", lambda _: False)
    validate_designator(designator)
    parts = parse_designator(designator)
    assert (parts["word1"], parts["word2"]) == family_pair("HS-0042")
    assert parts["animal"] in ANIMALS and parts["material"] in MATERIALS


def test_redrawn_until_unique_over_many_draws():
    taken: set[str] = set()
    for _ in range(2000):
        designator = generate_designator("HS-0042", taken.__contains__)
        assert designator not in taken
        taken.add(designator)
    assert len(taken) == 2000


def test_exhausted_family_pair_raises_instead_of_looping():
    with pytest.raises(RuntimeError, match="no free designator"):
        generate_designator("HS-0042", lambda _: True, max_tries=50)


def test_without_headset_the_pair_is_random():
    pairs = {tuple(generate_designator(None, lambda _: False).split("-")[:2]) for _ in range(50)}
    assert len(pairs) > 1


@pytest.mark.parametrize(("text", "fault"), [
    ("", "4 parts"),
    ("able-acorn-fox", "4 parts"),
    ("able-acorn-fox-oak-extra", "4 parts"),
    ("Able-acorn-fox-oak", "'Able' is not in the word1 list"),
    ("able-zzz-fox-oak", "'zzz' is not in the word2 list"),
    ("able-acorn-unicorn-oak", "'unicorn' is not in the animal list"),
    ("able-acorn-fox-gold", "'gold' is not in the material list"),
    ("acorn-able-fox-oak", "'acorn' is not in the word1 list"),
])
def test_validate_names_the_fault(text, fault):
    with pytest.raises(ValueError, match=fault):
        validate_designator(text)


@pytest.mark.parametrize("index", [0, -1])
def test_well_formed_designators_pass_and_parse(index):
    """The first and the last word of every list: a check off by one at either end of a list fails here."""
    lists = {"word1": WORDS_1, "word2": WORDS_2, "animal": ANIMALS, "material": MATERIALS}
    parts = {name: words[index] for name, words in lists.items()}
    text = "-".join(parts.values())
    assert validate_designator(text) is None
    assert parse_designator(text) == parts
