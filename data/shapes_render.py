"""Procedural "species" images for the embedded offline dataset (pure NumPy, deterministic).

Every image shows one creature on a cluttered background: a body of some *shape*, filled with a
*pattern* in two colours, with a small *part* (a head) of a third colour. A class is a species: a
fixed (shape, pattern, frequency, part, body colour, pattern colour, part colour). Species come in
genera that share shape, pattern, frequency and part, so telling species of one genus apart takes
colour *and* texture, as telling bird species apart does (CUB-200). The source task (pre-training,
standing in for ImageNet) and the target task (fine-tuning, standing in for CUB-200) use disjoint
genera of the same visual vocabulary, so a backbone pre-trained on the source has learnt features
the target needs. Class attributes are invariant to flips and rotations (the model's augmentation);
every instance varies in position, scale, rotation, lighting, clutter and noise.
"""
from __future__ import annotations

import dataclasses
from typing import List, Tuple

import numpy as np

SHAPES = ("ellipse", "square", "triangle", "diamond", "hexagon", "cross", "ring")
PATTERNS = ("solid", "stripes", "checker", "dots", "rings", "waves")
PARTS = ("circle", "triangle", "square")
FREQUENCIES = (2.0, 3.5)  # pattern periods across the body
# Named colours (RGB); neighbours like red/orange or blue/cyan make species hard to tell apart.
PALETTE = np.array([
    (220, 40, 40), (240, 130, 30), (235, 210, 50), (140, 210, 60), (40, 160, 70),
    (40, 190, 200), (50, 90, 220), (130, 60, 200), (220, 70, 170), (240, 240, 235),
    (35, 35, 40), (140, 90, 50)], dtype=np.float32)


@dataclasses.dataclass(frozen=True)
class Species:
    """The attributes that define one class (indices into the tuples above)."""

    shape: int
    pattern: int
    frequency: int
    part: int
    body_colour: int
    pattern_colour: int
    part_colour: int


def _genera(rng: np.random.Generator) -> List[Tuple[int, int, int, int]]:
    """All (shape, pattern, frequency, part) genera, in a seeded random order."""
    genera = [(s, p, f, q) for s in range(len(SHAPES)) for p in range(len(PATTERNS))
              for f in range(len(FREQUENCIES)) for q in range(len(PARTS))]
    order = rng.permutation(len(genera))
    return [genera[i] for i in order]


def make_taxonomy(seed: int, source_genera: int, source_species: int, target_genera: int,
                  target_species: int, task_seed: int = 0) -> Tuple[List[Species], List[Species]]:
    """Source and target species lists, class index = list position; their genera are disjoint.

    `seed` draws the taxonomy (the same seed, the same classes); `*_genera` and `*_species` are each
    task's genera and species per genus. `task_seed` draws another target (0: the first) from genera
    that neither the source nor the first draw uses, its species' colours afresh; the source stays
    the same, so a backbone pre-trained on it serves every draw.
    """
    rng = np.random.default_rng(seed)
    genera = _genera(rng)
    if source_genera + target_genera > len(genera):
        raise ValueError(f"at most {len(genera)} genera exist")

    def species_of(genus: Tuple[int, int, int, int], count: int, rng: np.random.Generator) -> List[Species]:
        chosen: set = set()
        while len(chosen) < count:
            colours = rng.choice(len(PALETTE), size=3, replace=False)
            if PATTERNS[genus[1]] == "solid":
                colours[1] = colours[0]  # no pattern: the pattern colour is the body colour
            chosen.add(tuple(int(c) for c in colours))
        return [Species(*genus, *colours) for colours in sorted(chosen)]

    target = [s for g in genera[:target_genera] for s in species_of(g, target_species, rng)]
    source = [s for g in genera[target_genera:target_genera + source_genera]
              for s in species_of(g, source_species, rng)]
    if task_seed:
        unused = genera[target_genera + source_genera:]
        if target_genera > len(unused):
            raise ValueError(f"only {len(unused)} genera are left for another draw of the target")
        draw = np.random.default_rng([seed, task_seed, 2026])
        target = [s for i in sorted(draw.choice(len(unused), size=target_genera, replace=False))
                  for s in species_of(unused[int(i)], target_species, draw)]
    return source, target


def _shape_field(kind: str, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Signed field of a unit-size shape in its own frame: < 0 inside, ~distance outside."""
    if kind in ("ellipse", "circle"):
        return np.sqrt((u / 1.0) ** 2 + (v / 0.72) ** 2) - 1.0 if kind == "ellipse" \
            else np.sqrt(u * u + v * v) - 1.0
    if kind == "square":
        return np.maximum(np.abs(u), np.abs(v)) - 0.85
    if kind == "triangle":
        return np.maximum(np.abs(u) * 0.866 + v * 0.5, -v) - 0.55
    if kind == "diamond":
        return (np.abs(u) + np.abs(v)) * 0.75 - 0.85
    if kind == "hexagon":
        return np.maximum(np.abs(u) * 0.866 + np.abs(v) * 0.5, np.abs(v)) - 0.85
    if kind == "cross":
        arm_a = np.maximum(np.abs(u) - 0.38, np.abs(v) - 1.0)
        arm_b = np.maximum(np.abs(u) - 1.0, np.abs(v) - 0.38)
        return np.minimum(arm_a, arm_b)
    if kind == "ring":
        return np.abs(np.sqrt(u * u + v * v) - 0.7) - 0.3
    raise ValueError(kind)


def _pattern_field(kind: str, u: np.ndarray, v: np.ndarray, frequency: float) -> np.ndarray:
    """Smooth 0..1 mix weight of the pattern colour at body-frame coordinates (u, v)."""
    two_pi_f = 2 * np.pi * frequency / 2.0  # `frequency` periods across the body (width 2)
    if kind == "solid":
        return np.zeros_like(u)
    if kind == "stripes":
        wave = np.sin(two_pi_f * u)
    elif kind == "checker":
        wave = np.sin(two_pi_f * u) * np.sin(two_pi_f * v) * 2.0
    elif kind == "dots":
        du = np.mod(u * frequency / 2.0, 1.0) - 0.5
        dv = np.mod(v * frequency / 2.0, 1.0) - 0.5
        wave = (0.3 - np.sqrt(du * du + dv * dv)) * 8.0
    elif kind == "rings":
        wave = np.sin(two_pi_f * np.sqrt(u * u + v * v) * 1.3)
    elif kind == "waves":
        wave = np.sin(two_pi_f * (u + 0.25 * np.sin(two_pi_f * v)))
    else:
        raise ValueError(kind)
    return np.clip(0.5 + 2.5 * wave, 0.0, 1.0)


def frame(grid_x: np.ndarray, grid_y: np.ndarray, centre, scale: float,
          angle: float) -> Tuple[np.ndarray, np.ndarray]:
    """Coordinates of the image grid in a rotated, scaled object frame."""
    cos, sin = np.cos(angle), np.sin(angle)
    dx, dy = grid_x - centre[0], grid_y - centre[1]
    return (cos * dx + sin * dy) / scale, (-sin * dx + cos * dy) / scale


def coverage(field: np.ndarray, scale: float, pixel: float) -> np.ndarray:
    """Anti-aliased 0..1 coverage of a shape from its field (one pixel of soft edge)."""
    return np.clip(0.5 - field * scale / pixel, 0.0, 1.0)


def _jitter(colour: np.ndarray, rng: np.random.Generator, amount: float) -> np.ndarray:
    return np.clip(colour * rng.uniform(1 - amount, 1 + amount) + rng.normal(0, 12, 3), 0, 255)


def pixel_grid(size: int) -> Tuple[float, np.ndarray, np.ndarray]:
    """(pixel width, x, y) of a size x size image spanning [-1, 1] in image units."""
    pixel = 2.0 / size
    axis = (np.arange(size, dtype=np.float32) + 0.5) * pixel - 1.0
    grid_x, grid_y = np.meshgrid(axis, axis)
    return pixel, grid_x, grid_y


def lit_gradient(grid_x: np.ndarray, grid_y: np.ndarray, rng: np.random.Generator, low: float,
                 high: float) -> np.ndarray:
    """A background lit as a gradient between two random colours with channels in [low, high)."""
    tint = rng.uniform(low, high, size=(2, 3)).astype(np.float32)
    ramp_angle = rng.uniform(0, 2 * np.pi)
    ramp = 0.5 + 0.5 * (np.cos(ramp_angle) * grid_x + np.sin(ramp_angle) * grid_y)
    return tint[0] * ramp[..., None] + tint[1] * (1 - ramp[..., None])


def render(species: Species, size: int, rng: np.random.Generator) -> np.ndarray:
    """Draw one instance of `species` as a (size, size, 3) uint8 image."""
    pixel, grid_x, grid_y = pixel_grid(size)

    # Background: a lit gradient between two muted colours plus a faint texture.
    image = lit_gradient(grid_x, grid_y, rng, 60, 200)
    texture_f = rng.uniform(2, 6)
    image += 18 * np.sin(texture_f * (grid_x * rng.normal() + grid_y * rng.normal()) * np.pi)[..., None]

    # Clutter: distractor shapes in random colours and patterns, some behind the creature.
    for _ in range(rng.integers(1, 4)):
        u, v = frame(grid_x, grid_y, rng.uniform(-0.9, 0.9, 2), rng.uniform(0.12, 0.3),
                      rng.uniform(0, 2 * np.pi))
        cover = coverage(_shape_field(SHAPES[rng.integers(len(SHAPES))], u, v), 0.2, pixel)
        image += cover[..., None] * (_jitter(PALETTE[rng.integers(len(PALETTE))], rng, 0.3) - image)

    # The creature: body with its pattern, and the part attached at the body's front.
    scale = rng.uniform(0.38, 0.58)
    centre = rng.uniform(-0.3, 0.3, 2)
    angle = rng.uniform(0, 2 * np.pi)
    u, v = frame(grid_x, grid_y, centre, scale, angle)
    body = coverage(_shape_field(SHAPES[species.shape], u, v), scale, pixel)
    phase = rng.uniform(-1, 1, 2)
    mix = _pattern_field(PATTERNS[species.pattern], u + phase[0], v + phase[1],
                         FREQUENCIES[species.frequency])[..., None]
    light = rng.uniform(0.2)  # shared lighting change across the creature's colours
    body_colour = _jitter(PALETTE[species.body_colour], rng, 0.15) * (0.9 + light)
    pattern_colour = _jitter(PALETTE[species.pattern_colour], rng, 0.15) * (0.9 + light)
    fill = body_colour * (1 - mix) + pattern_colour * mix
    image += body[..., None] * (fill - image)

    part_scale = scale * rng.uniform(0.3, 0.4)
    part_centre = centre + scale * 1.05 * np.array([np.cos(angle), np.sin(angle)])
    pu, pv = frame(grid_x, grid_y, part_centre, part_scale, angle + rng.uniform(-0.4, 0.4))
    part = coverage(_shape_field(PARTS[species.part], pu, pv), part_scale, pixel)
    image += part[..., None] * (_jitter(PALETTE[species.part_colour], rng, 0.15) - image)

    image += rng.normal(0, 6, image.shape)
    return np.clip(image, 0, 255).astype(np.uint8)


def instance_rng(seed: int, task: str, split: str, index: int) -> np.random.Generator:
    """Independent, reproducible random stream for one image (order-free, so splits can't collide)."""
    task_id = {"source": 1, "target": 2}[task]
    split_id = {"train": 1, "test": 2, "validation": 3}[split]
    return np.random.default_rng([seed, task_id, split_id, index])
