"""main.py's job with HEAD=zeros: the classifier's kernel starts at zero (bias is zero already)."""
import os, sys
sys.path.insert(0, os.getcwd())
import tensorflow as tf
import models, main as main_module
build = models.build_model
def build_zero(*args, **kwargs):
    model = build(*args, **kwargs)
    if os.environ.get("HEAD") == "zeros":
        layer = model.get_layer(models.CLASSIFIER_NAME)
        layer.kernel.assign(tf.zeros_like(layer.kernel))
    return model
models.build_model = build_zero
main_module.models.build_model = build_zero
sys.exit(main_module.main(sys.argv[1:]))
