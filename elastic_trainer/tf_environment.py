"""Import this module before anything that imports TensorFlow: entry points (main.py,
profiler.py, scripts/, bench/) import it first, so TensorFlow starts with the project's settings
(quiet C++ logging, oneDNN kernels on x86-64, no add-ons banner; see
prepare_tensorflow_environment) without a call between the imports. It imports nothing of the
project (the package's __init__ is empty), so nothing else loads before those settings are made.
"""
import logging
import os
import platform
import warnings


def prepare_tensorflow_environment() -> None:
    """Settings that must be made before TensorFlow is imported; call it first in every CLI.

    Silences TensorFlow's start-up chatter and the tensorflow-addons banner, turns on the CPU
    allocator that keeps memory statistics and, on x86-64, oneDNN kernels, which TF 2.15 enables by
    default only on recent CPUs and without which steps are much slower
    (docs/benchmarks/reproducibility.md). TF_ENABLE_ONEDNN_OPTS=0 opts out.
    """
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # errors still surface as Python exceptions
    # The CPU allocator keeps statistics (for the memory model, --memory_budget_mb) only as BFC, which is
    # no slower (docs/benchmarks/memory.md). TF_CPU_ALLOCATOR_USE_BFC=false opts out.
    os.environ.setdefault("TF_CPU_ALLOCATOR_USE_BFC", "true")
    if platform.machine().lower() in ("x86_64", "amd64"):
        os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")
    warnings.filterwarnings("ignore", message=r"(?s).*TensorFlow Addons")
    warnings.filterwarnings("ignore", message=r".*Tensorflow Addons supports using Python ops.*")
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    # One compiled step per selection is deliberate (see train_step.StepCache); TensorFlow's
    # "triggered tf.function retracing" advice does not apply.
    logging.getLogger("tensorflow").addFilter(
        lambda record: "triggered tf.function retracing" not in record.getMessage())


prepare_tensorflow_environment()
