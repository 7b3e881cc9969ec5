"""Import this module before anything that imports TensorFlow: entry points (main.py,
profiler.py, scripts/, bench/) import it first, so TensorFlow starts with the project's settings
(quiet C++ logging, oneDNN kernels on x86-64, no add-ons banner; see
utils.prepare_tensorflow_environment) without a call between the imports.
"""
from elastic_trainer.utils import prepare_tensorflow_environment

prepare_tensorflow_environment()
