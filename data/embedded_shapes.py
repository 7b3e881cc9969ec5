"""TFDS builder of the embedded offline dataset (see shapes_render.py for what it draws).

Registered with TFDS as `embedded_shapes`, so it flows through the same loading code as the
paper's datasets: `tfds.builder("embedded_shapes/target").download_and_prepare()` generates
it locally (no download) in TFDS's data dir. Configs:

- `source`: 100 classes (20 genera x 5 species), 100 train + 10 test images each:
  the pre-training task, standing in for ImageNet.
- `target`: 64 classes (8 genera x 8 species, disjoint genera), 40 train + 40 test each:
  the fine-grained fine-tuning task, standing in for CUB-200 (about 30 train images a class).
- `target_seed1`, `target_seed2`: the same design drawn with other task seeds: 8 other genera
  (neither the source's nor `target`'s), the same source, so one pre-trained backbone serves all.

Each target config has a `validation` split of 20 new images a class, drawn from a random stream
of its own, so `target`'s train and test images are those of 1.0.0.
"""
from __future__ import annotations

import dataclasses
from typing import Dict, Iterator, List, Tuple

import tensorflow_datasets as tfds

from data import shapes_render


@dataclasses.dataclass
class EmbeddedShapesConfig(tfds.core.BuilderConfig):
    """One task of the embedded dataset; everything that shapes its bytes is here."""

    task: str = "target"  # "source" or "target"
    seed: int = 0  # draws the taxonomy and the instances
    task_seed: int = 0  # another draw of the target's classes (the source's stay)
    image_size: int = 64
    train_per_class: int = 40
    test_per_class: int = 40
    # The taxonomy (both tasks are cut from one seeded list of genera, hence disjoint).
    source_genera: int = 20
    source_species: int = 5
    target_genera: int = 8
    target_species: int = 8
    validation_per_class: int = 0  # new images a class in a "validation" split (0: no such split)

    def species(self) -> List[shapes_render.Species]:
        source, target = shapes_render.make_taxonomy(
            self.seed, self.source_genera, self.source_species, self.target_genera,
            self.target_species, self.task_seed)
        return source if self.task == "source" else target


# target configs: "target" (seed 0), "target_seed1" ... (4 is left out: its draw shares classes with another)
TASK_SEEDS = (0, 1, 2, 3, 5, 6)


def target_config_name(task_seed: int) -> str:
    return "target" if task_seed == 0 else f"target_seed{task_seed}"


def split_sizes(config) -> Dict[str, int]:
    """Images a class in each split an embedded builder's config has (its train_per_class,
    test_per_class and validation_per_class)."""
    sizes = {"train": config.train_per_class, "test": config.test_per_class}
    if config.validation_per_class:
        sizes["validation"] = config.validation_per_class
    return sizes


def _class_name(species: shapes_render.Species) -> str:
    names = shapes_render
    return (f"{names.SHAPES[species.shape]}-{names.PATTERNS[species.pattern]}"
            f"-f{species.frequency}-{names.PARTS[species.part]}"
            f"-c{species.body_colour}.{species.pattern_colour}.{species.part_colour}")


class EmbeddedShapes(tfds.core.GeneratorBasedBuilder):
    """Procedural fine-grained "species" images, generated locally and deterministically."""

    VERSION = tfds.core.Version("1.1.0")
    RELEASE_NOTES = {"1.0.0": "First release.",
                     "1.1.0": "Target configs: a validation split of 20 new images a class; a second draw "
                              "(target_seed1). Train and test of source and target unchanged."}
    BUILDER_CONFIGS = [
        EmbeddedShapesConfig(name="source", task="source", train_per_class=100, test_per_class=10,
                             description="Pre-training task: 100 classes, disjoint from target."),
    ] + [
        EmbeddedShapesConfig(name=target_config_name(seed), task="target", task_seed=seed, train_per_class=40,
                             test_per_class=40, validation_per_class=20,
                             description=f"Fine-grained target task (task seed {seed}): 64 classes in 8 genera.")
        for seed in TASK_SEEDS
    ]

    def _info(self) -> tfds.core.DatasetInfo:
        config: EmbeddedShapesConfig = self.builder_config
        size = config.image_size
        return self.dataset_info_from_configs(
            description=__doc__,
            features=tfds.features.FeaturesDict({
                "image": tfds.features.Image(shape=(size, size, 3)),
                "label": tfds.features.ClassLabel(names=[_class_name(s) for s in config.species()]),
            }),
            supervised_keys=("image", "label"),
        )

    def _split_generators(self, dl_manager: tfds.download.DownloadManager):
        del dl_manager  # nothing to download
        return {split: self._generate_examples(split) for split in split_sizes(self.builder_config)}

    def _generate_examples(self, split: str) -> Iterator[Tuple[str, dict]]:
        config: EmbeddedShapesConfig = self.builder_config
        per_class = split_sizes(config)[split]
        for label, species in enumerate(config.species()):
            for instance in range(per_class):
                index = label * per_class + instance
                rng = shapes_render.instance_rng(config.seed + 1000 * config.task_seed, config.task, split, index)
                image = shapes_render.render(species, config.image_size, rng)
                yield f"{label:04d}_{instance:05d}", {"image": image, "label": label}
