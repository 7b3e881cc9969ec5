"""elastic_trainer/host_load.py: the host's share of the CPU, read from /proc/stat lines written here."""
from elastic_trainer import host_load

# /proc/stat's first line: user nice system idle iowait irq softirq steal guest guest_nice
BEFORE = "cpu  3505916 37417 187650 1612062 3505 0 9328 222122 0 0\n"
AFTER = "cpu  3506716 37417 187700 1612962 3505 0 9328 222572 100 0\n"


def test_the_share_is_steal_over_every_tick_between_two_readings():
    before, after = host_load.cpu_times(BEFORE), host_load.cpu_times(AFTER)
    assert before == (222122, 3505916 + 37417 + 187650 + 1612062 + 3505 + 0 + 9328 + 222122)
    # 800 user + 50 system + 900 idle + 450 steal ticks passed (guest's 100 are inside user): 450 / 2200
    assert host_load.steal_share(before, after) == 450 / 2200


def test_no_reading_gives_no_share():
    assert host_load.cpu_times("intr 1 2 3") is None and host_load.cpu_times("cpu 1 2 3") is None
    assert host_load.steal_share(None, host_load.cpu_times(AFTER)) is None
    assert host_load.steal_share(host_load.cpu_times(AFTER), host_load.cpu_times(AFTER)) is None


def test_this_machine_reads_its_own_counters_or_says_it_cannot():
    reading = host_load.cpu_times()
    assert reading is None or (0 <= reading[0] <= reading[1])
