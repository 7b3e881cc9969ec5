"""Procedural creatures made of parts, for the `embedded_parts` dataset (pure NumPy, deterministic).

Every image shows one creature on a cluttered background: a *body*, a *head* at its front, a pair
of *wings* at its sides and a *tail* at its back. Each part has a shape (from a few per part) and
an *appearance*: a colour and a texture (solid, stripes, dots, checker) in a darker shade of that
colour. The two tasks label this one vocabulary differently:

- **source** (pre-training, the stand-in for ImageNet): a class is the body's and the head's colour
  (56 ordered pairs); shapes, textures and the wings' and tail's colours are drawn per image. So
  the source shows every element of the target, and its labels teach where the body and the head
  are and which colour each has.
- **target** (fine-tuning, the stand-in for CUB-200): a genus is a body plan (all four shapes) with
  a pool of four appearances (four colours, the four textures); a species is a permutation of the
  pool over the parts, as bird species are new arrangements of colours and patterns on the same
  parts. Sister species share the body's and head's appearance (the source's labels) and swap the
  wings' and tail's. The shift is in the labels (new compositions of known elements), not in the
  images' elements.

The target's classes are drawn from a `task_seed`. Class attributes are invariant to flips and
rotations (the models' augmentation); each instance varies in position, scale, rotation, colour,
lighting, texture phase, clutter and noise. The designs tried: docs/benchmarks/regime_and_depth.md.
"""
from __future__ import annotations

import dataclasses
import itertools
from typing import List, Optional, Tuple

import numpy as np

from data.shapes_render import coverage, frame, lit_gradient, pixel_grid

COLOURS = ("red", "orange", "yellow", "green", "cyan", "blue", "purple", "white")
PALETTE = np.array([(215, 40, 40), (240, 135, 30), (235, 215, 50), (60, 175, 60), (50, 200, 210),
                    (45, 80, 215), (140, 60, 200), (240, 240, 235)], dtype=np.float32)
TEXTURES = ("solid", "stripes", "dots", "checker")
BODY_SHAPES = ("ellipse", "egg", "box", "diamond")
HEAD_SHAPES = ("circle", "triangle", "square")
WING_SHAPES = ("round", "pointed", "broad")
TAIL_SHAPES = ("fan", "fork", "spike")
PARTS = ("body", "head", "wings", "tail")
TEXTURE_PERIOD = 0.17  # in image units (the image spans 2): about 5.5 px at 64 px


# Loose parts behind each creature: how many, how far from the image's centre (image units), how
# large, and which parts they copy. CLUTTER keeps candidate 5's images byte for byte (the busier
# backgrounds tried: docs/benchmarks/regime_and_depth.md).
@dataclasses.dataclass(frozen=True)
class Clutter:
    """Loose parts drawn behind each creature (see CLUTTER)."""

    fewest: int
    most: int
    nearest: float
    farthest: float
    smallest: float
    largest: float
    parts: Tuple[str, ...]


CLUTTER = Clutter(fewest=0, most=2, nearest=0.55, farthest=0.9, smallest=0.08, largest=0.14, parts=("head",))


TEXTURE_SHADE = 0.55  # a texture is drawn in the part's colour times this


@dataclasses.dataclass(frozen=True)
class Appearance:
    """How one part is painted (indices into COLOURS and TEXTURES)."""

    colour: int
    texture: int


@dataclasses.dataclass(frozen=True)
class Plan:
    """The shapes of the four parts (indices into the *_SHAPES tuples)."""

    body: int
    head: int
    wings: int
    tail: int


@dataclasses.dataclass(frozen=True)
class Species:
    """A target class: a body plan and the appearance of each part (in PARTS order)."""

    plan: Plan
    looks: Tuple[Appearance, Appearance, Appearance, Appearance]

    def name(self) -> str:
        shapes = (f"{BODY_SHAPES[self.plan.body]}.{HEAD_SHAPES[self.plan.head]}."
                  f"{WING_SHAPES[self.plan.wings]}.{TAIL_SHAPES[self.plan.tail]}")
        looks = "-".join(f"{part}:{COLOURS[look.colour]}.{TEXTURES[look.texture]}"
                         for part, look in zip(PARTS, self.looks))
        return f"{shapes}-{looks}"


@dataclasses.dataclass(frozen=True)
class SourceClass:
    """A source class: the body's colour and the head's (different) colour; the rest of each image
    (every shape and texture, the wings' and tail's colours) is drawn per instance."""

    body_colour: int
    head_colour: int

    def name(self) -> str:
        return f"body:{COLOURS[self.body_colour]}-head:{COLOURS[self.head_colour]}"


def source_classes() -> List[SourceClass]:
    """Every ordered pair of different (body, head) colours: 8 x 7 = 56 classes, fixed order."""
    return [SourceClass(body, head) for body, head in itertools.product(range(len(COLOURS)), repeat=2)
            if body != head]


def _random_look(rng: np.random.Generator, texture: int, colour: Optional[int] = None) -> Appearance:
    return Appearance(int(rng.integers(len(COLOURS))) if colour is None else colour, texture)


def target_species(task_seed: int, genera: int = 8, species_per_genus: int = 8,
                   sister_pairs: bool = True) -> List[Species]:
    """The target task's classes, drawn from `task_seed` (class index = list position).

    Each genus is a distinct body plan with a pool of four appearances: four different colours, each
    of the four textures once. Its species are distinct permutations of the pool over the parts. With
    `sister_pairs` they come in pairs that share the body's and the head's appearance and swap the
    wings' and the tail's, so neither the body's nor the head's look tells sisters apart; without,
    any permutations.
    """
    plans = [Plan(*p) for p in itertools.product(range(len(BODY_SHAPES)), range(len(HEAD_SHAPES)),
                                                  range(len(WING_SHAPES)), range(len(TAIL_SHAPES)))]
    permutations = list(itertools.permutations(range(len(PARTS))))
    if genera > len(plans) or species_per_genus > len(permutations):
        raise ValueError(f"at most {len(plans)} genera of {len(permutations)} species each exist")
    if sister_pairs and species_per_genus % 2:
        raise ValueError(f"sister species come in pairs: species_per_genus must be even, not {species_per_genus}")
    # (body, head) of a sister pair: ordered pairs of pool positions; wings and tail take the other two
    fronts = list(itertools.permutations(range(len(PARTS)), 2))
    rng = np.random.default_rng([task_seed, 2026])
    species = []
    for plan_index in rng.choice(len(plans), size=genera, replace=False):
        colours = rng.choice(len(COLOURS), size=len(PARTS), replace=False)
        textures = rng.permutation(len(TEXTURES))
        pool = [Appearance(int(colour), int(texture)) for colour, texture in zip(colours, textures)]
        if sister_pairs:
            orders = []
            for pick in sorted(rng.choice(len(fronts), size=species_per_genus // 2, replace=False)):
                body, head = fronts[pick]
                wings, tail = (i for i in range(len(PARTS)) if i not in (body, head))
                orders += [(body, head, wings, tail), (body, head, tail, wings)]
        else:
            orders = [permutations[order] for order in
                      sorted(rng.choice(len(permutations), size=species_per_genus, replace=False))]
        for order in orders:
            species.append(Species(plans[int(plan_index)], tuple(pool[i] for i in order)))
    return species


def sample_source(cls: SourceClass, rng: np.random.Generator) -> Species:
    """One instance's body plan and appearances for a source class."""
    plan = Plan(*(int(rng.integers(len(shapes))) for shapes in (BODY_SHAPES, HEAD_SHAPES, WING_SHAPES, TAIL_SHAPES)))
    textures = [int(t) for t in rng.integers(len(TEXTURES), size=len(PARTS))]
    colours = [cls.body_colour, cls.head_colour, None, None]
    return Species(plan, tuple(_random_look(rng, texture, colour) for texture, colour in zip(textures, colours)))


# ----------------------------------------------------------------------------------- drawing

def _triangle(x: np.ndarray, y: np.ndarray, half_width: float) -> np.ndarray:
    """Isosceles triangle from x = -1 (base, half-width `half_width`) to its apex at x = 1."""
    width = half_width * (1 - x) / 2
    return np.maximum(np.abs(y) - width, np.abs(x) - 1)


def _part_field(part: str, shape: str, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Signed field of a part in its own frame, x pointing away from the body."""
    if part == "body":
        if shape == "ellipse":
            return np.sqrt(x * x + (y / 0.58) ** 2) - 1
        if shape == "egg":  # its width reaches 0 at x = -1/0.3, far outside: the field is inf there
            with np.errstate(divide="ignore"):
                return np.sqrt(x * x + (y / (0.58 * (1 + 0.3 * x))) ** 2) - 1
        if shape == "box":
            return np.maximum(np.abs(x) - 0.92, np.abs(y) - 0.52)
        if shape == "diamond":
            return np.abs(x) + np.abs(y) / 0.62 - 1.05
    if part == "head":
        if shape == "circle":
            return np.sqrt(x * x + y * y) - 1
        if shape == "triangle":
            return _triangle(x, y, 1.3)
        if shape == "square":
            return np.maximum(np.abs(x), np.abs(y)) - 0.85
    if part == "wings":
        if shape == "round":
            return np.sqrt(x * x + (y / 0.5) ** 2) - 1
        if shape == "pointed":
            return _triangle(x, y, 1.1)
        if shape == "broad":
            return np.maximum(np.abs(x) - 0.9, np.abs(y) - 0.6)
    if part == "tail":
        if shape == "fan":
            return _triangle(-x, y, 1.6)  # widest at its far end
        if shape == "fork":
            prong = lambda side: np.maximum(np.abs(y - side * 0.55 * (x + 1) / 2) - 0.2, np.abs(x) - 1)  # noqa: E731
            return np.minimum(prong(1), prong(-1))
        if shape == "spike":
            return _triangle(x, y, 0.55)
    raise ValueError(f"{part} {shape}")


def _texture(kind: str, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """0..1 weight of the texture colour at image-unit coordinates (u, v) of the part's frame."""
    phase = 2 * np.pi / TEXTURE_PERIOD
    if kind == "solid":
        return np.zeros_like(u)
    if kind == "stripes":
        wave = np.sin(phase * u)
    elif kind == "checker":
        wave = 4 * np.sin(phase * u) * np.sin(phase * v)
    elif kind == "dots":
        du = np.mod(u / TEXTURE_PERIOD, 1.0) - 0.5
        dv = np.mod(v / TEXTURE_PERIOD, 1.0) - 0.5
        wave = (0.3 - np.sqrt(du * du + dv * dv)) * 10
    else:
        raise ValueError(kind)
    return np.clip(0.5 + 2.5 * wave, 0.0, 1.0)


def _jitter(colour: np.ndarray, rng: np.random.Generator, amount: float) -> np.ndarray:
    return np.clip(colour * rng.uniform(1 - amount, 1 + amount) + rng.normal(0, 10, 3), 0, 255)


# Where each part sits in the body's frame (units of the body's scale), its size relative to
# the body, and the direction its own x axis points (away from the body).
_LAYOUT = {"head": ((1.05, 0.0), 0.42, 0.0), "tail": ((-1.2, 0.0), 0.5, np.pi),
           "wing+": ((-0.05, 0.62), 0.55, np.pi / 2), "wing-": ((-0.05, -0.62), 0.55, -np.pi / 2)}


def render(creature: Species, size: int, rng: np.random.Generator) -> np.ndarray:
    """Draw one instance of `creature` as a (size, size, 3) uint8 image."""
    pixel, grid_x, grid_y = pixel_grid(size)
    image = lit_gradient(grid_x, grid_y, rng, 50, 190)

    def paint(field: np.ndarray, scale: float, look: Appearance, u: np.ndarray, v: np.ndarray,
              light: float) -> None:
        nonlocal image
        cover = coverage(field, scale, pixel)[..., None]
        offset = rng.uniform(0, TEXTURE_PERIOD, 2)
        mix = _texture(TEXTURES[look.texture], u * scale + offset[0], v * scale + offset[1])[..., None]
        base = _jitter(PALETTE[look.colour], rng, 0.12) * light
        image = image + cover * (base * (1 - mix * (1 - TEXTURE_SHADE)) - image)

    # Clutter: loose parts painted with random appearances, behind the creature (CLUTTER).
    shapes_of = {"head": HEAD_SHAPES, "wings": WING_SHAPES}
    for _ in range(rng.integers(CLUTTER.fewest, CLUTTER.most + 1)):
        distance = rng.uniform(CLUTTER.nearest, CLUTTER.farthest)
        centre = distance * np.array([np.cos(a := rng.uniform(0, 2 * np.pi)), np.sin(a)])
        scale = rng.uniform(CLUTTER.smallest, CLUTTER.largest)
        u, v = frame(grid_x, grid_y, centre, scale, rng.uniform(0, 2 * np.pi))
        # one kind of part draws nothing here, so candidate 5's bytes come out unchanged
        part = CLUTTER.parts[int(rng.integers(len(CLUTTER.parts)))] if len(CLUTTER.parts) > 1 else CLUTTER.parts[0]
        shapes = shapes_of[part]
        paint(_part_field(part, shapes[rng.integers(len(shapes))], u, v), scale,
              _random_look(rng, int(rng.integers(len(TEXTURES)))), u, v, 1.0)

    scale = rng.uniform(0.34, 0.44)
    centre = rng.uniform(-0.22, 0.22, 2)
    angle = rng.uniform(0, 2 * np.pi)
    light = 0.85 + rng.uniform(0, 0.25)
    plan = creature.plan
    body_look, head_look, wing_look, tail_look = creature.looks
    cos, sin = np.cos(angle), np.sin(angle)

    def attached(name: str, shape: str, part: str, look: Appearance) -> None:
        (px, py), relative, direction = _LAYOUT[name]
        where = centre + scale * np.array([cos * px - sin * py, sin * px + cos * py])
        part_scale = scale * relative * rng.uniform(0.92, 1.08)
        u, v = frame(grid_x, grid_y, where, part_scale, angle + direction + rng.uniform(-0.15, 0.15))
        paint(_part_field(part, shape, u, v), part_scale, look, u, v, light)

    for name in ("wing+", "wing-"):
        attached(name, WING_SHAPES[plan.wings], "wings", wing_look)
    attached("tail", TAIL_SHAPES[plan.tail], "tail", tail_look)
    u, v = frame(grid_x, grid_y, centre, scale, angle)
    paint(_part_field("body", BODY_SHAPES[plan.body], u, v), scale, body_look, u, v, light)
    attached("head", HEAD_SHAPES[plan.head], "head", head_look)

    image = image + rng.normal(0, 5, image.shape)
    return np.clip(image, 0, 255).astype(np.uint8)


def instance_rng(seed: int, task: str, split: str, index: int) -> np.random.Generator:
    """Independent, reproducible random stream for one image (order-free, so splits can't collide)."""
    task_id = {"source": 11, "target": 12}[task]
    split_id = {"train": 1, "test": 2, "validation": 3}[split]
    return np.random.default_rng([seed, task_id, split_id, index])

