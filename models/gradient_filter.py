"""Gradient filtering (Yang et al., "Efficient On-device Training via Gradient Filtering",
CVPR 2023) for TensorFlow.

The gradient map flowing back into a convolution, dY (batch, H, W, C_out), is replaced by its
averages over r x r patches, dY~ (H/r x W/r distinct values). Both gradients of the convolution
are then computed on dY~ exactly, as if the full-size filtered map had been back-propagated, at
about 1/r^2 of the work (and equal the true gradients when dY is constant on patches). With s the
convolution's stride:

    weights:  dW = conv_backprop_filter(B, dY~, stride r*s), where B = box sums of the padded
              input over r x r windows of its positions that one patch reads (dilation s);
    inputs:   dX = box sums, over r x r windows (dilation s), of
              conv_transpose(dY~, W, stride r*s), cropped to the input.

Depthwise convolutions use their own backprop ops, 1x1 ones strided sums and a repetition. Patches
tile the map from its top-left corner; a side shorter than r is one patch, a longer side must be a
multiple of r (else `apply` refuses the radius). Convolutions with dilation or groups stay exact.
`apply` changes the layers' class in place (weights, names and files unchanged) and must run
before the model is first called in a tf.function.
"""
from __future__ import annotations

from typing import List, Sequence, Tuple

import tensorflow as tf

from elastic_trainer.command_line import UserError
from models.blocks import CONVOLUTIONS, blocks

RADII = (2, 4, 7)  # the Gradient Filtering paper's patch sizes
DEFAULT_RADIUS = 2  # gradient_filter_training's --gf_radius when none is given
DEFAULT_BLOCKS = 4  # --gf_blocks
# Depthwise convolutions keep their exact gradient unless asked (`apply(..., depthwise=True)`): their
# backward pass is as cheap as the filter's averaging (docs/benchmarks/methods.md, "Gradient filtering").
FILTER_DEPTHWISE = False


def _pad_amounts(size: int, kernel: int, stride: int, padding: str) -> Tuple[int, int, int]:
    """(before, after, output size) of one spatial axis, as TensorFlow pads it."""
    if padding == "valid":
        return 0, 0, (size - kernel) // stride + 1
    out = -(-size // stride)
    total = max((out - 1) * stride + kernel - size, 0)
    return total // 2, total - total // 2, out


def _box_sum(x: tf.Tensor, window: Sequence[int], dilation: Sequence[int]) -> tf.Tensor:
    """Sums of x over windows of window[0] x window[1] positions spaced dilation apart (VALID,
    stride 1), one axis at a time."""
    for axis, (size, step) in enumerate(zip(window, dilation)):
        if size == 1:
            continue
        shape = [size, 1] if axis == 0 else [1, size]
        steps = [step, 1] if axis == 0 else [1, step]
        if step == 1:
            x = tf.nn.avg_pool2d(x, shape, 1, "VALID")
        else:
            x = tf.nn.pool(x, shape, "AVG", padding="VALID", dilations=steps)
        x = x * float(size)
    return x


def filtered_convolution(x: tf.Tensor, kernel: tf.Tensor, *, strides: Sequence[int], padding: str,
                         radius: Sequence[int], depthwise: bool) -> tf.Tensor:
    """A stride-`strides` 2-D convolution (NHWC; `padding` "same" or "valid") whose backward
    pass uses the r x r patch-averaged output gradient, r = `radius` per axis (each dividing
    the output's side)."""
    sh, sw = strides
    rh, rw = radius

    def convolve(inputs, weights):
        if depthwise:
            return tf.nn.depthwise_conv2d(inputs, weights, [1, sh, sw, 1], padding.upper())
        return tf.nn.conv2d(inputs, weights, [1, sh, sw, 1], padding.upper())

    @tf.custom_gradient
    def op(inputs, weights):
        outputs = convolve(inputs, weights)

        def gradient(upstream):
            reduced = tf.nn.avg_pool2d(upstream, [rh, rw], [rh, rw], "VALID")  # dY~
            if weights.shape[0] == weights.shape[1] == 1 and not depthwise:
                return _pointwise_gradients(inputs, weights, reduced, (sh, sw), (rh, rw))
            return _gradients(inputs, weights, reduced, (sh, sw), (rh, rw), padding, depthwise)

        return outputs, gradient

    return op(x, tf.convert_to_tensor(kernel))


def _gradients(inputs, weights, reduced, strides, radius, padding, depthwise):
    """Input and weight gradients of a convolution from its patch-averaged output gradient."""
    (sh, sw), (rh, rw) = strides, radius
    batch, height, width = tf.shape(inputs)[0], inputs.shape[1], inputs.shape[2]
    kh, kw = weights.shape[0], weights.shape[1]
    top, bottom, out_h = _pad_amounts(height, kh, sh, padding)
    left, right, out_w = _pad_amounts(width, kw, sw, padding)
    nh, nw = out_h // rh, out_w // rw
    padded = tf.pad(inputs, [[0, 0], [top, bottom], [left, right], [0, 0]])
    boxes = _box_sum(padded, (rh, rw), (sh, sw))
    stride = [1, rh * sh, rw * sw, 1]
    if depthwise:
        d_weights = tf.nn.depthwise_conv2d_backprop_filter(boxes, weights.shape, reduced, stride, "VALID")
    else:
        d_weights = tf.compat.v1.nn.conv2d_backprop_filter(boxes, weights.shape, reduced, stride, "VALID")
    spread_h, spread_w = (nh - 1) * rh * sh + kh, (nw - 1) * rw * sw + kw
    spread_shape = tf.stack([batch, spread_h, spread_w, inputs.shape[3]])
    if depthwise:
        spread = tf.nn.depthwise_conv2d_backprop_input(spread_shape, weights, reduced, stride, "VALID")
    else:
        spread = tf.nn.conv2d_transpose(reduced, weights, spread_shape, stride, "VALID")
    margin_h, margin_w = (rh - 1) * sh, (rw - 1) * sw
    spread = tf.pad(spread, [[0, 0], [margin_h, margin_h], [margin_w, margin_w], [0, 0]])
    d_padded = _box_sum(spread, (rh, rw), (sh, sw))  # rows the convolution read
    unread_h = height + top + bottom - (spread_h + margin_h)
    unread_w = width + left + right - (spread_w + margin_w)
    d_padded = tf.pad(d_padded, [[0, 0], [0, unread_h], [0, unread_w], [0, 0]])
    return d_padded[:, top:top + height, left:left + width, :], d_weights


def _pointwise_gradients(inputs, weights, reduced, strides, radius):
    """The same for a 1x1 convolution, cheaper: it reads each patch's inputs once (no padding
    either way), so the box sums are a strided pooling and the input gradient a repetition."""
    (sh, sw), (rh, rw) = strides, radius
    height, width, channels = inputs.shape[1], inputs.shape[2], inputs.shape[3]
    read = inputs[:, ::sh, ::sw, :]  # the positions the convolution reads
    read = read[:, :reduced.shape[1] * rh, :reduced.shape[2] * rw, :]
    sums = tf.nn.avg_pool2d(read, [rh, rw], [rh, rw], "VALID") * float(rh * rw)
    kernel = weights[0, 0]  # (C_in, C_out)
    d_weights = tf.einsum("bhwi,bhwo->io", sums, reduced)[None, None]
    per_patch = tf.einsum("bhwo,io->bhwi", reduced, kernel)
    d_read = tf.repeat(tf.repeat(per_patch, rh, axis=1), rw, axis=2)
    if (sh, sw) != (1, 1):  # back to the input's grid: the positions between reads get zero
        d_read = tf.pad(d_read[:, :, None, :, None, :], [[0, 0], [0, 0], [0, sh - 1], [0, 0], [0, sw - 1], [0, 0]])
        d_read = tf.reshape(d_read, [-1, reduced.shape[1] * rh * sh, reduced.shape[2] * rw * sw, channels])
    rows, columns = d_read.shape[1], d_read.shape[2]
    d_inputs = tf.pad(d_read, [[0, 0], [0, max(height - rows, 0)], [0, max(width - columns, 0)], [0, 0]])
    return d_inputs[:, :height, :width, :], d_weights


class _Filtered:
    """Mixin of a filtered convolution layer: its convolution runs `filtered_convolution`."""

    gradient_filter_radius: Tuple[int, int] = (1, 1)

    def _filtered(self, inputs, kernel):
        return filtered_convolution(inputs, kernel, strides=self.strides, padding=self.padding,
                                    radius=self.gradient_filter_radius,
                                    depthwise=isinstance(self, tf.keras.layers.DepthwiseConv2D))


class FilteredConv2D(_Filtered, tf.keras.layers.Conv2D):
    def convolution_op(self, inputs, kernel):
        return self._filtered(inputs, kernel)


class FilteredDepthwiseConv2D(_Filtered, tf.keras.layers.DepthwiseConv2D):
    def call(self, inputs):
        outputs = self._filtered(inputs, self.depthwise_kernel)
        if self.use_bias:
            outputs = tf.nn.bias_add(outputs, self.bias)
        return self.activation(outputs) if self.activation is not None else outputs


def last_blocks(model: tf.keras.Model, count: int) -> List[Tuple[str, List[tf.keras.layers.Layer]]]:
    """The last `count` blocks; UserError when the model has no convolutional blocks or fewer."""
    found = blocks(model)
    if not found:
        raise UserError(f"{model.name} has no convolutional blocks: gradient filtering is for CNN backbones")
    if not 1 <= count <= len(found):
        raise UserError(f"--gf_blocks must be between 1 and {len(found)} (the blocks of {model.name}), got {count}")
    return found[-count:]


def apply(model: tf.keras.Model, radius: int, count: int, depthwise: bool = FILTER_DEPTHWISE) -> List[str]:
    """Filter the gradients of the convolutions in the model's last `count` blocks with r x r
    patches (depthwise ones only with `depthwise`); return the names of the convolutions
    filtered (a side of 1 leaves nothing to average: such maps stay exact)."""
    if radius < 2:
        raise UserError(f"the gradient filter's radius must be at least 2 (e.g. one of {RADII}), got {radius}")
    plan = []
    for _, layers in last_blocks(model, count):
        for layer in layers:
            if not isinstance(layer, CONVOLUTIONS) or isinstance(layer, _Filtered):
                continue
            if isinstance(layer, tf.keras.layers.DepthwiseConv2D) and not depthwise:
                continue
            if tuple(layer.dilation_rate) != (1, 1) or getattr(layer, "groups", 1) != 1 \
                    or layer.data_format != "channels_last":
                continue
            sides = layer.output_shape[1:3]
            patch = tuple(min(radius, side) for side in sides)
            if any(side % r for side, r in zip(sides, patch)):
                raise UserError(f"--gf_radius {radius} does not tile the {sides[0]}x{sides[1]} output of "
                                f"{layer.name} (in the last {count} blocks): choose a radius that divides its "
                                f"sides, or fewer --gf_blocks")
            if patch != (1, 1):
                plan.append((layer, patch))
    for layer, patch in plan:
        filtered = FilteredDepthwiseConv2D if isinstance(layer, tf.keras.layers.DepthwiseConv2D) else FilteredConv2D
        layer.__class__ = filtered
        layer.gradient_filter_radius = patch
    return [layer.name for layer, _ in plan]


def filtered_block_layers(model: tf.keras.Model, count: int) -> List[tf.keras.layers.Layer]:
    """Every layer with weights in the last `count` blocks (what gradient_filter_training trains)."""
    return [layer for _, layers in last_blocks(model, count) for layer in layers]
