"""Run main.py at a checkout with ImageFolder's file shuffle replaced: VARIANT=off (no shuffle),
VARIANT=dummy (no shuffle, but an unseeded shuffle op built in its place), VARIANT=seeded (shuffle with a fixed seed)."""
import os, sys
sys.path.insert(0, os.getcwd())
import tensorflow as tf, tensorflow_datasets as tfds
import main as main_module
variant = os.environ.get("VARIANT", "")
original = tfds.folder_dataset.ImageFolder._as_dataset
def patched(self, split, shuffle_files=False, decoders=None, read_config=None):
    if shuffle_files and variant == "dummy":
        tf.data.Dataset.range(1).shuffle(1)
    if shuffle_files and variant == "seeded":
        ds = original(self, split, False, decoders, read_config)
        return ds.shuffle(10_000, seed=int(os.environ.get("SHUFFLE_SEED", "123")))
    return original(self, split, shuffle_files and variant == "", decoders, read_config)
tfds.folder_dataset.ImageFolder._as_dataset = patched
sys.exit(main_module.main(sys.argv[1:]))
