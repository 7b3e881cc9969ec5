"""Fashion-MNIST through TFDS's real builder, prepared offline from local IDX files, and its few-shot draws.

The tests write a tiny release themselves (gzipped IDX files, made here with numpy, struct and zlib, a
reference independent of data/fashion_mnist.py) and register its files with TFDS in place of the real
release's: TFDS's checksum registry for fashion_mnist and the builder's split sizes (60,000 and 10,000 in
its code) are patched for the test, nothing else; the builder, its download manager and its checks are
TFDS's own. The network is refused throughout.
"""
from __future__ import annotations

import hashlib
import os
import socket
import struct
import subprocess
import sys
import zlib

import numpy as np
import pytest
import tensorflow_datasets as tfds
from tensorflow_datasets.core.download import checksums
from tensorflow_datasets.image_classification import mnist

import data
from data import draws, fashion_mnist
from elastic_trainer.command_line import UserError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLASS_SIZES = [66] * 9 + [44]  # training images a class: "Ankle boot" (9) holds two draws of N=2, the others three
TEST_PER_CLASS = 2
# The official files' gzip time stamps, as read from the release's own files (train-*, t10k-*).
RELEASE_MTIMES = {"train": 0x59A7E9DE, "t10k": 0x59A7E9F3}
DEBIAN_MTIME = 0x5EDA0AED  # what Debian's packaging wrote instead (2020-06-05)
URL = "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"


def gzip_file(payload: bytes, stored_name: str, mtime: int) -> bytes:
    """`payload` gzipped as gzip(1) writes it on Unix: the stored file name in the header when given."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    body = compressor.compress(payload) + compressor.flush()
    header = b"\x1f\x8b\x08" + bytes([0x08 if stored_name else 0]) + struct.pack("<I", mtime) + b"\x00\x03"
    name = stored_name.encode() + b"\0" if stored_name else b""
    return header + name + body + struct.pack("<II", zlib.crc32(payload), len(payload))


def idx(array: np.ndarray) -> bytes:
    """IDX bytes of a uint8 array (magic 0x0800 | dimensions, big-endian sizes)."""
    return struct.pack(">HBB", 0, 8, array.ndim) + struct.pack(f">{array.ndim}I", *array.shape) + array.tobytes()


def write_release(folder, arrays: dict, debian: bool) -> None:
    """The four files in `folder`: as the official release has them, or as Debian ships them."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, array in arrays.items():
        prefix = name.split("-", 1)[0]
        content = gzip_file(idx(array), "" if debian else name[:-3], DEBIAN_MTIME if debian else RELEASE_MTIMES[prefix])
        (folder / name).write_bytes(content)


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    """The tiny release: its arrays, an official copy and a Debian-like copy of its files."""
    rng = np.random.default_rng(7)
    train_labels = rng.permutation(np.repeat(np.arange(10), CLASS_SIZES)).astype(np.uint8)
    test_labels = np.repeat(np.arange(10), TEST_PER_CLASS).astype(np.uint8)
    arrays = {"train-images-idx3-ubyte.gz": rng.integers(0, 256, (len(train_labels), 28, 28), np.uint8),
              "train-labels-idx1-ubyte.gz": train_labels,
              "t10k-images-idx3-ubyte.gz": rng.integers(0, 256, (len(test_labels), 28, 28), np.uint8),
              "t10k-labels-idx1-ubyte.gz": test_labels}
    root = tmp_path_factory.mktemp("release")
    write_release(root / "official", arrays, debian=False)
    write_release(root / "debian", arrays, debian=True)
    return {"arrays": arrays, "official": root / "official", "debian": root / "debian"}


def register(patch: pytest.MonkeyPatch, release) -> None:
    """TFDS's fashion_mnist expects the tiny release: its files' sizes and sha256, and its split sizes."""
    infos = {}
    for name in fashion_mnist.FILES:
        content = (release["official"] / name).read_bytes()
        infos[URL + name] = checksums.UrlInfo(size=len(content), checksum=hashlib.sha256(content).hexdigest(),
                                              filename=name)
    patch.setattr(mnist.FashionMNIST, "url_infos", infos)
    patch.setattr(mnist, "_TRAIN_EXAMPLES", sum(CLASS_SIZES))
    patch.setattr(mnist, "_TEST_EXAMPLES", 10 * TEST_PER_CLASS)


def refuse(*args, **kwargs):
    raise OSError("network is unreachable (simulated by the test)")


@pytest.fixture(scope="module")
def prepared(release, tmp_path_factory) -> str:
    """A TFDS data dir where the real builder prepared fashion_mnist from the Debian-like copy, offline."""
    directory = str(tmp_path_factory.mktemp("tensorflow_datasets"))
    with pytest.MonkeyPatch.context() as patch:
        register(patch, release)
        patch.setenv(fashion_mnist.SOURCE_VARIABLE, str(release["debian"]))
        patch.setattr(socket, "create_connection", refuse)
        assert data.availability_problem("fashion_mnist", directory) is None  # the local files will do
        data.prepare("fashion_mnist", directory)
    return directory


def reference(release, split: str) -> dict:
    """{image bytes as three channels: label} of the tiny release's `split` ("train" or "t10k")."""
    images, labels = (release["arrays"][f"{split}-{kind}-ubyte.gz"] for kind in ("images-idx3", "labels-idx1"))
    return {np.repeat(image[:, :, None], 3, axis=2).tobytes(): int(label) for image, label in zip(images, labels)}


def examples(dataset_name: str, split: str, directory: str) -> dict:
    """{image bytes: label} of a split as a run reads it, at 28 px (the images' own size)."""
    loaded = data.load(dataset_name, split, 64, 28, directory, training=False)
    found = {image.astype(np.uint8).tobytes(): int(label) for images, labels in loaded.as_numpy_iterator()
             for image, label in zip(images, labels)}
    assert sum(len(labels) for _, labels in loaded.as_numpy_iterator()) == len(found)  # no image twice
    return found


def test_the_real_builder_prepares_from_local_files_whose_images_are_the_idx_bytes(prepared, release):
    builder = tfds.builder("fashion_mnist", data_dir=prepared)
    assert builder.is_prepared() and builder.info.download_size == sum(
        (release["official"] / name).stat().st_size for name in fashion_mnist.FILES)  # the official bytes, staged
    assert {split: info.num_examples for split, info in builder.info.splits.items()} == {"train": 638, "test": 20}
    assert examples("fashion_mnist", "train", prepared) == reference(release, "train")  # grey, as 3 equal channels
    assert examples("fashion_mnist", "test", prepared) == reference(release, "t10k")
    assert os.listdir(os.path.join(prepared, "downloads")) == []  # the scratch copies are gone
    assert data.num_classes("fashion_mnist", prepared) == 10
    assert data.resolve_validation("auto", 0.1, "fashion_mnist", prepared) == ("carved", 0.1)
    images, _ = next(iter(data.load("fashion_mnist", "train", 4, 32, prepared)))
    assert images.shape == (4, 32, 32, 3)


def test_a_copy_is_taken_as_the_release_only_with_the_registered_bytes(release, tmp_path):
    infos = {}
    for name in fashion_mnist.FILES:
        content = (release["official"] / name).read_bytes()
        infos[name] = checksums.UrlInfo(size=len(content), checksum=hashlib.sha256(content).hexdigest(), filename=name)
        assert fashion_mnist.official_bytes(str(release["official"] / name), infos[name]) == content
        debian = (release["debian"] / name).read_bytes()
        assert debian != content and fashion_mnist.official_bytes(str(release["debian"] / name), infos[name]) == content
    name = "train-labels-idx1-ubyte.gz"
    damaged = bytearray((release["debian"] / name).read_bytes())
    damaged[-9] ^= 1  # one bit of the compressed data
    (tmp_path / name).write_bytes(bytes(damaged))
    with pytest.raises(UserError, match=f"is not the official Fashion-MNIST file {name}.*apt-get install --reinstall"):
        fashion_mnist.official_bytes(str(tmp_path / name), infos[name])


def test_damaged_files_are_refused_before_tfds_prepares_anything(release, tmp_path, monkeypatch):
    source = tmp_path / "source"
    source.mkdir()
    for name in fashion_mnist.FILES:
        (source / name).write_bytes((release["debian"] / name).read_bytes())
    (source / "t10k-labels-idx1-ubyte.gz").write_bytes(b"\x1f\x8b\x08\x00 not the release")
    register(monkeypatch, release)
    monkeypatch.setenv(fashion_mnist.SOURCE_VARIABLE, str(source))
    monkeypatch.setattr(socket, "create_connection", refuse)
    with pytest.raises(UserError) as error:
        data.prepare("fashion_mnist", str(tmp_path / "tfds"))
    assert "t10k-labels-idx1-ubyte.gz is not the official Fashion-MNIST file" in str(error.value)
    assert "\n" not in str(error.value)
    assert not tfds.builder("fashion_mnist", data_dir=str(tmp_path / "tfds")).is_prepared()
    assert os.listdir(tmp_path / "tfds" / "downloads") == []


def test_without_network_or_files_one_line_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setenv(fashion_mnist.SOURCE_VARIABLE, str(tmp_path / "nowhere"))
    monkeypatch.setattr(socket, "create_connection", refuse)
    problem = data.availability_problem("fashion_mnist_shot10_seed0", str(tmp_path / "tfds"))
    assert "apt-get install dataset-fashion-mnist" in problem and fashion_mnist.SOURCE_VARIABLE in problem
    assert "train-images-idx3-ubyte.gz" in problem and "\n" not in problem


def draw_splits(name: str, directory: str) -> dict:
    return {split: examples(name, split, directory) for split in ("train", "validation", "test")}


def test_draws_are_n_a_class_disjoint_and_reproducible(prepared, release):
    train, test = reference(release, "train"), reference(release, "t10k")
    first, second = (draw_splits(f"fashion_mnist_shot2_seed{seed}", prepared) for seed in (0, 1))
    for splits in (first, second):
        assert np.bincount(list(splits["train"].values()), minlength=10).tolist() == [2] * 10
        assert np.bincount(list(splits["validation"].values()), minlength=10).tolist() == [20] * 10
        assert splits["test"] == test  # the official test split, whole
        for split in ("train", "validation"):  # images of the training split, under their own labels
            assert all(train[image] == label for image, label in splits[split].items())
        assert not splits["train"].keys() & splits["validation"].keys()
        assert not (splits["train"].keys() | splits["validation"].keys()) & test.keys()
    drawn = [splits["train"].keys() | splits["validation"].keys() for splits in (first, second)]
    assert not drawn[0] & drawn[1]  # another seed, other images
    assert draw_splits("fashion_mnist_shot2_seed0", prepared) == first
    assert data.split_examples("fashion_mnist_shot2_seed0", "validation", prepared) == 200
    assert data.steps_per_epoch("fashion_mnist_shot2_seed0", 8, prepared) == 20 // 8
    assert data.resolve_validation("auto", 0.1, "fashion_mnist_shot2_seed0", prepared) == ("fresh", 0.0)
    assert data.num_classes("fashion_mnist_shot2_seed1", prepared) == 10
    def order(seed: int) -> list:
        epochs = data.load_epochs("fashion_mnist_shot2_seed1", 4, 28, prepared, seed=seed)
        batches = epochs.epoch(0).as_numpy_iterator()
        return [image.astype(np.uint8).tobytes() for images, _ in batches for image in images]
    assert order(3) == order(3) != order(4)  # the run's --seed orders the batches, the same every time
    assert sorted(order(3)) == sorted(second["train"])  # every image of the draw's train, once an epoch


def test_a_draw_past_a_class_is_refused(prepared):
    with pytest.raises(UserError) as error:
        data.steps_per_epoch("fashion_mnist_shot2_seed2", 4, prepared)
    message = str(error.value)
    assert "fashion_mnist_shot2_seed2 runs past the 44 training images of class 'Ankle boot'" in message
    assert "the seeds 0 to 1 fit" in message and "\n" not in message
    with pytest.raises(UserError, match="N=60 does not fit at all"):
        data.load("fashion_mnist_shot60_seed0", "train", 4, 28, prepared)


def test_draw_names_are_accepted_and_the_pattern_shown(tmp_path):
    from elastic_trainer import cli

    args = cli.parse_args(["--dataset_name", "fashion_mnist_shot10_seed0", "--logdir", str(tmp_path)])
    config = cli.resolve_config(args)
    assert config.dataset_name == "fashion_mnist_shot10_seed0" and config.validation == "fresh"
    assert config.num_classes == 10
    from elastic_trainer.run_outputs import applied_settings
    assert applied_settings(config, budgeted=False, periodic=False)["dataset_name"] == "fashion_mnist_shot10_seed0"
    for wrong in ("fashion_mnist_shot0_seed0", "fashion_mnist_shot10_seed01", "embedded_shapes_shot10_seed0"):
        with pytest.raises(SystemExit):
            cli.parse_args(["--dataset_name", wrong])
        with pytest.raises(UserError, match="or a few-shot draw <base>_shot<N>_seed<S> of fashion_mnist"):
            data.get_spec(wrong)
    shown = cli.build_parser().format_help()
    assert "fashion_mnist_shot<N>_seed<S>" in shown and "shot10" not in shown and "{caltech_birds2011," in shown
    assert draws.parse("fashion_mnist_shot10_seed3") == draws.Draw("fashion_mnist", 10, 3)


DEBIAN_INSTALLED = all(os.path.isfile(os.path.join(fashion_mnist.DEBIAN_FOLDER, name)) for name in fashion_mnist.FILES)


@pytest.mark.skipif(not DEBIAN_INSTALLED, reason="Debian's dataset-fashion-mnist is not installed")
def test_debians_files_are_the_official_release_with_a_rewritten_header():
    """Debian's copies are not the bytes TFDS registers, but give them back with the official gzip header."""
    registered = fashion_mnist.registered_files(tfds.builder("fashion_mnist"))
    for name in fashion_mnist.FILES:
        path = os.path.join(fashion_mnist.DEBIAN_FOLDER, name)
        with open(path, "rb") as handle:
            assert hashlib.sha256(handle.read()).hexdigest() != registered[name].checksum
        restored = fashion_mnist.official_bytes(path, registered[name])
        assert hashlib.sha256(restored).hexdigest() == registered[name].checksum


@pytest.mark.slow
def test_missing_files_offline_get_one_line_through_the_cli(tmp_path):
    """main.py in a subprocess, offline, no local files: a non-zero exit, one line, nothing written."""
    from test_bad_input import OFFLINE, snapshot

    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(OFFLINE)
    work = tmp_path / "work"
    work.mkdir()
    environment = dict(os.environ, PYTHONPATH=str(tmp_path / "site"), TF_CPP_MIN_LOG_LEVEL="3",
                       **{fashion_mnist.SOURCE_VARIABLE: str(tmp_path / "empty")})
    before = snapshot(work)
    result = subprocess.run([sys.executable, os.path.join(ROOT, "main.py"), "--dataset_name",
                             "fashion_mnist_shot10_seed0", "--model_name", "mobilenetv2", "--weights", "none",
                             "--input_size", "32",
                             "--data_dir", str(work / "tfds"), "--logdir", str(work / "logs")],
                            cwd=work, capture_output=True, text=True, env=environment, timeout=300)
    assert result.returncode != 0, result.stdout[-2000:]
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "apt-get install dataset-fashion-mnist" in errors[0], result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    assert {path: digest for path, digest in snapshot(work).items()} == before
