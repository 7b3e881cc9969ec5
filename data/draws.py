"""Few-shot draws of a TFDS dataset, "as a device meets them": N images a class, named
`<base>_shot<N>_seed<S>` (e.g. fashion_mnist_shot10_seed0), for the bases in BASES.

A draw is a view, by index, over its base's stored training split (in stored order: its shards one
after another); the base is prepared once and never copied. Its splits:
- "train": N images of each class;
- "validation": VALIDATION_PER_CLASS more of each class, from the training split as well (so a run's
  `--validation auto` validates on them, "fresh"), disjoint from the draw's train;
- "test": the base's own test split, whole.
Each class's training images are put in one fixed, seeded order (PERMUTATION_SEED, the same for every
draw); draw S takes the block [S*(N+V), (S+1)*(N+V)) of it, train the first N, validation the next V.
So draws of one N with different seeds share no image, by construction; a draw that runs past a
class's images is refused. (Draws of different N overlap: shot5_seed0 is a part of shot10_seed0.)
"""
from __future__ import annotations

import dataclasses
import os
import re
from typing import Dict, Optional, Tuple

import numpy as np
import tensorflow as tf
import tensorflow_datasets as tfds

from elastic_trainer.command_line import UserError

BASES = ("fashion_mnist",)  # the registered datasets draws are taken from (a TFDS dataset with a ClassLabel)
VALIDATION = "validation"
VALIDATION_PER_CLASS = 20
PERMUTATION_SEED = 0  # fixes each class's order once for all draws (never the run's --seed)
NAME_PATTERN = "<base>_shot<N>_seed<S>"
# Canonical numbers only (shot10, not shot010): one draw, one name.
_NAME = re.compile(r"(?P<base>[a-z0-9_]+?)_shot(?P<shots>[1-9][0-9]*)_seed(?P<seed>0|[1-9][0-9]*)")
_BATCH = 8192  # records read at a time
_LABELS: Dict[Tuple[str, int], np.ndarray] = {}  # training labels by (prepared split's first file, count)


@dataclasses.dataclass(frozen=True)
class Draw:
    """Draw `seed` of `shots` training images a class from dataset `base`."""

    base: str
    shots: int
    seed: int

    @property
    def name(self) -> str:
        return f"{self.base}_shot{self.shots}_seed{self.seed}"

    @property
    def block(self) -> Tuple[int, int]:
        """The draw's positions in each class's fixed order: [start, stop)."""
        per_draw = self.shots + VALIDATION_PER_CLASS
        return self.seed * per_draw, (self.seed + 1) * per_draw


def parse(dataset_name: str) -> Optional[Draw]:
    """The draw a dataset name means, or None when it names none."""
    match = _NAME.fullmatch(dataset_name)
    if match is None or match["base"] not in BASES:
        return None
    return Draw(match["base"], int(match["shots"]), int(match["seed"]))


def _train_records(builder: tfds.core.DatasetBuilder) -> tf.data.Dataset:
    """The serialized examples of the base's stored training split, its shards one after another."""
    if builder.info.file_format != tfds.core.FileFormat.TFRECORD:
        raise UserError(f"few-shot draws read TFRecord files; {builder.name} is stored as {builder.info.file_format}")
    return tf.data.TFRecordDataset([os.fspath(path) for path in builder.info.splits["train"].filepaths])


def train_labels(builder: tfds.core.DatasetBuilder) -> np.ndarray:
    """Labels of the base's stored training split in stored order, read once a process: parsed from
    the records in batches with TFDS's own example spec, the label alone (about 0.2 s for Fashion-MNIST's
    60,000; TFDS's reader, example by example, takes about 3 s)."""
    split = builder.info.splits["train"]
    key = (os.fspath(split.filepaths[0]), int(split.num_examples))
    if key not in _LABELS:
        label_key = builder.info.supervised_keys[1]
        spec = {label_key: builder.info.features.tf_example_spec[label_key]}
        parse = lambda records: tf.io.parse_example(records, spec)[label_key]  # noqa: E731
        batches = _train_records(builder).batch(_BATCH).map(parse)
        labels = np.concatenate([batch for batch in batches.as_numpy_iterator()])
        if len(labels) != key[1]:
            raise RuntimeError(f"{builder.name}: read {len(labels)} training labels, its info counts {key[1]}")
        _LABELS[key] = labels
    return _LABELS[key]


def positions(builder: tfds.core.DatasetBuilder, draw: Draw) -> Dict[str, np.ndarray]:
    """{"train", "validation": the draw's positions in the stored training split, ascending};
    UserError when its block runs past a class's images."""
    labels = train_labels(builder)
    names = builder.info.features[builder.info.supervised_keys[1]].names
    members = [np.flatnonzero(labels == label) for label in range(len(names))]
    start, stop = draw.block
    smallest = min(range(len(names)), key=lambda label: len(members[label]))
    if stop > len(members[smallest]):
        per_draw = draw.shots + VALIDATION_PER_CLASS
        seeds = len(members[smallest]) // per_draw
        fits = (f"with N={draw.shots} the seeds 0 to {seeds - 1} fit" if seeds else
                f"N={draw.shots} does not fit at all")
        raise UserError(f"{draw.name} runs past the {len(members[smallest])} training images of class "
                        f"{names[smallest]!r}: draw S takes images S*(N+{VALIDATION_PER_CLASS}) to "
                        f"(S+1)*(N+{VALIDATION_PER_CLASS})-1 of each class, so {fits}")
    train, validation = [], []
    for label, indices in enumerate(members):
        order = np.random.default_rng([PERMUTATION_SEED, label]).permutation(indices)
        train.append(order[start:start + draw.shots])
        validation.append(order[start + draw.shots:stop])
    return {"train": np.sort(np.concatenate(train)), "validation": np.sort(np.concatenate(validation))}


def split_sizes(builder: tfds.core.DatasetBuilder, draw: Draw) -> Dict[str, int]:
    """Examples in each split of the draw (UserError for a draw past a class's images)."""
    chosen = positions(builder, draw)
    return {"train": len(chosen["train"]), "test": int(builder.info.splits["test"].num_examples),
            VALIDATION: len(chosen[VALIDATION])}


def view(builder: tfds.core.DatasetBuilder, draw: Draw, split: str) -> tf.data.Dataset:
    """The draw's "train" or "validation" split: (encoded image, label) examples of the base's stored
    training split at the draw's positions, in stored order. The records are picked before TFDS
    deserializes them (its reader would parse all 60,000 Fashion-MNIST examples, about 3 s, for 100)."""
    wanted = np.zeros(int(builder.info.splits["train"].num_examples), bool)
    wanted[positions(builder, draw)[split]] = True
    mask = tf.constant(wanted)

    def pick(number: tf.Tensor, records: tf.Tensor) -> tf.Tensor:  # batch `number` of _BATCH records
        start = number * _BATCH
        return tf.boolean_mask(records, mask[start:start + tf.shape(records, out_type=tf.int64)[0]])

    # Picked a batch at a time: a filter, record by record, takes about 1.5 s for Fashion-MNIST.
    picked = _train_records(builder).batch(_BATCH).enumerate().map(pick).unbatch()
    image_key, label_key = builder.info.supervised_keys
    decoders = {image_key: tfds.decode.SkipDecoding()}  # decoded with the others' (data._decode_and_resize)

    def deserialize(record: tf.Tensor) -> Tuple[tf.Tensor, tf.Tensor]:
        example = builder.info.features.deserialize_example(record, decoders=decoders)
        return example[image_key], example[label_key]

    return picked.map(deserialize)
