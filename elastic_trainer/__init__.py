"""The support code the entry points (main.py, profiler.py) and the loop (train.py) import: flags
and configuration, a run's outputs and summary, measurements, checkpoints, the deadline's plan.

Empty on purpose: `import elastic_trainer.tf_environment`, which every entry point does before
TensorFlow loads, must load nothing else.
"""
