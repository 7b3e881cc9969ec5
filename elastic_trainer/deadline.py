"""A wall-clock deadline for a run (--time_budget): how many steps fit in it, planned before the
first step and planned again as steps are measured, so that the learning-rate schedule ends at
the deadline (budget-aware training: a schedule that ends at the budget, not one cut short).

Time counts as a run's `train_seconds` does: steps, data, selections and the compiles of new
steps; not evaluation or checkpoints. The plan is a list of [step, total steps] entries, one per
planning; replaying it (a run's config.json records it as `step_plan`) repeats the same run on any
machine without reading a clock. docs/deadline.md says how to use it and what it measured.
"""
from __future__ import annotations

import dataclasses
import logging
import math
import re
from typing import Dict, List, Optional, Sequence

import numpy as np

import selection_solver_DP as solver
from elastic_trainer.command_line import UserError
from elastic_trainer.profile_tables import backward_tables
from elastic_trainer.run_summary import compile_seconds

UNITS = {"": 1.0, "s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}
WARM_STEPS = 8  # steps measured before the first plan that reads the clock
REPLANS = 4  # the next planning comes after a quarter of the steps left (more often near the end)
MIN_REPLAN_GAP = 5  # steps


def parse_duration(text: str) -> float:
    """Seconds of '90', '90s', '1.5m', '5min', '1h' or '1h30m'; ValueError for anything else."""
    spoken = str(text).strip().lower()
    parts = re.findall(r"(\d+(?:\.\d*)?|\.\d+)([a-z]*)", spoken)
    if not parts or "".join(number + unit for number, unit in parts) != spoken:
        raise ValueError(f"not a duration: {text!r}")
    seconds = 0.0
    for number, unit in parts:
        if unit not in UNITS or (unit == "" and len(parts) > 1):
            raise ValueError(f"not a duration: {text!r}")
        seconds += float(number) * UNITS[unit]
    if not (seconds > 0 and math.isfinite(seconds)):
        raise ValueError(f"not a positive duration: {text!r}")
    return seconds


def shown(seconds: float) -> str:
    """A budget as a user types it: '42s', '5m', '1h30m' (rounded up to whole seconds)."""
    whole = int(math.ceil(seconds - 1e-9))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    text = "".join(f"{value}{unit}" for value, unit in ((hours, "h"), (minutes, "m"), (secs, "s")) if value)
    return text or "0s"


@dataclasses.dataclass(frozen=True)
class Costs:
    """What the run's time is made of: one steady step with its data, one selection (its probe's
    calls, the DP and the compile of its new step), and what the run pays once (the probe's first
    call, which traces it; a fixed selection's compile)."""

    step_s: float
    selection_s: float = 0.0
    once_s: float = 0.0


def steps_that_fit(budget_s: float, spent_s: float, costs: Costs, selections_left: int,
                   once_left: bool = False, reserve_s: float = 0.0) -> int:
    """Steps the time left holds after the selections still to come (and the one-time costs, still
    to come at the start; and `reserve_s`, what a resumed process pays again): none when it holds none."""
    room = (budget_s - spent_s - max(selections_left, 0) * costs.selection_s - (costs.once_s if once_left else 0.0)
            - reserve_s)
    return max(0, int(math.floor(room / costs.step_s))) if costs.step_s > 0 else 0


def predicted_costs(profile: Optional[Dict], mask: np.ndarray, full_step: bool, step_ratio: float,
                    calls_each: int, calls_once: int) -> Optional[Costs]:
    """The costs a profile predicts before any step (None without a profile): a full step's time,
    `step_ratio` of it for a scheme that aims at a ratio (nan: the profile's sum for `mask`); a
    selection as its probe's gradient calls (`calls_each`) and a compile; once, the probe's trace
    and the calls only the first selection makes (`calls_once`, e.g. gain_stage's look), or a
    compile when nothing probes. Compile and trace come from the profile's probe costs, else its
    first calls (none in older profiles)."""
    if not profile:
        return None
    if full_step:
        step_ms = float(profile["T_full_ms"])
    elif math.isfinite(step_ratio):
        step_ms = step_ratio * float(profile["T_full_ms"])
    else:
        t_dy, t_dw = backward_tables(profile)
        step_ms = float(profile["T_fp_ms"]) + float(solver.backward_time(t_dy, t_dw, np.asarray(mask)[::-1]))
    probe = profile.get("probe_costs") or profile.get("first_calls") or {}  # fresh processes', else the profiler's
    compile_ms = max(float(probe.get("traced_step_first_ms", 0.0)) - step_ms, 0.0)
    probe_ms = float(probe.get("traced_ms", profile["T_full_ms"]))
    selection_ms = compile_ms + calls_each * probe_ms
    trace_ms = max(float(probe.get("traced_first_ms", 0.0)) - probe_ms, 0.0)
    once_ms = trace_ms + calls_once * probe_ms if calls_each + calls_once else compile_ms
    return Costs(step_ms / 1000, selection_ms / 1000, once_ms / 1000)


def measured_costs(spent_s: float, steps: int, selection_seconds: Sequence[float], once_s: float,
                   compile_s: float, compiles: int) -> Optional[Costs]:
    """The costs measured so far (None before a steady step): a step as the time spent outside
    selections and compiles' extra over all `steps` (data and each epoch's start included); a
    selection as their mean with a compile, without what only the first paid (`once_s`)."""
    steady = steps - compiles
    if steady <= 0:
        return None
    selections = float(sum(selection_seconds))
    step_s = max(spent_s - selections - compile_s, 1e-6) / steps  # compile_s: only what first calls took beyond a step
    if not len(selection_seconds):
        return Costs(step_s, 0.0, compile_s)
    return Costs(step_s, max(selections - once_s + compile_s, 0.0) / len(selection_seconds), once_s)


class Deadline:
    """A run's plan of steps under --time_budget: `plan` ([step, total] entries, checkpointed with
    the loop's state) and, replaying a recorded plan (`recorded`), the same entries at the same
    steps with no clock read."""

    def __init__(self, budget_s: float, selections: int, plan: List[List[int]],
                 recorded: Sequence[Sequence[int]] = ()):
        self.budget_s, self.selections = budget_s, selections
        self.plan = plan  # the loop state's own list: entries added here are checkpointed with it
        self.recorded = [list(map(int, entry)) for entry in recorded]
        self.costs: Optional[Costs] = None
        self.next_replan = WARM_STEPS if not plan else 0  # resumed: plan again at once, from what was measured
        self.replayed = len(plan)  # recorded entries followed so far (a resumed replay's plan is their prefix)
        self.session = (0.0, 0.0)  # what this process pays again, resumed: its step's compile, the probe's trace
        self.session_start: Optional[tuple] = None  # (step, selections made) at this process's first planning

    def resumed(self, compile_s: float, trace_s: float) -> None:
        """A resumed process compiles its step again and (a selection still to come) traces the probe
        again: the plan holds room for each until it is paid (the first step; the first selection)."""
        self.session = (compile_s, trace_s)

    def unpaid(self, step: int, selections_made: int) -> float:
        """Seconds of this process's repeated first calls still to come at `step`."""
        if self.session_start is None:
            self.session_start = (step, selections_made)
        first_step, first_made = self.session_start
        compile_s = self.session[0] if step == first_step else 0.0
        trace_s = self.session[1] if selections_made == first_made < self.selections else 0.0
        return compile_s + trace_s

    @property
    def total(self) -> int:
        return self.plan[-1][1]

    @property
    def replaying(self) -> bool:
        return bool(self.recorded)

    def start(self, costs: Optional[Costs], provisional: int) -> int:
        """The first plan: the profile's `costs`, else `provisional` steps until measured."""
        if self.replaying:
            self.plan.append(list(self.recorded[0]))
            self.replayed = 1
        else:
            self.costs = costs
            total = steps_that_fit(self.budget_s, 0.0, costs, self.selections, True) if costs else provisional
            self.plan.append([0, total])
        return self.total

    def smallest(self, costs: Costs, steps_per_epoch: int) -> float:
        """Seconds one epoch takes with the run's selections and first compile."""
        return steps_per_epoch * costs.step_s + self.selections * costs.selection_s + costs.once_s

    def before_step(self, step: int, spent_s: float, selections_made: int, measure,
                    selecting: bool = False) -> Optional[int]:
        """At the start of step `step` (`spent_s` so far; `selecting`: a selection is due before
        it): a new total when the plan changes (`step` itself when the run ends here), else None.
        `measure()` gives the Costs measured so far (None before a steady step)."""
        if self.replaying:
            changed = None
            while self.replayed < len(self.recorded) and self.recorded[self.replayed][0] <= step:
                self.plan.append(list(self.recorded[self.replayed]))  # every entry of a step, in order
                self.replayed += 1
                changed = self.total
            return changed
        reserve = self.unpaid(step, selections_made)
        if step >= self.next_replan and step < self.total:
            costs = measure()
            if costs is not None:
                self.costs = costs
                total = step + steps_that_fit(self.budget_s, spent_s, costs, self.selections - selections_made,
                                              reserve_s=reserve)
                self.next_replan = self._after(step, total)
                if total != self.total:
                    self.plan.append([step, total])
                    return total
        upcoming = self.costs.step_s + (self.costs.selection_s if selecting else 0.0) + reserve if self.costs else 0.0
        if step < self.total and self.costs is not None and spent_s + upcoming > self.budget_s:
            self.plan.append([step, step])  # the clock is up before the plan: end here
            return step
        return None

    @staticmethod
    def _after(step: int, total: int) -> int:
        return step + max(MIN_REPLAN_GAP, (total - step) // REPLANS)

    def done(self, step: int) -> bool:
        return step >= self.total

    def facts(self, spent_s: float, steps: int, steps_per_epoch: int) -> Dict:
        """What the summary records: the budget, the seconds spent, the first and last plans,
        the steps and epochs run and every planning."""
        return {"budget_seconds": self.budget_s, "spent_seconds": spent_s, "spent_share": spent_s / self.budget_s,
                "planned_steps": self.plan[0][1] if self.plan else 0, "steps": steps,
                "epochs": steps / steps_per_epoch, "planned_selections": self.selections, "plan": [list(e) for e in self.plan],
                "replayed": self.replaying}


def selections_in(total_steps: int, interval_steps: int) -> int:
    """How many selections a run of `total_steps` steps makes every `interval_steps` (the first at
    step 0): under a deadline a re-selecting scheme makes as many, spread over its planned steps."""
    return max(1, -(-total_steps // interval_steps))


def selection_due(step: int, made: int, selections: int, total: int) -> bool:
    """Whether the next of `selections` selections spread evenly over `total` steps is due at `step`."""
    return made < selections and step >= (made * total) // selections


def check_budget(budget_s: float, smallest_s: float, selections: int, steps_per_epoch: int) -> None:
    """UserError when the budget cannot hold one epoch and the run's selections."""
    if budget_s < smallest_s:
        what = f"one epoch ({steps_per_epoch} steps)" + (f" and its {selections} selection{'s' * (selections > 1)}"
                                                          if selections else "")
        raise UserError(f"--time_budget {shown(budget_s)} is too small: {what} take about {smallest_s:.1f} s by the "
                        f"profile; give at least --time_budget {shown(smallest_s * 1.05)}")


def open_plan(config, scheme, profile: Optional[Dict], plan: List[List[int]], steps_per_epoch: int) -> Deadline:
    """A run's Deadline under --time_budget: a resumed run's (`plan` holds its plannings so far), a
    replay's (config.step_plan), or a new run's first plan from the profile's predicted costs
    (UserError when the budget cannot hold one epoch and the run's selections)."""
    clock = Deadline(config.time_budget, scheme.planned_selections(), plan, config.step_plan)
    if plan:
        return clock
    costs = predicted_costs(profile, scheme.mask, scheme.full_step, scheme.step_ratio_target(config),
                            *scheme.selection_calls(config))
    if costs is not None and not clock.replaying:
        check_budget(config.time_budget, clock.smallest(costs, steps_per_epoch), clock.selections, steps_per_epoch)
    clock.start(costs, steps_per_epoch * config.num_epochs)
    logging.info("time budget %s: %d steps planned (%.1f epochs)%s", shown(config.time_budget), clock.total,
                 clock.total / steps_per_epoch, ", as recorded" if clock.replaying else
                 "" if costs else " until measured (no profile to predict the steps)")
    return clock


def costs_so_far(state, spent_s: float, once_parts: Sequence[str]) -> Optional[Costs]:
    """measured_costs from a run's loop state (train.LoopState): its steps, selections (their
    `once_parts`, the scheme's Scheme.once_parts, paid by the first alone) and compiling first calls."""
    step_ms = state.step_ms + list((state.epoch_totals or {}).get("step_ms", []))
    once = sum(parts.get(part, 0.0) for parts in state.selection_parts for part in once_parts)
    return measured_costs(spent_s, state.step, state.selection_seconds, once,
                          compile_seconds(state.first_call_ms, step_ms), len(state.first_call_ms))


def session_costs(state, session_parts: Sequence[str]) -> tuple:
    """What a resumed process pays again, from the run so far (train.LoopState): a step's compile (the
    run's mean first call beyond a step) and its first selection's `session_parts` (Scheme.session_parts)."""
    step_ms = state.step_ms + list((state.epoch_totals or {}).get("step_ms", []))
    compiles = len(state.first_call_ms)
    compile_s = compile_seconds(state.first_call_ms, step_ms) / compiles if compiles else 0.0
    trace_s = sum(state.selection_parts[0].get(part, 0.0) for part in session_parts) if state.selection_parts else 0.0
    return compile_s, trace_s


class RunDeadline:
    """A run under --time_budget as its loop follows it: the plan (open_plan's Deadline, its
    entries kept in the loop's checkpointed `state.plan`) and what follows each new plan, the
    optimizer's schedules (`setup`) and the scheme. Made once the loop's state is final (a
    resumed run's restored)."""

    def __init__(self, config, scheme, setup, profile: Optional[Dict], state, steps_per_epoch: int):
        self.scheme, self.setup, self.state, self.steps_per_epoch = scheme, setup, state, steps_per_epoch
        resumed = bool(state.plan) and not config.step_plan
        self.clock = open_plan(config, scheme, profile, state.plan, steps_per_epoch)
        if resumed:
            self.clock.resumed(*session_costs(state, scheme.session_parts))
        self._follow(self.clock.total)

    def _follow(self, total_steps: int) -> None:
        self.setup.plan(total_steps)
        self.scheme.plan(total_steps)

    def ends_here(self, spent_seconds: float) -> bool:
        """Before a step: plan again when due (a new plan moves the schedules' end); True when the
        deadline ends the run at this step."""
        state = self.state
        total = self.clock.before_step(state.step, spent_seconds, len(state.selection_seconds),
                                       lambda: costs_so_far(state, spent_seconds, self.scheme.once_parts),
                                       self.scheme.due(state.step))
        if total is not None:
            self._follow(total)
        return self.clock.done(state.step)

    def epochs(self) -> int:
        """The epochs the plan now takes (at least the one under way)."""
        return max(-(-self.clock.total // self.steps_per_epoch), self.state.epoch + 1)

    def epoch_label(self, epoch_number: int) -> str:
        """How the log names epoch `epoch_number` (1-based): its number and the plan's estimate, said
        as one (the run plans again as it measures, so the estimate moves; a count like 2/8 read as a
        bug when it became 2/9)."""
        return (f"{epoch_number} (the plan now: about {self.clock.total / self.steps_per_epoch:.1f} epochs "
                f"in {shown(self.clock.budget_s)})")

    def recorded(self, config):
        """`config` with the plan as run (config.json: replaying it repeats the run's steps anywhere)."""
        return dataclasses.replace(config, step_plan=tuple(map(tuple, self.state.plan)))

    def facts(self) -> Dict:
        return self.clock.facts(self.state.train_seconds, self.state.step, self.steps_per_epoch)


class RunLength:
    """How long a run is, as its loop asks: config.num_epochs epochs, or the steps its deadline
    plans (`deadline`: a RunDeadline under --time_budget, else None)."""

    def __init__(self, num_epochs: int, deadline: Optional[RunDeadline] = None):
        self.num_epochs, self.deadline = num_epochs, deadline

    def finished(self, state) -> bool:
        """Whether the run (`state`: train.LoopState) has taken its epochs, or its deadline's steps."""
        if self.deadline is not None:
            return self.deadline.ends_here(state.train_seconds)
        return state.epoch >= self.num_epochs

    def last_epoch(self, state) -> bool:
        """At the end of an epoch's steps (not yet counted in `state.epoch`): whether it is the run's
        last. Under a deadline, as the next finished() will say (asked twice at a step, the plan
        answers the same); a deadline that comes with the next epoch's first batch is not known here."""
        if self.deadline is not None:
            return self.deadline.ends_here(state.train_seconds)
        return state.epoch + 1 >= self.num_epochs

    def ends_here(self, spent_seconds: float) -> bool:
        """Before a step within an epoch: whether the deadline ends the run here (never without one)."""
        return self.deadline is not None and self.deadline.ends_here(spent_seconds)

    def epochs(self) -> int:
        """The epochs the run takes (under a deadline, its plan's estimate now)."""
        return self.deadline.epochs() if self.deadline is not None else self.num_epochs

    def epoch_label(self, epoch_number: int) -> str:
        """Epoch `epoch_number` of the run, for the log: "3/12", or under a deadline the plan's estimate."""
        if self.deadline is not None:
            return self.deadline.epoch_label(epoch_number)
        return f"{epoch_number}/{self.num_epochs}"

    def facts(self) -> Dict:
        """The summary's record of the deadline ({} without one)."""
        return {"deadline": self.deadline.facts()} if self.deadline is not None else {}

