"""The step functions issue 62's scripts time: a model by name (the registry's, or a Keras
application with random weights), its calibration selections, and their warm train steps."""
import numpy as np
import tensorflow as tf

import models
import profile_tables
import profiler
from train_step import TrainStep, make_optimizer, shared_forward

NAMES = ["head", "path", "full"] + [f"random {i + 1}" for i in range(4)]


def model_for(name: str, size: int) -> tf.keras.Model:
    """The model, seeded as every script of issue 62 builds it (64 classes, frozen BatchNorm)."""
    tf.keras.utils.set_random_seed(0)
    if name in models.MODELS:
        return models.build_model(name, 64, size, "none", "frozen")
    return models.build_keras_application(name, 64, size, "frozen")


def base_masks(points) -> list:
    """The classifier alone, the deepest tensor's point alone, and everything."""
    n = len(points)
    as_mask = lambda idx: np.isin(np.arange(n), idx).astype(np.uint8)  # noqa: E731
    return [as_mask(profile_tables.point_tensors(points, -1)), as_mask(profile_tables.point_tensors(points, 0)),
            np.ones(n, np.uint8)]


def seven_steps(name: str, size: int, batch: int):
    """NAMES' train steps (head, path, full, 4 random selections of seed 1), warm, on one random batch:
    (trainers, images, labels)."""
    model = model_for(name, size)
    points = profiler.tensor_points(model)
    masks = base_masks(points) + profiler._random_masks(points, 4, np.random.default_rng(1))
    setup = make_optimizer("sgd", 1e-4, 5e-4, 1000)
    images, labels = profiler.random_batch(model, batch, 0)
    forward = shared_forward(model)
    trainers = [TrainStep(model, setup.optimizer, [w for w, k in zip(model.trainable_weights, m) if k], forward=forward)
                for m in masks]
    for _ in range(profiler.WARM_UP_ROUNDS):
        for trainer in trainers:
            trainer(images, labels)[0].numpy()
    return trainers, images, labels
