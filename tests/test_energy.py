"""Energy readers against fake sysfs trees (this machine exposes none), the meter that integrates
them, and a real training run metered through a fake RAPL counter: per-epoch energy in
TensorBoard and the summary, and the Fig. 23-style bars."""
from __future__ import annotations

import json
import os
import threading
import time

import pytest

from elastic_trainer import energy
from elastic_trainer.command_line import UserError


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{text}\n")


def rapl_tree(root, packages=((1_000_000, 262_143_328_850), (2_000_000, 262_143_328_850))):
    for index, (value, wrap) in enumerate(packages):
        zone = root / "class" / "powercap" / f"intel-rapl:{index}"
        write(zone / "energy_uj", value)
        write(zone / "max_energy_range_uj", wrap)
        write(zone / f"intel-rapl:{index}:0" / "energy_uj", 5)  # a sub-zone: part of its package
    return root / "class" / "powercap"


def test_rapl_sums_packages_and_undoes_a_wrap(tmp_path):
    zones = rapl_tree(tmp_path, ((1_000_000, 10_000_000), (2_000_000, 10_000_000)))
    source = energy.RaplSource(str(tmp_path))
    assert [zone.rsplit("/", 1)[1] for zone in source.zones] == ["intel-rapl:0", "intel-rapl:1"]
    write(zones / "intel-rapl:0" / "energy_uj", 4_000_000)  # +3 J
    write(zones / "intel-rapl:1" / "energy_uj", 1_000_000)  # wrapped at 10 J: +9 J
    assert source.read() == pytest.approx(12.0)
    write(zones / "intel-rapl:1" / "energy_uj", 1_500_000)
    assert source.read() == pytest.approx(12.5)


def test_jetson_rails_use_the_board_input_alone_or_sum_the_rails(tmp_path):
    device = tmp_path / "bus" / "i2c" / "drivers" / "ina3221x" / "6-0040" / "iio:device0"
    for rail, (name, milliwatts) in enumerate((("POM_5V_IN", 4200), ("POM_5V_GPU", 1500), ("POM_5V_CPU", 900))):
        write(device / f"rail_name_{rail}", name)
        write(device / f"in_power{rail}_input", milliwatts)
    source = energy.Ina3221Source(str(tmp_path))
    assert source.rails == ["POM_5V_IN"] and source.read() == pytest.approx(4.2)
    hwmon = tmp_path / "other" / "class" / "hwmon" / "hwmon3"  # newer L4T: volts and amps per rail
    write(hwmon / "name", "ina3221")
    for channel, (label, millivolts, milliamps) in enumerate((("VDD_GPU_SOC", 5000, 400), ("VDD_CPU_CV", 5000, 200)), 1):
        write(hwmon / f"in{channel}_label", label)
        write(hwmon / f"in{channel}_input", millivolts)
        write(hwmon / f"curr{channel}_input", milliamps)
    source = energy.Ina3221Source(str(tmp_path / "other"))
    assert source.rails == ["VDD_GPU_SOC", "VDD_CPU_CV"] and source.read() == pytest.approx(3.0)


class FakeSource(energy.Source):
    def __init__(self, values, counter):
        self.values, self.counter, self.name = list(values), counter, "fake"

    def read(self):
        return self.values.pop(0) if len(self.values) > 1 else self.values[0]


def test_the_meter_integrates_power_and_keeps_what_it_measured_when_the_source_fails(monkeypatch):
    clock = iter([0.0, 2.0, 4.0, 5.0])
    monkeypatch.setattr(energy.time, "perf_counter", lambda: next(clock))
    meter = energy.Meter(FakeSource([10.0, 20.0, 20.0], counter=False), interval=3600)
    meter._sample()
    meter._sample()  # 2 s between 10 W and 20 W: 30 J (trapezoid)
    assert meter.joules() == pytest.approx(30.0 + 40.0)

    class Broken(energy.Source):
        name = "broken"

        def read(self):
            raise OSError("the device went away")

    meter.source = Broken()
    assert meter.joules() == pytest.approx(70.0) and meter.failure == "the device went away"


def test_the_meter_samples_in_the_background():
    source = FakeSource([float(value) for value in range(0, 1000)], counter=True)
    meter = energy.Meter(source, interval=0.01).start()
    time.sleep(0.2)
    meter.stop()
    assert len(source.values) < 990  # read on its own, many times


def test_choosing_a_meter(tmp_path, monkeypatch):
    monkeypatch.setenv("ELASTIC_TRAINER_SYSFS", str(tmp_path))
    said = []
    assert energy.open_meter("none") is None
    assert energy.open_meter("auto", said.append) is None
    assert len(said) == 1 and said[0].startswith("energy: no readable meter here (rapl: no RAPL packages")
    assert "nvml: " in said[0] and said[0].endswith("this run logs no energy")
    with pytest.raises(UserError, match="--energy_meter ina3221: cannot read it here"):
        energy.open_meter("ina3221")
    rapl_tree(tmp_path)
    meter = energy.open_meter("auto")
    try:
        assert meter.name == "rapl" and meter.joules() == 0.0
    finally:
        meter.stop()


def test_a_training_run_reports_energy_per_epoch(workdir, tfds_dir, tmp_path, monkeypatch):
    from conftest import run_main
    from experiments import plot

    monkeypatch.setenv("ELASTIC_TRAINER_SYSFS", str(tmp_path))
    counter = rapl_tree(tmp_path, ((0, 262_143_328_850),)) / "intel-rapl:0" / "energy_uj"
    running = threading.Event()

    def burn():  # the fake package uses 1 J every 10 ms while training runs
        microjoules = 0
        while not running.is_set():
            microjoules += 1_000_000
            (counter.parent / "next").write_text(f"{microjoules}\n")
            os.replace(counter.parent / "next", counter)  # never seen half-written, like sysfs
            time.sleep(0.01)

    thread = threading.Thread(target=burn, daemon=True)
    thread.start()
    try:
        assert run_main(workdir, tfds_dir, "--num_epochs", "2", "--run_name", "metered", "--val_fraction", "0",
                        "--reference_steps", "0", "--energy_meter", "rapl") == 0
    finally:
        running.set()
        thread.join()
    summary = json.loads((workdir / "logs" / "metered" / "summary.json").read_text())
    assert summary["energy_meter"] == "rapl" and summary["energy_epochs_metered"] == 2
    per_epoch = [entry["energy_joules"] for entry in summary["history"]]
    assert all(joules > 0 for joules in per_epoch) and summary["energy_joules"] == pytest.approx(sum(per_epoch))
    assert summary["joules_per_step"] == pytest.approx(summary["energy_joules"] / 80)  # 40 steps an epoch
    run = plot.Run(str(workdir / "logs" / "metered"))
    assert {"energy/epoch_joules", "energy/joules_per_step"} <= set(run.tags)
    rows = plot.energy_rows([summary])
    paths = plot.plot_energy(rows, "", str(tmp_path / "energy.png"))
    assert rows[0]["joules"][0] == summary["energy_joules"] and (tmp_path / "energy.png").exists() and paths
    with pytest.raises(UserError, match="none of these runs measured energy"):
        plot.energy_rows([{k: v for k, v in summary.items() if not k.startswith("energy")}])
