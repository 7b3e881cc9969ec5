"""How much of a virtual machine's CPU its host gave to other machines while something was timed: Linux's
steal time (/proc/stat), which no process inside the machine sees as load. On the project's 2-core VMs a
profile made while the host took a third of the CPU put a full step at 1.6-2.7x what training then measured
(docs/notebook/imagenet_regime_74.md), so the profiler records the share and says so."""
from __future__ import annotations

from typing import Optional, Tuple

PROC_STAT = "/proc/stat"
STEAL_WARNING = 0.10  # a share of the CPU taken by the host above which the profiler warns


def cpu_times(text: Optional[str] = None) -> Optional[Tuple[int, int]]:
    """(steal, total) clock ticks over all CPUs since boot, from /proc/stat's `cpu` line (`text`: its contents);
    None where there is no such file or field (not Linux, or a kernel without steal accounting)."""
    if text is None:
        try:
            with open(PROC_STAT) as handle:
                text = handle.readline()
        except OSError:
            return None
    fields = text.split()
    if len(fields) < 9 or fields[0] != "cpu":
        return None
    ticks = [int(value) for value in fields[1:]]
    # user nice system idle iowait irq softirq steal [guest guest_nice]: guest time is already in user
    return ticks[7], sum(ticks[:8])


def steal_share(before: Optional[Tuple[int, int]], after: Optional[Tuple[int, int]]) -> Optional[float]:
    """The share of the CPU's ticks between two readings that the host took; None without both readings."""
    if before is None or after is None or after[1] <= before[1]:
        return None
    return (after[0] - before[0]) / (after[1] - before[1])
