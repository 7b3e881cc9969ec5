"""TFDS builder of the embedded label-space transfer task (what it draws: parts_render.py).

Registered with TFDS as `embedded_parts`; `tfds.builder("embedded_parts/target")
.download_and_prepare()` generates it locally (no download). Configs:

- `source`: 56 classes (the body's colour x the head's colour), 160 train + 15 test images
  each: the pre-training task, standing in for ImageNet.
- `target`: 64 classes (8 genera x 8 species; a species is an arrangement of its genus's four
  appearances over the four parts; sister species share the body's and head's looks and swap the
  wings' and tail's), 15 train + 30 test each: the fine-grained task, standing in
  for CUB-200 (about 30 training images a class; these images are far simpler than birds, so
  candidate 7 of docs/benchmarks/regime_and_depth.md halves that). `target_seed1` to `target_seed4` are the same design drawn with other task seeds.
  Each target config also has a `validation` split of 20 new images a class (from a random
  stream of its own, so the train and test images are those of 8.0.0): enough to rank designs
  and pick epochs without taking images from the 15 a class that train.
"""
from __future__ import annotations

import dataclasses
from typing import Iterator, List, Tuple, Union

import tensorflow_datasets as tfds

from data import parts_render
from data.embedded_shapes import split_sizes, target_config_name

TASK_SEEDS = (0, 1, 2, 3, 4, 5, 6, 7, 8)  # target configs: "target" (seed 0), "target_seed1" ... "target_seed8"


@dataclasses.dataclass
class EmbeddedPartsConfig(tfds.core.BuilderConfig):
    """One task of the dataset; everything that shapes its bytes is here."""

    task: str = "target"  # "source" or "target"
    task_seed: int = 0  # draws the target's classes (the source's are fixed)
    seed: int = 0  # draws the instances
    image_size: int = 64
    train_per_class: int = 15
    test_per_class: int = 30
    genera: int = 8
    species_per_genus: int = 8
    sister_pairs: bool = True  # species in pairs that differ by the wings' and tail's looks (candidate 8)
    validation_per_class: int = 0  # new images a class in a "validation" split (0: no such split)

    def classes(self) -> List[Union[parts_render.SourceClass, parts_render.Species]]:
        if self.task == "source":
            return parts_render.source_classes()
        return parts_render.target_species(self.task_seed, self.genera, self.species_per_genus, self.sister_pairs)


class EmbeddedParts(tfds.core.GeneratorBasedBuilder):
    """Creatures made of parts; source and target label one vocabulary differently."""

    VERSION = tfds.core.Version("8.1.0")
    RELEASE_NOTES = {"1.0.0": "First release (candidate 1).",
                     "2.0.0": "Source classes: body shape, head shape and body colour (candidate 2).",
                     "3.0.0": "Textures in a darker shade of the part's colour (candidate 3).",
                     "4.0.0": "Source classes: the body's and the head's colours (candidate 4).",
                     "5.0.0": "Target: 30 training images a class instead of 50 (candidate 5).",
                     "6.0.0": "Busier backgrounds: 2-4 larger loose parts (candidate 6).",
                     "7.0.0": "Candidate 5's backgrounds; target: 15 training images a class (candidate 7).",
                     "8.0.0": "Target species in sister pairs: same body and head, wings and tail swapped (candidate 8).",
                     "8.1.0": "Target configs: a validation split of 20 new images a class; train and test unchanged."}
    BUILDER_CONFIGS = [
        EmbeddedPartsConfig(name="source", task="source", train_per_class=160, test_per_class=15,
                            description="Pre-training task: 56 (body colour, head colour) pairs."),
    ] + [
        EmbeddedPartsConfig(name=target_config_name(seed), task="target", task_seed=seed, validation_per_class=20,
                            description=f"Target task (task seed {seed}): 64 species, 8 genera.")
        for seed in TASK_SEEDS
    ]

    def _info(self) -> tfds.core.DatasetInfo:
        config: EmbeddedPartsConfig = self.builder_config
        size = config.image_size
        return self.dataset_info_from_configs(
            description=__doc__,
            features=tfds.features.FeaturesDict({
                "image": tfds.features.Image(shape=(size, size, 3)),
                "label": tfds.features.ClassLabel(names=[c.name() for c in config.classes()]),
            }),
            supervised_keys=("image", "label"),
        )

    def _split_generators(self, dl_manager: tfds.download.DownloadManager):
        del dl_manager  # nothing to download
        return {split: self._generate_examples(split) for split in split_sizes(self.builder_config)}

    def _generate_examples(self, split: str) -> Iterator[Tuple[str, dict]]:
        config: EmbeddedPartsConfig = self.builder_config
        per_class = split_sizes(config)[split]
        for label, cls in enumerate(config.classes()):
            for instance in range(per_class):
                index = label * per_class + instance
                rng = parts_render.instance_rng(config.seed + 1000 * config.task_seed, config.task, split, index)
                creature = parts_render.sample_source(cls, rng) if config.task == "source" else cls
                yield f"{label:04d}_{instance:05d}", {"image": parts_render.render(creature, config.image_size, rng),
                                                     "label": label}
