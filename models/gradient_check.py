"""Does this machine's TensorFlow compute a model's convolution gradients right?

TensorFlow 2.15's oneDNN kernels, which the CLIs turn on on x86-64 (tf_environment.prepare_tensorflow_environment),
have been seen to compute a wrong filter gradient on some CPUs: on an AMD EPYC, and here under
`ONEDNN_MAX_CPU_ISA=AVX2`, a 1x1 stride-2 SAME convolution of 3 channels on 8x8 inputs is off by a relative
0.19 from float64 (docs/benchmarks/profiler.md, "A gradient check"). The kernel chosen depends on the CPU
and the shape, so the check runs every distinct convolution of the model being profiled, once per device
(the profiler calls it), in float32 as training does (traced, the kernels the training step gets) against
float64, whose kernels are TensorFlow's own Eigen ones and not oneDNN's (oneDNN has no float64 convolution).
"""
from __future__ import annotations

import dataclasses
from typing import Dict, List, Tuple

import numpy as np
import tensorflow as tf

from models.blocks import CONVOLUTIONS, leaf_layers

# A float32 gradient whose largest error exceeds this share of the float64 gradient's largest value is
# wrong: float32 rounding over the sums of these shapes stays below 1e-5 (2e-8-9e-8 in the case above
# with the right kernel), the wrong kernel's error was 0.19.
TOLERANCE = 1e-3
REMEDY = "TF_ENABLE_ONEDNN_OPTS=0"


@dataclasses.dataclass(frozen=True)
class Convolution:
    """One distinct convolution: what decides which kernel TensorFlow runs for it."""

    depthwise: bool
    input_shape: Tuple[int, int, int]  # height, width, channels of one example
    kernel_shape: Tuple[int, int, int, int]  # Keras's layout: height, width, in, out (or multiplier)
    strides: Tuple[int, int]
    padding: str
    dilation: Tuple[int, int]

    def describe(self) -> str:
        kind = "depthwise" if self.depthwise else "conv"
        height, width, channels = self.input_shape
        return (f"{kind} {self.kernel_shape[0]}x{self.kernel_shape[1]} stride {self.strides[0]} {self.padding}, "
                f"{channels} -> {self.kernel_shape[-1] * (channels if self.depthwise else 1)} channels "
                f"at {height}x{width}")


def convolutions(model: tf.keras.Model) -> List[Convolution]:
    """The model's distinct convolutions (Conv2D and DepthwiseConv2D layers), in forward order."""
    found: Dict[Convolution, None] = {}
    for layer in leaf_layers(model):
        if not isinstance(layer, CONVOLUTIONS) or layer.groups != 1 and not _is_depthwise(layer):
            continue
        depthwise = _is_depthwise(layer)
        kernel = layer.depthwise_kernel if depthwise else layer.kernel
        found[Convolution(depthwise, tuple(int(side) for side in layer.input.shape[1:]),
                          tuple(int(side) for side in kernel.shape), tuple(layer.strides), layer.padding.upper(),
                          tuple(layer.dilation_rate))] = None
    return list(found)


def _is_depthwise(layer: tf.keras.layers.Layer) -> bool:
    return isinstance(layer, tf.keras.layers.DepthwiseConv2D)


def _apply(convolution: Convolution):
    strides = [1, *convolution.strides, 1]
    if convolution.depthwise:
        return lambda x, w: tf.nn.depthwise_conv2d(x, w, strides, convolution.padding,
                                                   dilations=convolution.dilation)
    return lambda x, w: tf.nn.conv2d(x, w, strides, convolution.padding, dilations=convolution.dilation)


def _gradients(convolution: Convolution, x: tf.Tensor, w: tf.Tensor, upstream: tf.Tensor) -> List[tf.Tensor]:
    with tf.GradientTape() as tape:
        tape.watch([x, w])
        y = _apply(convolution)(x, w)
    return tape.gradient(y, [x, w], output_gradients=upstream)


def relative_errors(convolution: Convolution, batch_size: int, seed: int = 0) -> Tuple[float, float]:
    """(input gradient, kernel gradient) error of float32, traced as in training, against float64 on
    the same random inputs: the largest absolute difference over the largest float64 value."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(batch_size, *convolution.input_shape))
    w = rng.normal(size=convolution.kernel_shape)
    out_shape = _apply(convolution)(tf.zeros((1, *convolution.input_shape), tf.float64),
                                    tf.constant(w, tf.float64)).shape
    upstream = rng.normal(size=(batch_size, *out_shape[1:]))
    float32 = tf.function(lambda *args: _gradients(convolution, *args))
    got = float32(*(tf.constant(a, tf.float32) for a in (x, w, upstream)))
    want = _gradients(convolution, *(tf.constant(a, tf.float64) for a in (x, w, upstream)))
    return tuple(float(np.max(np.abs(g.numpy() - r.numpy())) / max(float(np.max(np.abs(r.numpy()))), 1e-30))
                 for g, r in zip(got, want))


def check(model: tf.keras.Model, batch_size: int) -> Dict:
    """Every distinct convolution of `model` checked at `batch_size`: a record for the profile, with the
    wrong ones (over TOLERANCE) named."""
    results = []
    for convolution in convolutions(model):
        input_error, kernel_error = relative_errors(convolution, batch_size)
        results.append(dict(convolution=convolution.describe(), input_gradient=input_error,
                            kernel_gradient=kernel_error))
    wrong = [r for r in results if max(r["input_gradient"], r["kernel_gradient"]) > TOLERANCE]
    return dict(checked=len(results), batch_size=batch_size, tolerance=TOLERANCE, wrong=wrong,
                largest_error=max((max(r["input_gradient"], r["kernel_gradient"]) for r in results), default=0.0))


def warning(record: Dict) -> str:
    """What a user is told when a check found wrong gradients ("" when it found none)."""
    if not record.get("wrong"):
        return ""
    first = record["wrong"][0]
    error = max(first["input_gradient"], first["kernel_gradient"])
    return (f"this machine's TensorFlow computes WRONG convolution gradients for {len(record['wrong'])} of the "
            f"model's {record['checked']} convolution shapes (e.g. {first['convolution']}: off by a relative "
            f"{error:.2g} from float64); training on them is not training the model. Run with {REMEDY} (TensorFlow's "
            f"oneDNN kernels off, slower) and profile again")
