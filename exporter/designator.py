"""Readable demonstrator designators: ``<word1>-<word2>-<animal>-<material>``.

Governance section 3: the family pair ``<word1>-<word2>`` comes from the final two bytes of the study
headset ID's UTF-8 encoding (``WORDS_1`` indexed by the second-to-last byte, ``WORDS_2`` by the last),
so the same headset always gives the same pair; with no headset ID the pair is random. Animal and
material are drawn with ``secrets`` and re-drawn until the designator is free in the study.

The lists are part of the data contract: reordering or editing them changes every headset's family
pair, so they never change. The portal's registry, ingest and scripts all use this one
implementation; the exporter itself never invents a designator.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


# The family pair: WORDS_1 by the second-to-last byte, WORDS_2 by the last byte of the headset ID.
WORDS_1 = _words("""
    able agile airy alert amiable ample ancient arctic ardent astral atomic autumn azure balmy bold bouncy brave
    breezy bright brisk broad calm candid casual cheery chilly civic clean clear clever cloudy cobalt cool
    cosmic cozy crisp dainty dapper daring deep dense dreamy dusky dusty eager early earthy east easy elder epic
    even exact exotic fabled fair famous fancy far fast fiery fine firm flat fleet floral fluent fluffy flying
    foggy fond formal frank free fresh frosty frugal fuzzy genial gentle giant gifted gilded glad global glossy
    golden grand grassy great green hardy hazy hearty hidden high hollow honest humble humid icy ideal indigo
    inland inner jagged jazzy jolly jovial joyful keen kind kindly knotty large late lavish leafy level light
    lilac limber lively local lofty long loyal lucid lucky lunar lush magic major mature meek mellow merry
    mighty mild minor mint misty modern modest molten mossy narrow neat nimble noble north novel oaken open
    orange ornate outer pale placid plain plucky polar polite primal prime proud pure quaint quick quiet rainy
    rapid rare ready regal rich robust rocky rosy round royal ruddy rugged rustic sandy scenic secret serene
    shady shaggy sharp shiny silent silky simple sleek sleepy slow smart smooth snowy snug sober solar solid
    sonic south spare speedy spiced spry stable starry steady still stormy strong sturdy subtle sunlit sunny
    super swift tall tawny teal tender tidal tidy timely tiny tropic true trusty twin umber upbeat upper urban
    vast velvet vital vivid warm wary wavy west wild windy wise witty wooden woolly young zesty zonal
""")
WORDS_2 = _words("""
    acorn anchor anvil arbor arch arrow atlas atoll aurora avenue badge bank banner barn barrel basin bay bayou
    beach beacon beam bell bench berm berry birch bluff bog bolt bow branch breeze bridge brim brook bubble
    bucket burrow butte cabin cairn canal candle canopy canyon cape cart castle cavern cedar chapel chasm chime
    cliff cloud clover coast cobble comet cone corner cove cradle crag crater creek crest crown dale dell delta
    desert dome drift drum dune dusk eddy ember falls fen fern field fjord flag flame flute ford forest forge
    fork frost gale garden gate geyser glade glen globe gorge grove gulf gully hamlet hammer harbor harp haven
    heath hedge helix helm hill hook horn inlet island isle jar jetty jungle keel kettle key kite knoll knot
    ladder lagoon lake lane lawn ledge levee lever lily lodge loft loom lute marina marsh mast meadow mesa mill
    mirror mist moon moor mosaic mound nebula needle nest notch oar oasis ocean orbit paddle palace pass path
    peak pebble pier pillar pine plains planet plaza plow pond pool port portal prism pulley quarry quay quill
    rain range rapids ravine reef ribbon ridge rill rim ripple river road rudder saddle sail scroll shadow
    shield shoal shore sickle sierra signal sky slope sound spade spire spoke spool spring sprout spur squall
    star steppe strait stream summit sun sunset swamp tablet temple tent tide token tor torch tower trail tree
    trench trowel tundra upland vale valley vane vapor vault verge vessel vine vista wagon wave wharf wheel
    willow wind window yard zenith
""")
# Drawn at random; at least 64 each, so a family pair has 64 * 64 or more free designators.
ANIMALS = _words("""
    alpaca badger bat bear beaver bison bobcat camel cheetah condor cougar coyote crane crow deer dolphin donkey
    eagle egret elk falcon ferret finch fox gazelle gecko gibbon giraffe goose gopher gull hare hawk hedgehog
    heron ibex ibis iguana jackal jaguar kestrel koala lark lemur leopard lion llama lynx macaw marmot marten
    meerkat mink mole moose narwhal newt ocelot okapi orca osprey otter owl panda panther pelican penguin puffin
    quail rabbit raccoon raven salmon seal sparrow stork swan tapir tiger toucan turtle vole walrus weasel wolf
    wombat wren yak zebra
""")
MATERIALS = _words("""
    adobe alabaster aluminium bamboo basalt brass brick bronze burlap canvas carbon cement ceramic chalk chrome
    clay cobalt concrete copper cork cotton denim ebony enamel felt flannel flax flint glass gneiss granite
    graphite gravel gypsum hemp iron jute kaolin lacquer latex leather limestone linen mahogany maple marble
    mica nickel nylon oak obsidian paper pewter plaster platinum porcelain quartz rattan resin rubber sandstone
    satin shale silk slate steel suede teak terracotta tin titanium tungsten tweed vellum velvet walnut wax
    wicker wool zinc
""")

_SEPARATOR = "-"


def family_pair(headset_id: str) -> tuple[str, str]:
    """The family pair of a headset: words picked by the last two bytes of the ID's UTF-8 encoding."""
    encoded = headset_id.encode("utf-8")
    if len(encoded) < 2:
        raise ValueError(f"headset ID {headset_id!r} has {len(encoded)} byte(s) of UTF-8; at least 2 are needed")
    return WORDS_1[encoded[-2]], WORDS_2[encoded[-1]]


def generate_designator(headset_id: str | None, is_taken: Callable[[str], bool], *, max_tries: int = 1000) -> str:
    """A designator for a new demonstrator that ``is_taken`` reports free.

    The family pair comes from ``headset_id`` (random when it is None or empty); animal and material
    are re-drawn up to ``max_tries`` times. Raises ``RuntimeError`` when every try was taken.
    """
    pair = family_pair(headset_id) if headset_id else (secrets.choice(WORDS_1), secrets.choice(WORDS_2))
    for _ in range(max_tries):
        candidate = _SEPARATOR.join((*pair, secrets.choice(ANIMALS), secrets.choice(MATERIALS)))
        if not is_taken(candidate):
            return candidate
    raise RuntimeError(f"no free designator for family pair {'-'.join(pair)} after {max_tries} draws")


_PARTS = (("word1", WORDS_1), ("word2", WORDS_2), ("animal", ANIMALS), ("material", MATERIALS))


def validate_designator(text: str) -> None:
    """Raise ``ValueError`` naming the fault unless ``text`` is a well-formed designator (lower case)."""
    parts = text.split(_SEPARATOR)
    if len(parts) != len(_PARTS):
        raise ValueError(f"designator {text!r} must have 4 parts <word1>-<word2>-<animal>-<material>, "
                         f"found {len(parts)}")
    for value, (name, words) in zip(parts, _PARTS, strict=True):
        if value not in words:
            raise ValueError(f"designator {text!r}: {value!r} is not in the {name} list")


def parse_designator(text: str) -> dict[str, str]:
    """The four parts of a valid designator by name (``word1``, ``word2``, ``animal``, ``material``)."""
    validate_designator(text)
    return dict(zip((name for name, _ in _PARTS), text.split(_SEPARATOR), strict=True))
