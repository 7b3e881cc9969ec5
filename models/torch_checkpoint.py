"""Read a state dict that PyTorch saved in its legacy (pre-1.6, non-zip) format, without torch.

Such a file is five pickles in a row, then raw data:

    magic number (an int), protocol version (1001), system info ({"little_endian": ...}),
    the object itself, whose tensors reduce to torch._utils._rebuild_tensor_v2(storage, offset,
    size, stride, ...) and whose storages are persistent ids
    ("storage", <torch.XStorage class>, key, location, element count, view metadata),
    the list of storage keys in the order their data follows;
    then, per key, an 8-byte little-endian element count and the elements' little-endian bytes.

The pickles are read by an Unpickler that resolves only the names a state dict needs (an
OrderedDict, the tensor rebuild functions, the storage types): anything else (a model class,
os.system) is refused before it can run. Imports no TensorFlow.
"""
from __future__ import annotations

import collections
import dataclasses
import os
import pickle
import re
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from elastic_trainer.command_line import UserError

MAGIC_NUMBER = 0x1950A86A20F9469CFC6C
PROTOCOL_VERSION = 1001
# torch's storage classes -> the numpy dtypes of their (little-endian) elements.
STORAGE_DTYPES = {
    "FloatStorage": "<f4", "DoubleStorage": "<f8", "HalfStorage": "<f2", "LongStorage": "<i8",
    "IntStorage": "<i4", "ShortStorage": "<i2", "CharStorage": "i1", "ByteStorage": "u1", "BoolStorage": "?",
}
# torch hub names a file `<name>-<first hex digits of its sha256>.<ext>`.
HASH_IN_NAME = re.compile(r"-([0-9a-f]{8,64})\.[^.]+$")


@dataclasses.dataclass(frozen=True)
class _StorageType:
    name: str


@dataclasses.dataclass
class _Storage:
    key: str
    dtype: np.dtype
    count: int
    data: Optional[np.ndarray] = None


@dataclasses.dataclass(frozen=True)
class _TensorReference:
    """A tensor before its storage's bytes are read: where it lies in the storage."""

    storage: _Storage
    offset: int
    size: Tuple[int, ...]
    stride: Tuple[int, ...]


def _rebuild_tensor(storage: _Storage, offset: int, size, stride, *unused: Any) -> _TensorReference:
    # _rebuild_tensor_v2's remaining arguments (requires_grad, backward hooks, metadata) do not
    # change the values.
    return _TensorReference(storage, int(offset), tuple(int(n) for n in size), tuple(int(s) for s in stride))


def _rebuild_parameter(data: _TensorReference, *unused: Any) -> _TensorReference:
    return data  # an nn.Parameter is its tensor plus requires_grad


_ALLOWED = {
    ("collections", "OrderedDict"): collections.OrderedDict,
    ("torch._utils", "_rebuild_tensor"): _rebuild_tensor,
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
}


class _StateDictUnpickler(pickle.Unpickler):
    """An Unpickler that knows only what a state dict is made of, and collects its storages."""

    def __init__(self, stream, path: str, storages: Dict[str, _Storage]):
        super().__init__(stream)
        self.path = path
        self.storages = storages

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _ALLOWED:
            return _ALLOWED[module, name]
        if module == "torch" and name in STORAGE_DTYPES:
            return _StorageType(name)
        raise UserError(f"{self.path}: refusing to load {module}.{name}: a torch state dict holds only "
                        f"OrderedDicts and tensors (is the file a pickled model or not a checkpoint?)")

    def persistent_load(self, persistent_id: Any) -> _Storage:
        if not (isinstance(persistent_id, tuple) and len(persistent_id) == 6 and persistent_id[0] == "storage"
                and isinstance(persistent_id[1], _StorageType)):
            raise UserError(f"{self.path}: unexpected persistent id {persistent_id!r} (not a torch storage)")
        _, storage_type, key, _location, count, view = persistent_id
        if view is not None:
            raise UserError(f"{self.path}: storage views (files of torch < 0.4) are not supported")
        storage = self.storages.setdefault(str(key), _Storage(str(key), np.dtype(STORAGE_DTYPES[storage_type.name]),
                                                               int(count)))
        if storage.count != int(count) or storage.dtype != np.dtype(STORAGE_DTYPES[storage_type.name]):
            raise UserError(f"{self.path}: storage {key} is referenced with two different types or sizes")
        return storage


def read_state_dict(path: str) -> Dict[str, np.ndarray]:
    """The tensors of a legacy-format torch state dict, as {name: numpy array} in file order.

    Raises:
        UserError: the file is not a legacy torch state dict (zip format, truncated, another
            object, a name outside a state dict's vocabulary).
    """
    storages: Dict[str, _Storage] = {}
    with open(path, "rb") as stream:
        if stream.read(4) == b"PK\x03\x04":
            raise UserError(f"{path} is in torch's zip format (torch >= 1.6), not the legacy one this reader reads")
        stream.seek(0)
        root, keys = _load_pickles(stream, path, storages)
        _read_storages(stream, path, [str(key) for key in keys], storages)
    if not isinstance(root, dict) or not all(isinstance(value, _TensorReference) for value in root.values()):
        raise UserError(f"{path} holds a {type(root).__name__}, not a flat state dict of tensors")
    return {str(name): _to_array(reference, path, str(name)) for name, reference in root.items()}


def _load_pickles(stream, path: str, storages: Dict[str, _Storage]) -> Tuple[Any, List]:
    """The header's three pickles (checked), the object and the list of storage keys."""
    try:
        header = [_StateDictUnpickler(stream, path, storages).load() for _ in range(3)]
        if header[0] != MAGIC_NUMBER or header[1] != PROTOCOL_VERSION:
            raise UserError(f"{path} is not a legacy torch file (magic number or protocol version differ)")
        if not isinstance(header[2], dict) or not header[2].get("little_endian", False):
            raise UserError(f"{path} was saved on a big-endian machine, which this reader does not support")
        root = _StateDictUnpickler(stream, path, storages).load()
        keys = _StateDictUnpickler(stream, path, storages).load()
    except UserError:
        raise
    except Exception as error:  # a damaged pickle fails in many ways (UnpicklingError, EOFError, KeyError...)
        raise UserError(f"{path} is not a readable torch state dict: {type(error).__name__}: {error}") from None
    if not isinstance(keys, list):
        raise UserError(f"{path} is not a readable torch state dict: no list of storage keys after the object")
    return root, keys


def _read_storages(stream, path: str, keys: List[str], storages: Dict[str, _Storage]) -> None:
    """Read each storage's element count and bytes, in the order the key list gives."""
    for key in keys:
        storage = storages.get(key)
        if storage is None:
            raise UserError(f"{path}: the data of storage {key} follows, but no tensor uses it")
        count = int.from_bytes(stream.read(8), "little", signed=True)
        if count != storage.count:
            raise UserError(f"{path}: storage {key} holds {count} elements, its tensors say {storage.count}")
        raw = stream.read(count * storage.dtype.itemsize)
        if len(raw) != count * storage.dtype.itemsize:
            raise UserError(f"{path} is truncated (in the data of storage {key})")
        storage.data = np.frombuffer(raw, storage.dtype)
    missing = sorted(key for key, storage in storages.items() if storage.data is None)
    if missing:
        raise UserError(f"{path}: no data for storage(s) {', '.join(missing)}")


def _to_array(reference: _TensorReference, path: str, name: str) -> np.ndarray:
    """The tensor as an owned, contiguous, native-endian numpy array."""
    storage, size, stride = reference.storage, reference.size, reference.stride
    if len(size) != len(stride) or min(size + stride, default=0) < 0:
        raise UserError(f"{path}: tensor {name} has a malformed size {size} or stride {stride}")
    if 0 in size:
        return np.zeros(size, storage.dtype.newbyteorder("="))
    last = reference.offset + sum((n - 1) * s for n, s in zip(size, stride))
    if reference.offset < 0 or last >= storage.count:
        raise UserError(f"{path}: tensor {name} reaches past the end of its storage")
    itemsize = storage.dtype.itemsize
    view = np.lib.stride_tricks.as_strided(storage.data[reference.offset:], shape=size,
                                           strides=[s * itemsize for s in stride], writeable=False)
    return np.array(view, dtype=storage.dtype.newbyteorder("="), order="C")  # a copy the caller owns


def check_hash_in_name(path: str, sha256: str) -> None:
    """Raise UserError when the file's name carries a hash prefix (torch hub's `name-<hex>.pth`)
    that its sha256 does not start with: a damaged or substituted file."""
    match = HASH_IN_NAME.search(os.path.basename(path))
    if match and not sha256.startswith(match.group(1)):
        raise UserError(f"{path}: its sha256 {sha256[:16]}... does not start with the {match.group(1)} its name "
                        f"promises (a damaged or substituted file); reinstall the package that ships it")
