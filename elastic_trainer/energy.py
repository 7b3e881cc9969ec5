"""Energy as the device reports it: the readers, and a meter that integrates them while training.

Readers (`--energy_meter`; `auto` takes the first readable one in this order):

- `rapl`: Linux powercap, `/sys/class/powercap/intel-rapl:N/energy_uj` (Intel, and AMD since
  Linux 5.8): cumulative microjoules per CPU package (sub-zones are parts of them), wrapping at
  `max_energy_range_uj`. Often root-only.
- `ina3221`: NVIDIA Jetson power monitors, sampled and integrated over time. L4T 32 exposes each
  rail's mW (`/sys/bus/i2c/drivers/ina3221x/*/iio:device*/in_power<K>_input`, named by
  `rail_name_<K>`); newer L4T an `ina3221` hwmon device with mV (`in<K>_input`) and mA
  (`curr<K>_input`). The board's input rail (`*IN*`: POM_5V_IN, VDD_IN) is used alone when
  present, since it contains the others; otherwise the rails are summed.
- `nvml`: NVIDIA GPUs' cumulative energy counter (`nvmlDeviceGetTotalEnergyConsumption`, Volta
  and newer), summed over GPUs; needs `pip install ".[nvml]"` (nvidia-ml-py, module `pynvml`).

Every reader measures the whole device (or package, or GPU), not this process: the figures mean
something on a device that does nothing else, as in the paper's Fig. 23.
"""
from __future__ import annotations

import glob
import os
import threading
import time
from typing import Callable, Dict, List, Optional, Tuple

from elastic_trainer.command_line import UserError

METERS = ("none", "auto", "rapl", "ina3221", "nvml")
SAMPLE_SECONDS = 0.5  # how often the meter reads its source (power readers are integrated over it)


def sysfs_root() -> str:
    """Where sysfs is (tests point ELASTIC_TRAINER_SYSFS at a fake tree)."""
    return os.environ.get("ELASTIC_TRAINER_SYSFS", "/sys")


def _read_number(path: str) -> float:
    with open(path) as handle:
        return float(handle.read().strip())


class Source:
    """A reading of the device's energy: `counter` sources return cumulative joules (their
    wrap-arounds already undone); the others return watts."""

    name = ""
    counter = True

    def read(self) -> float:
        raise NotImplementedError


class RaplSource(Source):
    name = "rapl"

    def __init__(self, root: str):
        self.zones = sorted(path for path in glob.glob(os.path.join(root, "class", "powercap", "intel-rapl:*"))
                            if os.path.basename(path).count(":") == 1)  # packages, not their sub-zones
        if not self.zones:
            raise OSError(f"no RAPL packages under {os.path.join(root, 'class', 'powercap')}")
        ranges = [os.path.join(zone, "max_energy_range_uj") for zone in self.zones]
        self.wraps = [_read_number(path) / 1e6 if os.path.exists(path) else None for path in ranges]
        self.last: List[Optional[float]] = [None] * len(self.zones)
        self.total = 0.0
        self.read()  # readable now (root-only on many kernels), or OSError

    def read(self) -> float:
        """Joules since the first read, each package's wrap-around undone (assumes at most one wrap
        between reads; the meter reads every SAMPLE_SECONDS)."""
        for index, zone in enumerate(self.zones):
            value = _read_number(os.path.join(zone, "energy_uj")) / 1e6
            last = self.last[index]
            if last is not None:
                delta = value - last
                if delta < 0:  # wrapped
                    delta += self.wraps[index] if self.wraps[index] else last
                self.total += delta
            self.last[index] = value
        return self.total


class Ina3221Source(Source):
    name = "ina3221"
    counter = False

    def __init__(self, root: str):
        self.readers: List[Tuple[str, Callable[[], float]]] = []  # (rail name, watts)
        for device in sorted(glob.glob(os.path.join(root, "bus", "i2c", "drivers", "ina3221x", "*", "iio:device*"))):
            for power in sorted(glob.glob(os.path.join(device, "in_power*_input"))):
                rail = power.rsplit("in_power", 1)[1].split("_")[0]
                label = os.path.join(device, f"rail_name_{rail}")
                name = open(label).read().strip() if os.path.exists(label) else f"rail {rail}"
                self.readers.append((name, lambda path=power: _read_number(path) / 1000.0))
        for hwmon in sorted(glob.glob(os.path.join(root, "class", "hwmon", "hwmon*"))):
            name_file = os.path.join(hwmon, "name")
            if not os.path.exists(name_file) or open(name_file).read().strip() != "ina3221":
                continue
            for volts in sorted(glob.glob(os.path.join(hwmon, "in*_input"))):
                channel = os.path.basename(volts)[2:-len("_input")]
                amps = os.path.join(hwmon, f"curr{channel}_input")
                if not channel.isdigit() or not os.path.exists(amps):
                    continue
                label = os.path.join(hwmon, f"in{channel}_label")
                name = open(label).read().strip() if os.path.exists(label) else f"rail {channel}"
                self.readers.append((name, lambda v=volts, a=amps: _read_number(v) * _read_number(a) / 1e6))
        if not self.readers:
            raise OSError("no INA3221 rails (ina3221x iio devices or an ina3221 hwmon)")
        inputs = [reader for reader in self.readers if "IN" in reader[0].upper().replace("_", " ").split()]
        if inputs:  # the board's input already contains every other rail
            self.readers = inputs[:1]
        self.rails = [name for name, _ in self.readers]
        self.read()

    def read(self) -> float:
        return sum(reader() for _, reader in self.readers)


class NvmlSource(Source):
    name = "nvml"

    def __init__(self, root: str):
        try:
            import pynvml
        except ImportError:
            raise OSError("NVIDIA's NVML bindings are not installed (.venv/bin/pip install \".[nvml]\", the nvidia-ml-py package)") from None
        try:
            pynvml.nvmlInit()
            self.handles = [pynvml.nvmlDeviceGetHandleByIndex(index) for index in range(pynvml.nvmlDeviceGetCount())]
        except pynvml.NVMLError as error:
            raise OSError(f"NVML: {error}") from None
        if not self.handles:
            raise OSError("NVML sees no GPU")
        self.pynvml = pynvml
        self.read()

    def read(self) -> float:
        try:
            return sum(self.pynvml.nvmlDeviceGetTotalEnergyConsumption(handle) for handle in self.handles) / 1000.0
        except self.pynvml.NVMLError as error:
            raise OSError(f"NVML energy counter: {error}") from None


SOURCES: Dict[str, Callable[[str], Source]] = {"rapl": RaplSource, "ina3221": Ina3221Source, "nvml": NvmlSource}


class Meter:
    """Joules used since start(), from one source read every `interval` seconds on a background
    thread (a counter's wrap-arounds undone, a power reading integrated by the trapezoid rule)."""

    def __init__(self, source: Source, interval: float = SAMPLE_SECONDS):
        self.source, self.interval = source, interval
        self.name = source.name
        self._lock = threading.Lock()
        self._joules = 0.0
        self._last: Optional[Tuple[float, float]] = None
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self.failure: Optional[str] = None

    def _sample(self) -> None:
        now = time.perf_counter()
        try:
            value = self.source.read()
        except OSError as error:  # the device went away: keep what was measured, say so once
            self.failure = self.failure or str(error)
            return
        except ValueError:  # a torn read: the next sample covers the interval
            return
        with self._lock:
            if self._last is not None:
                last_time, last_value = self._last
                self._joules += (value - last_value) if self.source.counter else \
                    0.5 * (value + last_value) * (now - last_time)
            self._last = (now, value)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def start(self) -> "Meter":
        self._sample()
        self._thread = threading.Thread(target=self._run, name="energy-meter", daemon=True)
        self._thread.start()
        return self

    def joules(self) -> float:
        """Joules since start(), read now."""
        self._sample()
        with self._lock:
            return self._joules

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join()


def open_meter(choice: str, log: Callable[[str], None] = print) -> Optional[Meter]:
    """The meter `choice` names (`auto`: the first readable reader; `none`: None), started. With
    `auto` and nothing readable, says so once through `log` and returns None; a named reader that
    cannot be read is a UserError saying why."""
    if choice == "none":
        return None
    root = sysfs_root()
    names = list(SOURCES) if choice == "auto" else [choice]
    if any(name not in SOURCES for name in names):
        raise UserError(f"--energy_meter {choice!r}: choose one of {', '.join(METERS)}")
    reasons = []
    for name in names:
        try:
            return Meter(SOURCES[name](root)).start()
        except (OSError, ValueError) as error:
            reasons.append(f"{name}: {error}")
    if choice != "auto":
        raise UserError(f"--energy_meter {choice}: cannot read it here ({reasons[0]}); use --energy_meter auto "
                        f"or none")
    log("energy: no readable meter here (" + "; ".join(reasons) + "); this run logs no energy")
    return None
