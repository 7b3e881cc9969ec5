"""main.py's job until the end of its first epoch, then a linear probe of the model's pooled
features (frozen BN, as the step sees them) and exit. HEAD=zeros zeroes a fresh classifier;
VARIANT=off stops ImageFolder's file shuffle (a no-op after a798703)."""
import os, sys, glob
sys.path.insert(0, os.getcwd())
import numpy as np, tensorflow as tf, tensorflow_datasets as tfds
import data, train, main as main_module
root = os.environ.get("FOLDER", "/tmp/fv/folder")
names = sorted(os.listdir(f"{root}/train"))
def load(split):
    xs, ys = [], []
    for i, c in enumerate(names):
        for p in sorted(glob.glob(f"{root}/{split}/{c}/*.png")):
            xs.append(data._decode_and_resize(tf.io.read_file(p), 64).numpy()); ys.append(i)
    return np.stack(xs).astype("float32"), np.array(ys)
xtr, ytr = load("train"); xte, yte = load("test")
variant = os.environ.get("VARIANT", "")
original_as = tfds.folder_dataset.ImageFolder._as_dataset
def patched(self, split, shuffle_files=False, decoders=None, read_config=None):
    return original_as(self, split, shuffle_files and variant == "", decoders, read_config)
tfds.folder_dataset.ImageFolder._as_dataset = patched
def report(model, tag):
    pooled = tf.keras.Model(model.input, model.get_layer("global_pool").output)
    ftr = np.concatenate([pooled(xtr[i:i+200], training=False).numpy() for i in range(0, len(xtr), 200)])
    fte = np.concatenate([pooled(xte[i:i+200], training=False).numpy() for i in range(0, len(xte), 200)])
    mu, sd = ftr.mean(0), ftr.std(0) + 1e-6
    tf.keras.utils.set_random_seed(1)
    clf = tf.keras.Sequential([tf.keras.layers.Dense(20)])
    clf.compile(tf.keras.optimizers.Adam(1e-2), tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True), ["accuracy"])
    clf.fit((ftr - mu) / sd, ytr, epochs=60, batch_size=128, verbose=0)
    kernel = model.get_layer("classifier").kernel.numpy() if "classifier" in [l.name for l in model.layers] else None
    print(f"PROBE {tag}: feature std across images {ftr.std(0).mean():.4f}, mean |f| {np.abs(ftr).mean():.4f}, "
          f"dead dims {(ftr.std(0) < 1e-4).mean():.2f}, linear probe test {clf.evaluate((fte - mu) / sd, yte, verbose=0)[1]:.3f}", flush=True)
original_end = train.Loop.end_epoch
def end_epoch(self, *args, **kwargs):
    out = original_end(self, *args, **kwargs)
    state = tf.random.get_global_generator().state.numpy().copy()
    report(self.model, f"after epoch {self.state.epoch}")
    os._exit(0)
    return out
train.Loop.end_epoch = end_epoch
import models
build = models.build_model
def build_head(*args, **kwargs):
    model = build(*args, **kwargs)
    if os.environ.get("HEAD") == "zeros":
        kernel = model.get_layer(models.CLASSIFIER_NAME).kernel
        kernel.assign(tf.zeros_like(kernel))
    return model
main_module.models.build_model = build_head
sys.exit(main_module.main(sys.argv[1:]))
