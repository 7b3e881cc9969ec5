"""Fashion-MNIST prepared by TFDS's own `fashion_mnist` builder from the official release's files on
this machine, with no download: Debian's `dataset-fashion-mnist` package, or a folder you name.

Where the files are: $FASHION_MNIST_DIR when it is set, else Debian's /usr/share/datasets/fashion-mnist;
the four files under their official names (FILES). When fashion_mnist is not prepared and they are
there, they are used even with a network: they are the bytes TFDS would download (checked), so the
prepared dataset is the same, and no download waits on the network.

How TFDS is handed them: its download manager takes a download from its manual folder when a file of
the name its checksum file registers is there (DownloadManager._get_manually_downloaded_path), and
checks that file against the registered size and sha256 (NonMatchingChecksumError otherwise). So the
official bytes are staged into a scratch manual folder and the real builder's download_and_prepare()
does all the rest: reading the IDX files, writing the TFRecords, the dataset info.

The checksums: Debian's copies are not the bytes TFDS registers. Its packaging (dh_strip_nondeterminism)
rewrote each gzip header, dropping the file name and setting the time stamp to its changelog's date
(2020-06-05 09:05:49 UTC, SOURCE_DATE_EPOCH); the compressed data and the trailer are the official bytes.
Putting the official header back (the name, and the release's time stamps below) gives, byte for byte,
the files whose sha256 TFDS's fashion_mnist checksum file registers (checked here on Debian's files);
a copy of the official release itself is taken as it is. Anything else is refused before TFDS sees it.
(The tests register their own tiny release's checksums with TFDS, tests/test_fashion_mnist.py; nothing
here knows of them.)
"""
from __future__ import annotations

import hashlib
import logging
import os
import struct
import tempfile
from typing import Dict, List

import tensorflow_datasets as tfds
from tensorflow_datasets.core.download.checksums import UrlInfo

from elastic_trainer.command_line import UserError

SOURCE_VARIABLE = "FASHION_MNIST_DIR"
DEBIAN_FOLDER = "/usr/share/datasets/fashion-mnist"
DEBIAN_PACKAGE = "dataset-fashion-mnist"
FILES = ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz",
         "t10k-labels-idx1-ubyte.gz")
# The host TFDS 4.9.10's builder downloads from, over plain http (an S3 website has no https).
DOWNLOAD_HOST = "fashion-mnist.s3-website.eu-central-1.amazonaws.com:80"
# gzip MTIME of the official files (2017-08-31 10:50:06 and 10:50:27 UTC), by their names' prefix:
# what Debian's copies lost with their file names.
_RELEASE_MTIMES = {"train": 0x59A7E9DE, "t10k": 0x59A7E9F3}
_GZIP_MAGIC, _DEFLATE, _FLAG_NAME = b"\x1f\x8b", 8, 0x08


def source_folder() -> str:
    """The folder the official files are read from ($FASHION_MNIST_DIR, else Debian's)."""
    return os.environ.get(SOURCE_VARIABLE) or DEBIAN_FOLDER


def _absent(folder: str) -> List[str]:
    return [name for name in FILES if not os.path.isfile(os.path.join(folder, name))]


def present() -> bool:
    """Whether all four files are in the source folder (their bytes are checked when used)."""
    return not _absent(source_folder())


def missing() -> str:
    """One line: what is missing where, and how to get it (when the download host is unreachable)."""
    folder = source_folder()
    absent = _absent(folder)
    where = f"${SOURCE_VARIABLE}={folder}" if os.environ.get(SOURCE_VARIABLE) else folder
    lacks = "all four" if len(absent) == len(FILES) else ", ".join(absent)
    return (f"fashion_mnist is not prepared and {DOWNLOAD_HOST} is unreachable (network problem); to prepare it "
            f"offline from the official files, install them with `apt-get install {DEBIAN_PACKAGE}` (Debian/Ubuntu: "
            f"{DEBIAN_FOLDER}) or put {', '.join(FILES[:-1])} and {FILES[-1]} in a folder and set {SOURCE_VARIABLE} "
            f"to it ({where} lacks {lacks})")


def _with_release_header(content: bytes, name: str) -> bytes:
    """`content` (a gzip file without a stored name, as Debian ships them) with the official header:
    the same compressed bytes after it. Anything else is returned unchanged (and then fails the check)."""
    if len(content) < 10 or content[:2] != _GZIP_MAGIC or content[2] != _DEFLATE or content[3] != 0:
        return content
    mtime = _RELEASE_MTIMES.get(name.split("-", 1)[0])
    if mtime is None:
        return content
    stored_name = name[:-len(".gz")].encode("ascii") + b"\0"
    return content[:3] + bytes([_FLAG_NAME]) + struct.pack("<I", mtime) + content[8:10] + stored_name + content[10:]


def registered_files(builder: tfds.core.DatasetBuilder) -> Dict[str, UrlInfo]:
    """{file name: the size and sha256 TFDS's checksum file registers for it} of the builder's downloads."""
    return {info.filename: info for info in (builder.url_infos or {}).values()}


def official_bytes(path: str, expected: UrlInfo) -> bytes:
    """The official file's bytes from the copy at `path`: as it is, or with the header Debian's
    packaging rewrote put back; UserError when neither has the registered size and sha256."""
    with open(path, "rb") as handle:
        content = handle.read()
    for candidate in (content, _with_release_header(content, expected.filename)):
        if len(candidate) == expected.size and hashlib.sha256(candidate).hexdigest() == expected.checksum:
            return candidate
    raise UserError(f"{path} is not the official Fashion-MNIST file {expected.filename} ({len(content)} bytes, "
                    f"sha256 {hashlib.sha256(content).hexdigest()[:16]}...; TFDS's fashion_mnist registers "
                    f"{expected.size} bytes, sha256 {expected.checksum[:16]}...): reinstall it "
                    f"(apt-get install --reinstall {DEBIAN_PACKAGE}) or point {SOURCE_VARIABLE} at the official files")


def prepare_offline(builder: tfds.core.DatasetBuilder) -> None:
    """Prepare the real `fashion_mnist` builder from the source folder's files: checked, staged with
    the official bytes in a scratch manual folder (removed afterwards, with TFDS's extracted copies),
    then TFDS's download_and_prepare() reads them from there and checks them once more."""
    folder = source_folder()
    expected = registered_files(builder)
    if sorted(expected) != sorted(FILES):
        raise UserError(f"this TFDS's {builder.name} registers the files {', '.join(sorted(expected))}, not the "
                        f"Fashion-MNIST release's {', '.join(FILES)}; prepare it where there is a network")
    scratch_root = os.path.join(os.fspath(builder.data_dir_root), "downloads")
    os.makedirs(scratch_root, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{builder.name}_offline_", dir=scratch_root) as scratch:
        manual = os.path.join(scratch, "manual")
        os.makedirs(manual)
        for name in FILES:
            with open(os.path.join(manual, name), "wb") as handle:
                handle.write(official_bytes(os.path.join(folder, name), expected[name]))
        logging.info("preparing %s once from %s into %s (offline, checked against TFDS's checksums; later runs "
                     "reuse it)", builder.name, folder, builder.data_dir_root)
        config = tfds.download.DownloadConfig(manual_dir=manual, extract_dir=os.path.join(scratch, "extracted"),
                                              try_download_gcs=False)
        builder.download_and_prepare(download_config=config)
