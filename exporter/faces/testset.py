"""A generated face test set: faces from photographs bundled with scikit-image pasted into egocentric frames.

Only images that ship inside the scikit-image package are used (no download). Each face source has a known
face box, written below with where it came from. A clip is a short run of frames of one scene: a background
of bundled textures and photographs that pans as a head-mounted camera does, a skin-coloured "hand" blob that
moves across it, and (except for face-free clips) one face at a given size, position, rotation, blur and
brightness that moves in a straight line and may be partly covered by the hand. The ground truth of a frame
is the face's box (the axis-aligned extent of the face's oval once turned); the face's size is its height
before it is turned. A face-free video (``free_video``) is a long run of face-free scenes of a few seconds
each, cut one after the other, for false alarms per minute: each scene pans over its own wall and has its own
hand, both turning back at the wall's edges; its frames are made one at a time, so its length costs no memory.

Used by bench/faces.py and the detector's tests; everything is made in memory from a seed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

SIZE_BANDS = ((24, 40), (40, 80), (80, 160), (160, 300))


@dataclass(frozen=True)
class FaceSource:
    name: str
    box: tuple[int, int, int, int]  # x0, y0, x1, y1 of the face in the source image
    origin: str


# Face boxes of the bundled photographs: brow-to-chin and ear-to-ear, read off the images by eye (the
# astronaut: 512x512 skimage.data.astronaut(), NASA portrait of Eileen Collins; the cameraman: 512x512
# skimage.data.camera(), his face in three-quarter view). The LFW subset (skimage.data.lfw_subset(), its
# first 100 images) is already cropped to the face: its box is the whole 25x25 image.
ASTRONAUT = FaceSource("astronaut", (180, 55, 272, 180), "skimage.data.astronaut()")
CAMERAMAN = FaceSource("cameraman", (200, 115, 260, 200), "skimage.data.camera()")
LFW_FACES = 100
LFW_BOX = (0, 0, 25, 25)


def _skdata():
    from skimage import data

    return data


@lru_cache(maxsize=1)
def _lfw() -> np.ndarray:
    return _skdata().lfw_subset()


def _rgb(image: np.ndarray) -> np.ndarray:
    if image.ndim == 2:
        image = np.stack([image] * 3, axis=-1)
    if image.dtype != np.uint8:
        image = np.clip(image * 255 if image.max() <= 1 else image, 0, 255).astype(np.uint8)
    return image[..., :3]


@lru_cache(maxsize=4)
def _source_image(name: str) -> np.ndarray:
    data = _skdata()
    if name == "astronaut":
        return _rgb(data.astronaut())
    if name == "cameraman":
        return _rgb(data.camera())
    raise KeyError(name)


def face_sources() -> list[FaceSource]:
    """The two portraits and the LFW subset's faces."""
    lfw = [FaceSource(f"lfw{i:03d}", LFW_BOX, f"skimage.data.lfw_subset()[{i}]") for i in range(LFW_FACES)]
    return [ASTRONAUT, CAMERAMAN, *lfw]


def _source(source: FaceSource) -> np.ndarray:
    if source.name.startswith("lfw"):
        return _rgb(_lfw()[int(source.name[3:])])
    return _source_image(source.name)


@lru_cache(maxsize=1)
def _textures() -> list[np.ndarray]:
    """Face-free bundled images for backgrounds: textures and photographs without people."""
    data = _skdata()
    tinted = []
    for gray, tint in ((data.brick(), (1.0, 0.85, 0.7)), (data.grass(), (0.75, 1.0, 0.7)), (data.gravel(), (1, 1, 1))):
        tinted.append(np.clip(np.stack([gray * t for t in tint], axis=-1), 0, 255).astype(np.uint8))
    photos = [data.coffee(), data.chelsea(), data.rocket(), _rgb(data.coins()), _rgb(data.page()), _rgb(data.text())]
    return tinted + [_rgb(p) for p in photos]


def _resize(image: np.ndarray, height: int, width: int) -> np.ndarray:
    import av

    frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(image), format="rgb24")
    return frame.to_ndarray(width=max(2, width), height=max(2, height), format="rgb24", interpolation="BICUBIC")


def _canvas(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    """A wall of bundled textures and photographs, larger than a frame so that the view can pan over it."""
    canvas = np.zeros((height, width, 3), np.uint8)
    textures = _textures()
    y = 0
    while y < height:
        row_h = int(rng.integers(160, 420))
        x = 0
        while x < width:
            tile = textures[int(rng.integers(len(textures)))]
            tile_w = int(rng.integers(180, 520))
            canvas[y : y + row_h, x : x + tile_w] = _resize(tile, row_h, tile_w)[: height - y, : width - x]
            x += tile_w
        y += row_h
    shade = np.linspace(0.7, 1.1, width)[None, :, None] * np.linspace(1.1, 0.75, height)[:, None, None]
    return np.clip(canvas * shade, 0, 255).astype(np.uint8)


def _hand(rng: np.random.Generator, size: int) -> tuple[np.ndarray, np.ndarray]:
    """A skin-coloured blob (palm and four fingers) with an alpha mask, as a hand near the camera looks."""
    h = w = size
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    palm = ((xx - w * 0.5) / (w * 0.3)) ** 2 + ((yy - h * 0.65) / (h * 0.28)) ** 2 <= 1
    mask = palm.copy()
    for k in range(4):
        cx = w * (0.3 + 0.13 * k)
        mask |= ((xx - cx) / (w * 0.055)) ** 2 + ((yy - h * 0.3) / (h * 0.2)) ** 2 <= 1
    skin = np.array([200, 150, 120], np.float32) * rng.uniform(0.6, 1.1)
    texture = rng.normal(0, 6, (h, w, 1)).astype(np.float32)
    rgb = np.clip(skin[None, None] + texture - (yy / h * 40)[..., None], 0, 255).astype(np.uint8)
    return rgb, mask.astype(np.float32)


def _paste(frame: np.ndarray, patch: np.ndarray, alpha: np.ndarray, x: int, y: int) -> None:
    h, w = patch.shape[:2]
    fx0, fy0 = max(0, x), max(0, y)
    fx1, fy1 = min(frame.shape[1], x + w), min(frame.shape[0], y + h)
    if fx1 <= fx0 or fy1 <= fy0:
        return
    p = patch[fy0 - y : fy1 - y, fx0 - x : fx1 - x].astype(np.float32)
    a = alpha[fy0 - y : fy1 - y, fx0 - x : fx1 - x, None]
    region = frame[fy0:fy1, fx0:fx1].astype(np.float32)
    frame[fy0:fy1, fx0:fx1] = (p * a + region * (1 - a)).astype(np.uint8)


@dataclass(frozen=True)
class FacePatch:
    rgb: np.ndarray
    alpha: np.ndarray
    box: tuple[float, float, float, float]  # the face's axis-aligned box inside the patch
    size: int  # face height in pixels before rotation


def face_patch(source: FaceSource, size: int, angle: float, blur: float, brightness: float) -> FacePatch:
    """The face with some head around it, scaled so that the face box is ``size`` pixels tall, rotated by
    ``angle`` degrees, blurred (Gaussian sigma in pixels of the result) and brightened, with a soft oval mask."""
    from scipy import ndimage

    image = _source(source)
    x0, y0, x1, y1 = source.box
    bw, bh = x1 - x0, y1 - y0
    mx, my = int(bw * 0.35), int(bh * 0.3)
    cx0, cy0 = max(0, x0 - mx), max(0, y0 - my)
    cx1, cy1 = min(image.shape[1], x1 + mx), min(image.shape[0], y1 + my)
    crop = image[cy0:cy1, cx0:cx1]
    scale = size / bh
    crop = _resize(crop, round(crop.shape[0] * scale), round(crop.shape[1] * scale)).astype(np.float32)
    fx0, fy0 = (x0 - cx0) * scale, (y0 - cy0) * scale
    fx1, fy1 = fx0 + bw * scale, fy0 + bh * scale
    h, w = crop.shape[:2]
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    oval = ((xx - w / 2) / (w / 2)) ** 2 + ((yy - h / 2) / (h / 2)) ** 2
    alpha = np.clip((1.0 - oval) * 4, 0, 1)
    alpha = np.maximum(alpha, _inside(xx, yy, (fx0, fy0, fx1, fy1)))
    if blur > 0:
        crop = ndimage.gaussian_filter(crop, sigma=(blur, blur, 0))
    crop = np.clip(crop * brightness, 0, 255)
    if angle:
        pad = math.ceil(max(h, w) * 0.3)
        crop = np.pad(crop, ((pad, pad), (pad, pad), (0, 0)))
        alpha = np.pad(alpha, pad)
        crop = ndimage.rotate(crop, angle, axes=(1, 0), reshape=False, order=1)
        alpha = ndimage.rotate(alpha, angle, axes=(1, 0), reshape=False, order=1)
        # the face's oval (inscribed in its box) turned with the picture: its axis-aligned extent is the truth
        centre = np.array([(fx0 + fx1) / 2 + pad, (fy0 + fy1) / 2 + pad]) - np.array([crop.shape[1], crop.shape[0]]) / 2
        theta = math.radians(angle)
        # ndimage.rotate turns the picture counter-clockwise on screen for a positive angle (y points down).
        rot = np.array([[math.cos(theta), math.sin(theta)], [-math.sin(theta), math.cos(theta)]])
        cx, cy = rot @ centre + np.array([crop.shape[1], crop.shape[0]]) / 2
        a, b = (fx1 - fx0) / 2, (fy1 - fy0) / 2
        half_w = math.hypot(a * math.cos(theta), b * math.sin(theta))
        half_h = math.hypot(a * math.sin(theta), b * math.cos(theta))
        fx0, fy0, fx1, fy1 = cx - half_w, cy - half_h, cx + half_w, cy + half_h
    return FacePatch(
        np.clip(crop, 0, 255).astype(np.uint8), np.clip(alpha, 0, 1), (fx0, fy0, fx1, fy1), size
    )


def _inside(xx: np.ndarray, yy: np.ndarray, box: tuple[float, float, float, float]) -> np.ndarray:
    x0, y0, x1, y1 = box
    return ((xx >= x0) & (xx <= x1) & (yy >= y0) & (yy <= y1)).astype(np.float32)


@dataclass(frozen=True)
class Clip:
    """A generated clip: ``frames()`` yields each RGB frame; ``truth[i]`` is frame i's face box or None."""

    seed: int
    width: int
    height: int
    length: int
    source: str | None
    size: int | None
    truth: tuple[tuple[float, float, float, float] | None, ...]
    covered: tuple[float, ...]  # the share of the face box that the hand's square covers, per frame
    render: Callable[[], Iterator[np.ndarray]]
    # the share of the face's pixels inside its box that the hand leaves in view, per frame (its opaque blob,
    # not its square: the fingers leave gaps); 1.0 for face-free frames
    visible: tuple[float, ...] = ()

    def frames(self) -> Iterator[np.ndarray]:
        return self.render()


def make_clip(
    seed: int,
    *,
    width: int = 1280,
    height: int = 720,
    length: int = 24,
    band: tuple[int, int] | None = None,
    source: FaceSource | None = None,
) -> Clip:
    """One clip. ``band`` None makes a face-free clip; otherwise a face of a size drawn from the band."""
    rng = np.random.default_rng(seed)
    canvas = _canvas(rng, height + 200, width + 400)
    pan = rng.uniform(-6, 6, 2)  # pixels per frame of the head-mounted camera
    origin = np.array([200.0, 100.0])
    hand_size = int(rng.integers(height // 3, int(height * 0.6)))
    hand_rgb, hand_alpha = _hand(rng, hand_size)
    hand_start = np.array([rng.uniform(0, width - hand_size), rng.uniform(height * 0.4, height - hand_size * 0.6)])
    hand_step = rng.uniform(-10, 10, 2)
    patch = None
    face_start = face_step = None
    if band is not None:
        sources = face_sources()
        chosen = source or sources[int(rng.integers(len(sources)))]
        size = int(rng.integers(band[0], band[1]))
        patch = face_patch(
            chosen,
            size,
            angle=float(rng.uniform(-20, 20)),
            blur=float(rng.choice([0.0, 0.0, rng.uniform(0.3, 1.5) * size / 80])),
            brightness=float(rng.uniform(0.55, 1.35)),
        )
        ph, pw = patch.rgb.shape[:2]
        face_start = np.array([rng.uniform(-pw * 0.1, width - pw * 0.9), rng.uniform(-ph * 0.1, height - ph * 0.9)])
        face_step = rng.uniform(-6, 6, 2)
        # the hand comes over the face in some clips: aim it at the face's lower half
        if rng.uniform() < 0.4:
            target = face_start + np.array([pw / 2, ph * 0.8])
            hand_start = target - np.array([hand_size / 2, hand_size * 0.1]) - hand_step * length / 2
            hand_step = hand_step * 0.5
    truth: list[tuple[float, float, float, float] | None] = []
    covered: list[float] = []
    in_view: list[float] = []
    for i in range(length):
        if patch is None:
            truth.append(None)
            covered.append(0.0)
            in_view.append(1.0)
            continue
        fx, fy = face_start + face_step * i
        x0, y0, x1, y1 = patch.box
        box = (fx + x0, fy + y0, fx + x1, fy + y1)
        clipped = (max(0.0, box[0]), max(0.0, box[1]), min(float(width), box[2]), min(float(height), box[3]))
        area = (box[2] - box[0]) * (box[3] - box[1])
        visible = max(0.0, clipped[2] - clipped[0]) * max(0.0, clipped[3] - clipped[1])
        # a face less than 60 % inside the frame is not counted (the frame edge cuts it)
        truth.append(clipped if visible >= 0.6 * area else None)
        hx, hy = hand_start + hand_step * i
        hb = (hx, hy, hx + hand_size, hy + hand_size)
        ix = max(0.0, min(hb[2], box[2]) - max(hb[0], box[0]))
        iy = max(0.0, min(hb[3], box[3]) - max(hb[1], box[1]))
        covered.append(min(1.0, ix * iy / area))
        in_view.append(_visible_share(patch, face_start + face_step * i, hand_alpha, hand_start + hand_step * i))

    def render() -> Iterator[np.ndarray]:
        for i in range(length):
            # the view turns back at the wall's edges (in a clip short enough not to reach them: a straight pan)
            ox, oy = _bounce(origin, pan, i, np.zeros(2), 2 * origin).round().astype(int)
            frame = canvas[oy : oy + height, ox : ox + width].copy()
            if patch is not None:
                fx, fy = (face_start + face_step * i).round().astype(int)
                _paste(frame, patch.rgb, patch.alpha, int(fx), int(fy))
            hx, hy = (hand_start + hand_step * i).round().astype(int)
            _paste(frame, hand_rgb, hand_alpha, int(hx), int(hy))
            yield frame

    return Clip(
        seed=seed,
        width=width,
        height=height,
        length=length,
        source=None if patch is None else (source or chosen).name,
        size=None if patch is None else patch.size,
        truth=tuple(truth),
        covered=tuple(covered),
        visible=tuple(in_view),
        render=render,
    )


def _visible_share(patch: FacePatch, face_at: np.ndarray, hand_alpha: np.ndarray, hand_at: np.ndarray) -> float:
    """The share of the face's pixels (its alpha, inside its box) that the hand pasted over it leaves in view,
    at the whole-pixel positions render() pastes them at."""
    fx, fy = face_at.round().astype(int)
    hx, hy = hand_at.round().astype(int)
    bx0, by0, bx1, by1 = (math.floor(v) for v in patch.box)
    bx0, by0 = max(0, bx0), max(0, by0)
    bx1, by1 = min(patch.alpha.shape[1], bx1 + 1), min(patch.alpha.shape[0], by1 + 1)
    face = patch.alpha[by0:by1, bx0:bx1]
    total = float(face.sum())
    if total <= 0:
        return 1.0
    hand = np.zeros_like(face)
    # the face box's pixels in the hand's coordinates
    x0, y0 = fx + bx0 - hx, fy + by0 - hy
    sx0, sy0 = max(0, x0), max(0, y0)
    sx1, sy1 = min(hand_alpha.shape[1], x0 + face.shape[1]), min(hand_alpha.shape[0], y0 + face.shape[0])
    if sx1 > sx0 and sy1 > sy0:
        hand[sy0 - y0 : sy1 - y0, sx0 - x0 : sx1 - x0] = hand_alpha[sy0:sy1, sx0:sx1]
    return float((face * (1.0 - hand)).sum() / total)


@dataclass(frozen=True)
class FreeVideo:
    """A generated face-free video: ``frames()`` yields its RGB frames one at a time, scene after scene;
    no frame has a face (every frame's truth is None)."""

    seed: int
    width: int
    height: int
    fps: int
    scenes: tuple[int, ...]  # frames of each scene, in order

    @property
    def length(self) -> int:
        return sum(self.scenes)

    @property
    def minutes(self) -> float:
        return self.length / self.fps / 60

    def frames(self) -> Iterator[np.ndarray]:
        for index, length in enumerate(self.scenes):
            yield from _free_scene(self.seed * 1000 + index, self.width, self.height, length)


def free_video(
    seed: int,
    minutes: float,
    *,
    width: int = 1280,
    height: int = 720,
    fps: int = 30,
    scene_seconds: tuple[float, float] = (3.0, 8.0),
) -> FreeVideo:
    """A face-free video of ``minutes`` minutes at ``fps``: scenes of ``scene_seconds`` (drawn from the seed;
    the last one is cut to the length), each a panning wall with a moving hand as in ``make_clip``."""
    if minutes <= 0 or fps <= 0 or not 0 < scene_seconds[0] <= scene_seconds[1]:
        raise ValueError(
            f"free video: minutes {minutes!r} and fps {fps!r} must be positive and scene_seconds "
            f"{scene_seconds!r} an increasing pair of positive seconds"
        )
    rng = np.random.default_rng(seed)
    total = max(1, round(minutes * 60 * fps))
    scenes: list[int] = []
    while sum(scenes) < total:
        length = max(1, round(rng.uniform(*scene_seconds) * fps))
        scenes.append(min(length, total - sum(scenes)))
    return FreeVideo(seed=seed, width=width, height=height, fps=fps, scenes=tuple(scenes))


def _bounce(start: np.ndarray, step: np.ndarray, i: int, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """Where a point moving by ``step`` a frame from ``start`` is at frame i, turning back at low and high."""
    span = np.maximum(high - low, 1e-6)
    travelled = np.mod(start - low + step * i, 2 * span)
    return low + np.where(travelled > span, 2 * span - travelled, travelled)


def _free_scene(seed: int, width: int, height: int, length: int) -> Iterator[np.ndarray]:
    """One face-free scene: the wall, camera pan and hand of a face-free ``make_clip``, except that the view
    and the hand turn back at the wall's and the frame's edges, so that a scene may last any number of frames."""
    rng = np.random.default_rng(seed)
    margin = np.array([400.0, 200.0])
    canvas = _canvas(rng, height + int(margin[1]), width + int(margin[0]))
    pan = rng.uniform(-6, 6, 2)
    origin = margin / 2
    hand_size = int(rng.integers(height // 3, int(height * 0.6)))
    hand_rgb, hand_alpha = _hand(rng, hand_size)
    hand_low = np.array([-hand_size * 0.25, height * 0.4])
    hand_high = np.array([width - hand_size * 0.75, height - hand_size * 0.6])
    hand_start = np.array([rng.uniform(0, width - hand_size), rng.uniform(height * 0.4, height - hand_size * 0.6)])
    hand_step = rng.uniform(-10, 10, 2)
    for i in range(length):
        ox, oy = _bounce(origin, pan, i, np.zeros(2), margin).round().astype(int)
        frame = canvas[oy : oy + height, ox : ox + width].copy()
        hx, hy = _bounce(hand_start, hand_step, i, hand_low, hand_high).round().astype(int)
        _paste(frame, hand_rgb, hand_alpha, int(hx), int(hy))
        yield frame


def band_of(size: int) -> tuple[int, int] | None:
    for low, high in SIZE_BANDS:
        if low <= size < high or (high == SIZE_BANDS[-1][1] and size == high):
            return (low, high)
    return None


def covers(detection: tuple[float, ...], truth: tuple[float, ...], margin: float = 0.25, share: float = 0.9) -> bool:
    """Whether a detected box, grown by ``margin`` of its size each side (as the redaction grows it),
    covers at least ``share`` of the true face box."""
    x0, y0, x1, y1 = detection[:4]
    mx, my = (x1 - x0) * margin, (y1 - y0) * margin
    x0, y0, x1, y1 = x0 - mx, y0 - my, x1 + mx, y1 + my
    tx0, ty0, tx1, ty1 = truth
    ix = max(0.0, min(x1, tx1) - max(x0, tx0))
    iy = max(0.0, min(y1, ty1) - max(y0, ty0))
    return ix * iy >= share * (tx1 - tx0) * (ty1 - ty0)
