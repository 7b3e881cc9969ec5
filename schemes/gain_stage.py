"""gain_stage_training: look once at where fine-tuning's gain lives, then train from that stage up.

The look, at the first selection: one optimizer update on the mean gradient of N training batches
(--look_batches), scored on as many validation batches (ImportanceProbe.pooled_loss_change; state
restored after) and summed per resolution stage. Unlike ElasticTrainer's importance, it is scored
on images the update was not made on. The stage with the largest positive total is where the gain
lives; every selection trains whole blocks from it up within the budget (then cheap tensors above
them, never a block below). Where the budget cannot hold the whole stage, steps alternate between
the stage's reach and the classifier alone so that the mean predicted step holds the target. Steps
are held open loop on the profile's predictions (whole blocks scale with the machine as a full step
does) at EXACT_SHARE or PAPER_SHARE of the user's budget. Measurements behind LOOK_IMAGES and the
shares: docs/benchmarks/selector.md.
"""
from __future__ import annotations

import math
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

import data
import selection_solver_DP as solver
from elastic_trainer.command_line import UserError
from models.blocks import blocks, resolution_stages
from schemes.base import Context, bn_plus_bias_mask, classifier_mask, kernels
from schemes.probe import PeriodicSelection, normalized
from schemes.time_budget import StepTimeController

LOOK_IMAGES = 384  # the default look: this many training images and as many validation images
EXACT_SHARE = 0.85  # of rho times the profile's full step (exact mode)
PAPER_SHARE = 0.90  # of the step the paper budget predicts (paper mode)
KEEP_SHARE = 0.95  # a running selection that spends at least this share of the target is kept


def block_of_tensors(model: tf.keras.Model) -> np.ndarray:
    """Each trainable tensor's block (forward order, counted from the input as --block_range
    counts), -1 for the classifier and any tensor in no block."""
    index = {id(variable): number for number, (_, layers) in enumerate(blocks(model))
             for layer in layers for variable in layer.trainable_weights}
    block_of = np.array([index.get(id(variable), -1) for variable in model.trainable_weights], np.int64)
    block_of[classifier_mask(model) == 1] = -1
    return block_of


def stage_sums(importance: np.ndarray, block_of: np.ndarray, stages: Sequence[Tuple[int, int]]) -> List[float]:
    """Each stage's total importance (the tensors of its blocks)."""
    return [float(importance[(block_of >= first) & (block_of < stop)].sum()) for first, stop in stages]


def gaining_stage(sums: Sequence[float]) -> int:
    """The stage with the largest positive total; the last stage (the top) when none is positive."""
    best = int(np.argmax(sums))
    return best if sums[best] > 0 else len(sums) - 1


def stage_first_scores(block_of: np.ndarray, first: int, stop: int) -> np.ndarray:
    """Per-tensor scores under which select_window's best window holds as much of blocks first..stop-1
    as fits, then as much above them as fits, and nothing below: a stage tensor outweighs all tensors
    above it together, and a tensor below costs more than the rest can bring. The classifier scores 0."""
    count = len(block_of)
    scores = np.zeros(count)
    scores[block_of >= stop] = 1.0
    scores[(block_of >= first) & (block_of < stop)] = count + 1.0
    scores[(block_of >= 0) & (block_of < first)] = -(count + 1.0) ** 2
    return scores


def nothing_below(mask: np.ndarray, block_of: np.ndarray, first: int) -> np.ndarray:
    """`mask`, or all zeros when it trains a block below block `first` (the scores still rank windows
    below the stage when only those fit; none of them is taken)."""
    below = (block_of >= 0) & (block_of < first)
    return np.zeros_like(mask) if (mask.astype(bool) & below).any() else mask


def nearest_window(select: Callable[[np.ndarray], np.ndarray], block_of: np.ndarray, first: int,
                   stop: int) -> np.ndarray:
    """The window (from `select`, scores -> mask) holding as much of blocks first..stop-1 as fits;
    when none of them fits, the window whose first block is the lowest above them that fits, with
    as many tensors above it as fit. All zeros when no window from `first` up fits."""
    for low, high in [(first, stop)] + [(block, block + 1) for block in range(stop, int(block_of.max()) + 1)]:
        mask = nothing_below(select(stage_first_scores(block_of, low, high)), block_of, low)
        if (mask.astype(bool) & (block_of >= low) & (block_of < high)).any():
            return mask
    return np.zeros(len(block_of), np.uint8)


def fill_above(mask: np.ndarray, t_dw_ms: np.ndarray, room_ms: float) -> np.ndarray:
    """`mask` (forward order) plus, from just above its deepest tensor upward, every untrained tensor
    whose weight gradient still fits in `room_ms`, first come first taken: above the deepest trained
    tensor the backward pass already runs, so a tensor there costs its t_dw alone."""
    filled = mask.copy()
    trained = np.flatnonzero(mask)
    if not len(trained):
        return filled
    for index in range(int(trained[0]) + 1, len(mask)):
        if not filled[index] and t_dw_ms[index] <= room_ms:
            filled[index] = 1
            room_ms -= t_dw_ms[index]
    return filled


def reach_from(block_of: np.ndarray, first: int) -> np.ndarray:
    """Every tensor from block `first`'s first one (forward order) up, the classifier included."""
    mask = np.zeros(len(block_of), np.uint8)
    mask[int(np.flatnonzero(block_of == first)[0]):] = 1
    return mask


def weighted_median_ms(samples: Dict[str, Sequence[float]]) -> float:
    """Each kind's median step time weighted by its share of the steps (nan without steps)."""
    total = sum(len(times) for times in samples.values())
    if not total:
        return float("nan")
    return sum(len(times) * float(np.median(times)) for times in samples.values() if len(times)) / total


def held_ratio(user: StepTimeController, share: float) -> float:
    """The step-time ratio the steps are held at: `share` of the user's (paper mode: of the paper
    budget's step over a full step), not below the smallest feasible ratio unless the user's is."""
    ratio = user.rho if user.rho_mode == "exact" else (user.T_fp_ms + user.budget_ms()) / user.T_full_ms
    smallest = solver.smallest_feasible_rho(user.t_dy, user.t_dw, user.T_fp_ms, user.T_full_ms)
    return max(share * ratio, min(ratio, smallest))


class GainStageTraining(PeriodicSelection):
    """One look names the stage where the gain lives; every selection trains whole blocks from it up."""

    train_type = "gain_stage_training"
    accepts_memory_budget = False
    overhead_parts = ("probe_trace", "probe_calls", "probe", "dp")  # the look is the probe
    once_parts = ("probe_trace", "probe_calls", "probe")  # later selections only place the window
    session_parts = ()  # ... so a resumed process's selections trace no probe
    KINDS = ("whole", "reach", "head")  # a period's own selection, the rotation's two steps

    @classmethod
    def add_flags(cls, flag) -> None:
        flag("--look_batches", type=int, default=None, metavar="N",
             help=f"batches of the one look at where the gain lives (default: {LOOK_IMAGES} images' worth)")

    @classmethod
    def check_flags(cls, args) -> None:
        if args.look_batches is not None and args.look_batches < 1:
            raise UserError(f"--look_batches is a number of batches, at least 1, not {args.look_batches}")
        if args.recalibrate:
            raise UserError("gain_stage_training holds its steps on the profile's predicted times; --recalibrate "
                            "goes with elastic_training")
        if args.probe_batches != 1:
            raise UserError(f"gain_stage_training looks once, at --look_batches batches; --probe_batches "
                            f"{args.probe_batches} goes with elastic_training (use --look_batches)")

    @classmethod
    def run_name_parts(cls, args) -> List[str]:
        return [f"look{args.look_batches}"] if args.look_batches is not None else []

    @classmethod
    def step_ratio_target(cls, config) -> float:
        """EXACT_SHARE of rho in exact mode; none in paper mode, as ElasticTrainer's."""
        return EXACT_SHARE * config.rho if config.rho_mode == "exact" else float("nan")

    @classmethod
    def check(cls, model: tf.keras.Model, config) -> None:
        if not blocks(model):
            raise UserError(f"gain_stage_training trains ranges of convolutional blocks, and {model.name} has none; "
                            f"use elastic_training")
        head = {id(w) for w, in_head in zip(model.trainable_weights, classifier_mask(model)) if in_head}
        head_kernels = [kernel for kernel in kernels(model) if id(kernel) in head]
        if head_kernels and not any(np.any(kernel.numpy()) for kernel in head_kernels):
            raise UserError("gain_stage_training's look scores each stage by one update through the classifier, and "
                            "this classifier starts at zero (--head_init zeros), so no update reaches the backbone "
                            "and the look would read rounding noise; drop --head_init zeros")

    @classmethod
    def look_batches(cls, config) -> int:
        """The look's training batches (and as many validation ones): --look_batches, or LOOK_IMAGES' worth."""
        return config.scheme_options.get("look_batches") or math.ceil(LOOK_IMAGES / config.batch_size)

    @classmethod
    def selection_calls(cls, config) -> Tuple[int, int]:
        return 0, 2 * cls.look_batches(config)  # the look, at the first selection alone

    @classmethod
    def check_data(cls, config, steps_per_epoch: int, validation_images: Optional[int]) -> None:
        """Refuse a look longer than the validation split: it would score some images twice."""
        count, size = cls.look_batches(config), config.batch_size
        full = (validation_images or 0) // size
        if validation_images is None or count <= full:  # no split: the look scores later training batches
            return
        where = (f"the look scores {count} validation batches of {size} ({count * size} images), but "
                 f"{config.dataset_name}'s validation split has {validation_images} images ({full} full batches)")
        if config.scheme_options.get("look_batches"):
            raise UserError(f"{where}; use --look_batches {full} or fewer" if full else
                            f"{where}; use a smaller --batch_size")
        fewer = f", or look at fewer with --look_batches {full} (less reliable)" if full else ""
        raise UserError(f"{where}: a look that names the stage reliably needs {count * size} validation images; "
                        f"give it a validation split that large (a larger --val_fraction, or a validation/ folder)"
                        f"{fewer}, or use elastic_training")

    @classmethod
    def make_controller(cls, context: Context) -> StepTimeController:
        """Steps held open loop at a share of the user's budget (which is checked feasible first)."""
        config = context.config
        share = EXACT_SHARE if config.rho_mode == "exact" else PAPER_SHARE
        held = held_ratio(super().make_controller(context), share)
        return StepTimeController(context.profile, held, config.resolution, "exact").open_loop()

    def __init__(self, context: Context):
        super().__init__(context)
        model, config = context.model, context.config
        self.block_of = block_of_tensors(model)
        self.cheap = bn_plus_bias_mask(model) & (1 - self.head)
        self.stages = resolution_stages(model)
        self.look_count = self.look_batches(config)
        self.held_out = None  # the validation split in an order of the run's seed, full batches only
        if context.validation is not None:
            shuffled = context.validation.unbatch().shuffle(self.look_count * config.batch_size, seed=config.seed,
                                                            reshuffle_each_iteration=False)
            self.held_out = data.FixedEpochs(shuffled.batch(config.batch_size, drop_remainder=True))
        self.held_out_position = 0  # validation batches taken so far
        self.look: Optional[np.ndarray] = None  # each tensor's loss change on held-out images, once looked
        self.sums: List[float] = []  # the look's total over each stage
        self.stage: Optional[int] = None  # the index in `stages` of the stage where the gain lives
        self.reach: Optional[np.ndarray] = None  # while the period rotates
        self.whole: Optional[np.ndarray] = None  # the last selection trained on every step of its period
        self.debt_ms = 0.0  # the running sum of each rotating step's predicted time minus the target
        self.kind = "whole"  # of the step handed out last
        self.samples: Dict[str, List[float]] = {kind: [] for kind in self.KINDS}  # measured steps by kind
        self.period_steps: Dict[str, int] = {kind: 0 for kind in self.KINDS}

    # --- a selection: the look (once), then the window from the stage up ---

    def reselect(self, step: int) -> Dict[str, float]:
        steps = sum(self.period_steps.values())
        shares = {f"rotation/{kind}_share": count / steps for kind, count in self.period_steps.items() if steps}
        self.period_steps = {kind: 0 for kind in self.KINDS}
        info = self.controller.end_period(self.mask) if self.selections else {}
        if self.look is None:
            config = self.context.config
            self.facts["probe"] = self.probe.plan(self.selection_calls(config)[1], config.probe_mode,
                                                  self.context.profile)
            self._set_look(self.probe.accounted(self.overhead, self._looked))
        self.last_importance = normalized(self.look)
        with self.timed("dp"):
            mask = self.choose()
        self.mask = mask if mask.any() else self.head.copy()
        self.selections += 1
        first, stop = self.stages[self.stage]
        return {**info, "selection/trained_fraction": float(self.mask.mean()),
                "selection/predicted_ratio": self.controller.predicted_ms(self.mask) / self.controller.T_full_ms,
                "gain_stage/first_block": first, "gain_stage/stop_block": stop,
                **{f"gain_stage/stage{index}_sum": value for index, value in enumerate(self.sums)},
                **shares, "rotation/on": float(self.reach is not None)}

    def _looked(self) -> np.ndarray:
        """The look: the update on the mean gradient of the next `look_count` probe batches, scored by
        the mean gradient of as many validation batches (without a split, the next probe batches)."""
        batches = self.probe_batches(self.look_count)
        if self.held_out is None:
            scored = self.probe_batches(self.look_count)
        else:
            scored = self.held_out.probe(self.held_out_position, self.look_count)
            self.held_out_position += self.look_count
        return self.probe.pooled_loss_change(batches, scored)

    def _set_look(self, look: np.ndarray) -> None:
        self.look = look
        self.sums = stage_sums(look, self.block_of, self.stages)
        self.stage = gaining_stage(self.sums)

    def choose(self) -> np.ndarray:
        """This period's selection: the running one while it still spends the budget, else the nearest
        window from the stage up with the room it leaves filled; the reach (rotating) when that does not
        hold the whole stage; joined with the longest top that fits when it spends too little."""
        controller = self.controller
        target_ms = controller.T_fp_ms + controller.budget_ms()
        first, stop = self.stages[self.stage]
        if self.selections and KEEP_SHARE * target_ms <= controller.predicted_ms(self.mask) <= target_ms:
            mask = self.mask.copy()
        else:
            mask = nearest_window(self._window, self.block_of, first, stop)
            room_ms = controller.budget_ms() - (controller.predicted_ms(mask) - controller.T_fp_ms)
            mask = fill_above(mask, controller.t_dw[::-1], room_ms)
        if not mask.astype(bool)[(self.block_of >= first) & (self.block_of < stop)].all():
            self.reach = reach_from(self.block_of, first)
            return self.reach.copy()
        self.reach = None
        if controller.predicted_ms(mask) < KEEP_SHARE * target_ms:
            joined = mask | controller.static_top()
            if controller.predicted_ms(mask) < controller.predicted_ms(joined) <= target_ms:
                mask = joined
        self.whole = mask
        return mask.copy()

    def _window(self, scores: np.ndarray) -> np.ndarray:
        """The best window of whole blocks under `scores` within the budget (select_window)."""
        return self.controller.select_window(scores, self.block_of, self.head, self.cheap)

    # --- the steps: the period's selection, or the rotation's reach and classifier ---

    def step_mask(self, step: int) -> np.ndarray:
        if self.reach is None:
            self.kind, mask = "whole", self.mask
        elif self.debt_ms <= 0:
            self.kind, mask = "reach", self.reach
        else:
            self.kind, mask = "head", self.head
        if self.reach is not None:
            self.debt_ms += self.controller.predicted_ms(mask) - self.controller.target_ms
        self.period_steps[self.kind] += 1
        return mask

    def observe_step(self, step_ms: float) -> None:
        self.samples[self.kind].append(step_ms)
        if self.kind != "head":  # the period's report compares its selection with its prediction
            self.controller.observe(step_ms)

    def typical_step_ms(self, step_ms: Sequence[float]) -> float:
        return weighted_median_ms(self.samples)

    def step_mix(self) -> List[Tuple[np.ndarray, float]]:
        steps = sum(len(times) for times in self.samples.values())
        if self.reach is None or not steps:
            return super().step_mix()
        shares = {kind: len(times) / steps for kind, times in self.samples.items()}
        mix = [(self.reach, shares["reach"]), (self.head, shares["head"])]
        return mix + ([(self.whole, shares["whole"])] if self.whole is not None else [])

    def state(self) -> Dict:
        return {**super().state(), "held_out_position": self.held_out_position,
                "look": None if self.look is None else self.look.tolist(),
                "reach": None if self.reach is None else self.reach.tolist(),
                "whole": None if self.whole is None else self.whole.tolist(), "debt_ms": self.debt_ms,
                "kind": self.kind, "samples": {kind: list(times) for kind, times in self.samples.items()},
                "period_steps": dict(self.period_steps)}

    def load_state(self, state: Dict) -> None:
        super().load_state(state)
        self.held_out_position = state["held_out_position"]
        if state["look"] is not None:  # the stage and the sums follow from it
            self._set_look(np.array(state["look"]))
        self.reach, self.whole = (None if state[name] is None else np.array(state[name], np.uint8)
                                  for name in ("reach", "whole"))
        self.debt_ms, self.kind = state["debt_ms"], state["kind"]
        self.samples = {kind: list(state["samples"][kind]) for kind in self.KINDS}
        self.period_steps = dict(state["period_steps"])
