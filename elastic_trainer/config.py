"""The resolved configuration of one training run: plain values, no TensorFlow.

It sits low in the import graph so that the loop (train.py), the schemes and the entry points
can all name it without importing each other.
"""
from __future__ import annotations

import dataclasses
from typing import Dict, Optional, Tuple


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """The resolved configuration of one run (saved as config.json next to its logs)."""

    model_name: str
    dataset_name: str
    train_type: str
    input_size: int
    batch_size: int
    num_classes: int
    optimizer: str
    learning_rate: float
    weight_decay: float
    num_epochs: int
    run_name: str
    save_model: bool
    save_txt: bool
    interval: float
    rho: float
    weights: str
    data_dir: Optional[str]
    seed: int
    profile: Optional[str]
    probe_batches: int
    logdir: str
    recalibrate: int
    bn_mode: str = "frozen"
    rho_mode: str = "exact"
    reference_steps: int = 0  # full steps timed against the final selection's after training (0: none)
    checkpoint_every: int = 0  # steps between mid-epoch checkpoints (0: at epoch ends only)
    checkpoint_seconds: float = 0.0  # an epoch end writes a checkpoint this long after the last (0: every one)
    resolution: int = 1000
    gf_radius: int = 0  # gradient filter patch size (0: off)
    gf_blocks: int = 0  # blocks filtered (0 when off)
    block_range: str = ""  # block_range_training's "FIRST:STOP" ("" for other schemes)
    validation: str = "none"  # the validation split: "fresh" (the dataset's own), "carved" (val_fraction of train), "none"
    val_fraction: float = 0.0  # share of the training split held out for validation (0 unless carved)
    energy_meter: str = "auto"  # energy.py's reader: none, auto, rapl, ina3221, nvml
    memory_budget_mb: float = 0.0  # elastic_training, sparse_update_training: the allocator's step peak (0: none)
    test_every_epoch: bool = False  # the original's per-epoch test curve (else: validation per epoch, test at the end)
    eval_every: int = 1  # epochs between the per-epoch evaluations (--eval_every; the last epoch is always evaluated)
    head_init: str = "glorot"  # a fresh classifier's start: glorot (Keras's, the original's) or zeros
    probe_mode: str = "auto"  # the importance probe's gradient calls: eager, traced, or auto (the cheaper, measured)
    time_budget: float = 0.0  # seconds of training the run plans for (--time_budget; 0: --num_epochs decides)
    step_plan: Tuple = ()  # a deadline's plan, [step, total steps] entries: recorded at the end, replayed by --config
    # the values of flags a scheme declares for itself (Scheme.add_flags) that have no field above
    scheme_options: Dict[str, object] = dataclasses.field(default_factory=dict)

    @property
    def gradient_filter(self) -> Tuple[int, int]:
        return (self.gf_radius, self.gf_blocks)
