"""Run main.py's job with every training step's (image, label) pairs checked against the files."""
import sys, glob, os, hashlib, collections
import numpy as np, tensorflow as tf
sys.path.insert(0, os.getcwd())
import data, train, main as main_module
root = os.environ.get("FOLDER", "/tmp/fv/folder")
truth = {}
for path in glob.glob(f"{root}/*/*/*.png"):
    img = data._decode_and_resize(tf.io.read_file(path), 64).numpy()
    truth[hashlib.md5(img.tobytes()).hexdigest()] = (path.split("/")[-3], path.split("/")[-2])
names = sorted(os.listdir(f"{root}/train"))
counts = collections.Counter()
batches = []
original = train.Loop.train_step
def checked(self, images, labels, *args, **kwargs):
    for im, lab in zip(images.numpy().astype(np.uint8), labels.numpy()):
        split, cls = truth.get(hashlib.md5(im.tobytes()).hexdigest(), ("?", "?"))
        counts[(self.state.epoch, split, cls == names[lab])] += 1
    if self.state.epoch == 0 and len(batches) < 6:
        batches.append(sorted(collections.Counter(labels.numpy().tolist()).items()))
    return original(self, images, labels, *args, **kwargs)
train.Loop.train_step = checked
argv = sys.argv[1:]
try:
    main_module.main(argv)
finally:
    for b in batches: print("batch classes", b)
    for key in sorted(counts):
        print("epoch %d split %s label right %s: %d" % (key + (counts[key],)))
