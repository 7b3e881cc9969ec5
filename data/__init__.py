"""Dataset registry: the paper's TFDS datasets, Fashion-MNIST (TFDS, prepared offline from local files when
there is no network: data/fashion_mnist.py) and its few-shot draws (data/draws.py), the embedded offline
datasets, image folders.

`load(...)` returns a batched `tf.data.Dataset` of (float32 images in 0..255 resized to input_size,
int labels); the model does its own preprocessing and augmentation. Training pipelines reshuffle
every epoch (the original code never shuffled).
"""
from __future__ import annotations

import contextlib
import dataclasses
import io
import logging
import math
import os
import socket
from typing import Callable, Dict, List, Optional, Tuple

import tensorflow as tf
import tensorflow_datasets as tfds

from data import draws, fashion_mnist
from data import embedded_parts, embedded_shapes  # noqa: F401  (register the embedded TFDS builders)
from elastic_trainer.command_line import UserError

# Decoded images of a split are cached in memory when they take less than this.
_CACHE_LIMIT_BYTES = 1 << 30
_SHUFFLE_BUFFER = 1024
# Fixed parallelism, autotuning off: deleting an iterator waits for the autotuning thread's sleep,
# which stretches epochs (docs/benchmarks/wall_clock.md, "Epochs stretched by tf.data's autotuning").
_PARALLEL_CALLS = max(1, min(4, os.cpu_count() or 1))
_PREFETCH_BATCHES = 2


@dataclasses.dataclass(frozen=True)
class DatasetSpec:
    """Where a dataset comes from.

    Attributes:
        tfds_name: TFDS builder name (with config), or "" for a user's image folder.
        download_hosts: hosts TFDS downloads from ("name", port 443, or "name:port"); empty when generated locally.
        description: one line for --help and the README.
        local: the download's files as found on this machine, prepared from instead of downloading.
    """

    tfds_name: str
    download_hosts: Tuple[str, ...]
    description: str
    local: Optional["LocalFiles"] = None


@dataclasses.dataclass(frozen=True)
class LocalFiles:
    """A download's files found on this machine (the same bytes, checked): prepared from, offline."""

    present: Callable[[], bool]
    missing: Callable[[], str]  # one line: what is missing where, and how to get it
    prepare: Callable[[tfds.core.DatasetBuilder], None]


DATASETS: Dict[str, DatasetSpec] = {
    "caltech_birds2011": DatasetSpec("caltech_birds2011", ("data.caltech.edu",),
                                     "CUB-200-2011 birds, 200 classes (download ~1.1 GB)"),
    "oxford_iiit_pet": DatasetSpec("oxford_iiit_pet", ("thor.robots.ox.ac.uk",),
                                   "Oxford-IIIT Pet, 37 classes (download ~800 MB)"),
    "stanford_dogs": DatasetSpec("stanford_dogs", ("vision.stanford.edu",),
                                 "Stanford Dogs, 120 classes (download ~780 MB)"),
    "embedded_shapes": DatasetSpec("embedded_shapes/target", (),
                                   "embedded offline fine-grained task, 64 classes (generated)"),
    "embedded_shapes_source": DatasetSpec("embedded_shapes/source", (),
                                          "embedded offline pre-training task, 100 classes"),
    **{f"embedded_shapes_seed{seed}": DatasetSpec(f"embedded_shapes/{embedded_shapes.target_config_name(seed)}", (),
                                                  f"embedded_shapes drawn with task seed {seed}")
       for seed in embedded_shapes.TASK_SEEDS if seed},
    "embedded_parts": DatasetSpec("embedded_parts/target", (),
                                  "embedded offline label-space task: 64 species, new arrangements of the "
                                  "source's parts, colours and textures (generated)"),
    "embedded_parts_source": DatasetSpec("embedded_parts/source", (),
                                         "embedded_parts' pre-training task, 56 classes"),
    **{f"embedded_parts_seed{seed}": DatasetSpec(f"embedded_parts/{embedded_parts.target_config_name(seed)}", (),
                                                 f"embedded_parts drawn with task seed {seed}")
       for seed in embedded_parts.TASK_SEEDS if seed},
    "fashion_mnist": DatasetSpec("fashion_mnist", (fashion_mnist.DOWNLOAD_HOST,),
                                 f"Fashion-MNIST, 10 classes of clothes, 28 px grey photos (TFDS; offline from "
                                 f"${fashion_mnist.SOURCE_VARIABLE} or Debian's {fashion_mnist.DEBIAN_PACKAGE}); "
                                 f"few-shot draws: fashion_mnist_shot<N>_seed<S>",
                                 LocalFiles(fashion_mnist.present, fashion_mnist.missing,
                                            fashion_mnist.prepare_offline)),
    "image_folder": DatasetSpec("", (), "your own photos: --data_dir ROOT with "
                                        "ROOT/train/<class>/*.jpg and ROOT/test/<class>/*.jpg "
                                        "(and optionally ROOT/validation/<class>/*.jpg)"),
}
# The names --dataset_name lists; the others (source tasks, redrawn task seeds, few-shot draws) are accepted too
LISTED = ("caltech_birds2011", "oxford_iiit_pet", "stanford_dogs", "fashion_mnist", "embedded_shapes", "embedded_parts",
          "image_folder")
SPLITS = ("train", "test")  # the splits every dataset provides
# A validation split is carved from "train" by held_out() (--validation carved) or stored by the
# dataset, in neither train nor test (--validation fresh; image folders: ROOT/validation/<class>/).
VALIDATION = "validation"
VALIDATION_MODES = ("auto", "fresh", "carved", "none")
DEFAULT_VAL_FRACTION = 0.1


def get_spec(dataset_name: str) -> DatasetSpec:
    """Registry entry for `dataset_name` (a draw's: its base's), or UserError listing the valid names."""
    draw = draws.parse(dataset_name)
    if dataset_name not in DATASETS and draw is None:
        raise UserError(f"unknown dataset {dataset_name!r}; choose one of: {', '.join(DATASETS)}, or a few-shot "
                        f"draw {draws.NAME_PATTERN} of {', '.join(draws.BASES)}")
    return DATASETS[draw.base if draw else dataset_name]


def accepted(dataset_name: str) -> bool:
    """Whether --dataset_name takes the name: the registry's and every few-shot draw's."""
    return dataset_name in DATASETS or draws.parse(dataset_name) is not None


def _reachable(hosts: Tuple[str, ...], timeout_s: float = 5.0) -> bool:
    """True when every host accepts a TCP connection (so a download can start)."""
    for host in hosts:
        name, _, port = host.partition(":")
        try:
            socket.create_connection((name, int(port or 443)), timeout=timeout_s).close()
        except OSError:
            return False
    return True


def _builder(dataset_name: str, data_dir: Optional[str]) -> tfds.core.DatasetBuilder:
    """The TFDS builder (not yet prepared) for a registered dataset."""
    spec = get_spec(dataset_name)
    if not spec.tfds_name:
        if not data_dir or not os.path.isdir(data_dir):
            raise UserError("the image_folder dataset needs --data_dir ROOT, a folder with "
                            "ROOT/train/<class>/<image> and ROOT/test/<class>/<image>")
        missing = [s for s in SPLITS if not os.path.isdir(os.path.join(data_dir, s))]
        if missing:
            raise UserError(f"--data_dir {data_dir} has no {' or '.join(missing)} folder; "
                            f"expected ROOT/train/<class>/<image> and ROOT/test/<class>/<image>")
        present = SPLITS + ((VALIDATION,) if os.path.isdir(os.path.join(data_dir, VALIDATION)) else ())
        empty = [f"{split}/{name}" for split in present for name in sorted(os.listdir(os.path.join(data_dir, split)))
                 if os.path.isdir(os.path.join(data_dir, split, name))
                 and not os.listdir(os.path.join(data_dir, split, name))]
        if empty:
            raise UserError(f"--data_dir {data_dir}: the class folder(s) {', '.join(empty[:5])} hold no images; "
                            f"add images to every class folder or remove the empty ones")
        return tfds.folder_dataset.ImageFolder(data_dir)
    with quiet_tfds(not spec.download_hosts):
        return tfds.builder(spec.tfds_name, data_dir=data_dir)


@contextlib.contextmanager
def quiet_tfds(generated: bool):
    """For a dataset this project generates offline (`generated`), TFDS's notices meant for
    downloads stay out of the user's log: "Variant folder ... has no dataset_info.json" (another
    config of the dataset is being written beside it) and "Downloading and preparing dataset
    Unknown size". Its errors still show; a real download's notices are left as they are."""
    if not generated:
        yield
        return
    absl = logging.getLogger("absl")
    level = absl.level
    absl.setLevel(logging.ERROR)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            yield
    finally:
        absl.setLevel(level)


def _prepared(builder: tfds.core.DatasetBuilder, dataset_name: str) -> bool:
    """Whether the dataset is on disk (an image folder always is). TFDS's check warns of a variant
    folder without its dataset_info.json (one being written, or another config's): quiet for the
    datasets this project generates, as in `_builder`."""
    if isinstance(builder, tfds.folder_dataset.ImageFolder):
        return True
    with quiet_tfds(not get_spec(dataset_name).download_hosts):
        return builder.is_prepared()


def availability_problem(dataset_name: str, data_dir: Optional[str] = None) -> Optional[str]:
    """None when the dataset is prepared or can be downloaded now; otherwise what is wrong and
    what to do, in one message (checked in seconds, before any long work)."""
    builder = _builder(dataset_name, data_dir)
    if _prepared(builder, dataset_name):
        return None
    spec = get_spec(dataset_name)
    if not spec.download_hosts or (spec.local and spec.local.present()) or _reachable(spec.download_hosts):
        return None
    if spec.local:
        return spec.local.missing()
    where = data_dir or os.environ.get("TFDS_DATA_DIR", "~/tensorflow_datasets")
    return (f"{dataset_name} is not prepared in {where} and cannot be downloaded: "
            f"{', '.join(spec.download_hosts)} is unreachable (network problem). Either run once "
            f"where there is a network and copy the prepared {where}/{spec.tfds_name} folder "
            f"here (then pass --data_dir), or download the archives by hand into "
            f"{where}/downloads/manual/ (see https://www.tensorflow.org/datasets/overview). "
            f"Offline, use --dataset_name embedded_shapes.")


def prepare(dataset_name: str, data_dir: Optional[str] = None) -> tfds.core.DatasetBuilder:
    """Download (or generate) and prepare a dataset once; later calls are instant. Offline, fails
    within seconds (availability_problem) instead of letting TFDS retry for minutes."""
    problem = availability_problem(dataset_name, data_dir)
    if problem:
        raise UserError(problem)
    builder, spec = _builder(dataset_name, data_dir), get_spec(dataset_name)
    if _prepared(builder, dataset_name):
        return builder
    if spec.local and spec.local.present():
        spec.local.prepare(builder)  # the files TFDS would download are here (checked): no network needed
        return builder
    generated = not spec.download_hosts
    if generated:
        logging.info("generating %s once into %s (offline, no download; later runs reuse it)", dataset_name,
                     builder.data_dir)
    with quiet_tfds(generated):
        builder.download_and_prepare()
    return builder


def num_classes(dataset_name: str, data_dir: Optional[str] = None) -> int:
    """Number of classes from the dataset's info (works offline, before any download)."""
    builder = _builder(dataset_name, data_dir)
    return int(builder.info.features["label"].num_classes)


def split_examples(dataset_name: str, split: str, data_dir: Optional[str] = None,
                   val_fraction: float = 0.0) -> Optional[int]:
    """Examples in `split` ("validation": the carved part when `val_fraction` > 0) of a dataset,
    prepared first if it is not yet (prepare); None when it has no such split."""
    splits = _split_sizes(dataset_name, prepare(dataset_name, data_dir))
    stored = "train" if split == VALIDATION and val_fraction > 0 else split
    if stored not in splits:
        return None
    total = splits[stored]
    return carved_count(total, split, val_fraction) if val_fraction > 0 else total


def _split_sizes(dataset_name: str, builder: tfds.core.DatasetBuilder) -> Dict[str, int]:
    """Examples in each stored split of a prepared dataset: a draw's, or as its info counts them."""
    sizes = {name: int(split.num_examples) for name, split in builder.info.splits.items()}
    draw = draws.parse(dataset_name)
    return {**sizes, **draws.split_sizes(builder, draw)} if draw else sizes


def resolve_num_classes(dataset_name: str, requested: Optional[int],
                        data_dir: Optional[str] = None) -> int:
    """The dataset's class count; an explicit `requested` value must agree with it."""
    actual = num_classes(dataset_name, data_dir)
    if requested is not None and requested != actual:
        raise UserError(f"--num_classes {requested} contradicts {dataset_name}, which has "
                        f"{actual} classes; drop --num_classes or pass {actual}")
    return actual


def _decode_and_resize(image: tf.Tensor, input_size: int) -> tf.Tensor:
    """Encoded or decoded image -> uint8 (input_size, input_size, 3)."""
    if image.dtype == tf.string:
        image = tf.io.decode_image(image, channels=3, expand_animations=False)
    elif image.shape[-1] == 1:  # a grey photo (Fashion-MNIST): the models take three channels
        image = tf.image.grayscale_to_rgb(image)
    image.set_shape([None, None, 3])
    resized = tf.image.resize(image, (input_size, input_size), antialias=True)
    return tf.cast(tf.clip_by_value(tf.round(resized), 0, 255), tf.uint8)


def held_out(index: tf.Tensor, val_fraction: float) -> tf.Tensor:
    """Whether training example `index` (0-based, in the split's fixed stored order) belongs to the
    validation split: exactly floor(N * val_fraction) of N examples, evenly spaced, so a class-sorted
    split is held out per class and a shuffled one (as TFDS stores image folders) at random."""
    if val_fraction <= 0:
        return tf.zeros_like(index, tf.bool)
    position = tf.cast(index, tf.float64)
    return tf.math.floor((position + 1) * val_fraction) > tf.math.floor(position * val_fraction)


def carved_count(total: int, split: str, val_fraction: float) -> int:
    """Examples of `split` ("train" or "validation") when `val_fraction` of `total` is held out."""
    held = math.floor(float(total) * val_fraction) if val_fraction > 0 else 0  # as held_out counts
    return held if split == VALIDATION else total - held


def check_val_fraction(val_fraction: float) -> None:
    if not 0 <= val_fraction < 1:
        raise UserError(f"--val_fraction must be in [0, 1) (the share of the training split held out "
                        f"for validation; 0: none), got {val_fraction}")


def stored_splits(dataset_name: str, data_dir: Optional[str] = None) -> Tuple[str, ...]:
    """The splits a dataset stores or, before it is prepared, will store: an embedded one's from its
    config, train and test for the downloaded ones (none of which has a validation split)."""
    if draws.parse(dataset_name):
        return SPLITS + (VALIDATION,)
    builder = _builder(dataset_name, data_dir)
    if isinstance(builder, tfds.folder_dataset.ImageFolder) or builder.is_prepared():
        return tuple(builder.info.splits.keys())
    if isinstance(builder, (embedded_parts.EmbeddedParts, embedded_shapes.EmbeddedShapes)):
        return tuple(embedded_shapes.split_sizes(builder.builder_config))
    return SPLITS


def resolve_validation(mode: str, val_fraction: float, dataset_name: str,
                       data_dir: Optional[str] = None) -> Tuple[str, float]:
    """The validation split a run uses, "fresh", "carved" or "none", and the share of the training
    split carved out for it (0 unless carved). `mode` "auto": the dataset's own validation split
    when it has one, else `val_fraction` of the training split; `val_fraction` 0: none."""
    check_val_fraction(val_fraction)
    if mode not in VALIDATION_MODES:
        raise UserError(f"--validation must be one of {', '.join(VALIDATION_MODES)}, got {mode!r}")
    fresh = VALIDATION in stored_splits(dataset_name, data_dir)
    if mode == "auto":
        mode = "none" if val_fraction == 0 else "fresh" if fresh else "carved"
    if mode == "fresh" and not fresh:
        where = (f"add {data_dir}/{VALIDATION}/<class>/<image> folders" if get_spec(dataset_name).tfds_name == ""
                 else "the embedded targets have one")
        raise UserError(f"--validation fresh: {dataset_name} has no validation split of its own ({where}); "
                        f"use --validation carved to hold out --val_fraction of its training split")
    if mode == "carved" and val_fraction == 0:
        raise UserError("--validation carved needs --val_fraction > 0 (the share of the training split held out)")
    return mode, (val_fraction if mode == "carved" else 0.0)


def _examples(dataset_name: str, split: str, input_size: int, data_dir: Optional[str],
              training: bool, seed: int, same_file_order: bool = False,
              val_fraction: float = 0.0) -> Tuple[tf.data.Dataset, int, bool]:
    """Resized uint8 examples of a split (cached in memory when small), their count, and whether they
    are cached. `same_file_order`: every iteration reads the files in the same seeded order, so the
    order depends on the seed only. With `val_fraction` > 0, "train" and "validation" are the two
    disjoint parts of the stored training split (held_out), read in stored order so that the carve is
    the same for every seed; with 0, "validation" is the dataset's own."""
    if split not in SPLITS + (VALIDATION,):
        raise UserError(f"unknown split {split!r}; choose one of: {', '.join(SPLITS + (VALIDATION,))}")
    check_val_fraction(val_fraction)
    builder = prepare(dataset_name, data_dir)
    sizes, draw = _split_sizes(dataset_name, builder), draws.parse(dataset_name)
    if split == VALIDATION and val_fraction <= 0 and VALIDATION not in sizes:
        raise UserError(f"{dataset_name} has no validation split of its own: carve one with --val_fraction > 0")
    stored = "train" if split == VALIDATION and val_fraction > 0 else split
    carve = stored == "train" and val_fraction > 0
    # ImageFolder ignores read_config and would shuffle its files unseeded, whatever --seed says; its
    # stored order is already a fixed shuffle, and ours is seeded.
    shuffle_files = training and not carve and not isinstance(builder, tfds.folder_dataset.ImageFolder)
    if draw and stored != "test":  # a view over the base's training split, in stored order
        dataset = draws.view(builder, draw, stored)
    else:
        dataset = builder.as_dataset(split=stored, shuffle_files=shuffle_files, as_supervised=True,
                                     read_config=tfds.ReadConfig(shuffle_seed=seed,
                                                                 shuffle_reshuffle_each_iteration=not same_file_order))
    examples = sizes.get(stored, 0)
    if carve:
        wanted = split == VALIDATION
        dataset = dataset.enumerate().filter(lambda i, example: tf.equal(held_out(i, val_fraction), wanted))
        dataset = dataset.map(lambda i, example: example)
        examples = carved_count(examples, split, val_fraction)
    # Resize before shuffling, so the shuffle buffer holds small uint8 images.
    resize = lambda image, label: (_decode_and_resize(image, input_size), label)  # noqa: E731
    dataset = dataset.map(resize, num_parallel_calls=_PARALLEL_CALLS)
    cached = 0 < examples * input_size * input_size * 3 <= _CACHE_LIMIT_BYTES
    if cached:  # decode once, keep in memory, shuffle everything
        dataset = dataset.cache()
    return dataset, examples, cached


def without_autotuning(dataset: tf.data.Dataset) -> tf.data.Dataset:
    """`dataset` with tf.data's autotuning off (see _PARALLEL_CALLS for why)."""
    options = tf.data.Options()
    options.autotune.enabled = False
    return dataset.with_options(options)


def _finish(dataset: tf.data.Dataset, batch_size: int, training: bool) -> tf.data.Dataset:
    """Batches of float32 images, autotuning off; every pipeline of this module ends here."""
    dataset = dataset.batch(batch_size, drop_remainder=training)
    to_float = lambda images, labels: (tf.cast(images, tf.float32), labels)  # noqa: E731
    return without_autotuning(dataset.map(to_float, num_parallel_calls=_PARALLEL_CALLS))


def load(dataset_name: str, split: str, batch_size: int, input_size: int,
         data_dir: Optional[str] = None, training: Optional[bool] = None,
         seed: int = 0, val_fraction: float = 0.0) -> tf.data.Dataset:
    """Batched pipeline of (images float32 0..255, labels int64).

    Args:
        dataset_name: a key of DATASETS, or a few-shot draw's name (data/draws.py).
        split: "train", "validation" (the held-out part of the training split, or the dataset's
            own when val_fraction is 0) or "test".
        batch_size: examples per batch (training drops the remainder: every step has the profiled shape).
        input_size: images are resized to input_size x input_size.
        data_dir: TFDS data dir (or the root folder for image_folder).
        training: shuffle every epoch and drop the last partial batch; default: split == "train".
        seed: shuffling seed (reproducible order of epochs).
        val_fraction: share of the stored training split held out as "validation" ("train" is the
            rest); 0: none.
    """
    if batch_size < 1:
        raise UserError(f"--batch_size must be at least 1, got {batch_size}")
    training = split == "train" if training is None else training
    dataset, examples, cached = _examples(dataset_name, split, input_size, data_dir, training, seed,
                                          val_fraction=val_fraction)
    if training:
        buffer = examples if cached else _SHUFFLE_BUFFER
        dataset = dataset.shuffle(max(buffer, 1), seed=seed, reshuffle_each_iteration=True)
    return _finish(dataset, batch_size, training).prefetch(_PREFETCH_BATCHES)


PROBE_STREAM = 1 << 20  # the epoch number whose shuffling seeds the importance probes' stream


class _ProbeStream:
    """Batches drawn one after another from an endless stream; `take(start, n)` returns batches
    start .. start+n-1 (re-positioning only for another start, e.g. after a resume), so a run's probes
    are the same whether or not it was interrupted."""

    def __init__(self, make: Callable[[], tf.data.Dataset]):
        self._make, self._iterator, self._position = make, None, 0

    def take(self, start: int, count: int) -> List:
        if self._iterator is None or start != self._position:
            self._iterator, self._position = iter(self._make().repeat().skip(start)), start
        batches = [next(self._iterator) for _ in range(count)]
        self._position += count
        return batches


class Epochs:
    """Training batches in an order fixed by the seed and the epoch: epoch e is shuffled with its own
    seed, so a resumed run sees exactly the batches an uninterrupted one would. `epoch(e, skip)` is
    epoch e without its first `skip` batches; `probe(start, n)` gives batches start .. start+n-1 of
    the importance probes' own stream."""

    def __init__(self, examples: tf.data.Dataset, batch_size: int, buffer: int, seed: int):
        self.examples, self.batch_size, self.buffer, self.seed = examples, batch_size, max(buffer, 1), seed
        self._probes = _ProbeStream(lambda: self._shuffled(PROBE_STREAM))

    def _shuffled(self, index: int) -> tf.data.Dataset:
        seed = (self.seed * 1_000_003 + index) % (1 << 62)
        shuffled = self.examples.shuffle(self.buffer, seed=seed, reshuffle_each_iteration=False)
        return _finish(shuffled, self.batch_size, True)

    def epoch(self, index: int, skip: int = 0) -> tf.data.Dataset:
        return self._shuffled(index).skip(skip).prefetch(_PREFETCH_BATCHES)

    def probe(self, start: int, batches: int) -> List:
        return self._probes.take(start, batches)


class FixedEpochs:
    """`Epochs` over a ready dataset (tests, other callers): every epoch iterates it again."""

    def __init__(self, dataset: tf.data.Dataset):
        self.dataset = dataset
        self._probes = _ProbeStream(lambda: dataset)

    def epoch(self, index: int, skip: int = 0) -> tf.data.Dataset:
        return self.dataset.skip(skip)

    def probe(self, start: int, batches: int) -> List:
        return self._probes.take(start, batches)


def load_epochs(dataset_name: str, batch_size: int, input_size: int, data_dir: Optional[str] = None,
                seed: int = 0, val_fraction: float = 0.0) -> Epochs:
    """The training split (without its validation part) as `Epochs` (reproducible, resumable order)."""
    if batch_size < 1:
        raise UserError(f"--batch_size must be at least 1, got {batch_size}")
    examples, count, cached = _examples(dataset_name, "train", input_size, data_dir, True, seed,
                                        same_file_order=True, val_fraction=val_fraction)
    return Epochs(examples, batch_size, count if cached else _SHUFFLE_BUFFER, seed)


def steps_per_epoch(dataset_name: str, batch_size: int, data_dir: Optional[str] = None,
                    val_fraction: float = 0.0) -> int:
    """Training steps in one epoch (full batches only), from the dataset's info."""
    train = _split_sizes(dataset_name, prepare(dataset_name, data_dir))["train"]
    return carved_count(train, "train", val_fraction) // batch_size


@dataclasses.dataclass
class RunData:
    """What one run trains and is evaluated on."""

    train: "Epochs"
    test: tf.data.Dataset
    validation: Optional[tf.data.Dataset]  # None without a validation split
    steps_per_epoch: int
    validation_images: Optional[int]  # the validation split's size (None without one)


def for_run(config) -> RunData:
    """The datasets of a run's configuration (a TrainConfig); UserError when one batch is more
    than the training split holds."""
    name, batch, size, root, share = (config.dataset_name, config.batch_size, config.input_size, config.data_dir,
                                      config.val_fraction)
    validated = config.validation != "none"
    train = load_epochs(name, batch, size, root, seed=config.seed, val_fraction=share)
    test = load(name, "test", batch, size, root)
    validation = load(name, VALIDATION, batch, size, root, val_fraction=share) if validated else None
    steps = steps_per_epoch(name, batch, root, share)
    if steps < 1:
        raise UserError(f"--batch_size {batch} exceeds the training split of {name}")
    images = split_examples(name, VALIDATION, root, share) if validated else None
    return RunData(train, test, validation, steps, images)
