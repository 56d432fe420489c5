"""Processing of raw sweeps into (ΔB, label) pairs: known answers, drop reasons, whole-sweep errors, splits."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from flexlearn.config import from_dict
from flexlearn.data.dataset import SPLITS
from flexlearn.data.process import process_sweep
from flexlearn.data.processing_config import ProcessingConfig
from flexlearn.data.quality import REASONS
from flexlearn.errors import ConfigError, DataError
from flexlearn.sensing.parts import ChipAxis, SensorParts
from flexlearn.sensing.streams import RawSweep
from tests.data.streams_factory import QUIET_PARTS, insert_polls, make_sweep, poll_index, unit

CFG = ProcessingConfig()
PULSE = 0.15  # first pulse switch-on, relative to the window start (streams_factory default)


def t_on(raw, pose: int, pulse: int = 0) -> float:
    return float(raw.coil_t[raw.coil_on][2 * pose + pulse])


def t_off(raw, pose: int, pulse: int = 0) -> float:
    return float(raw.coil_t[~raw.coil_on][2 * pose + pulse])


def with_mag(raw, mag):
    return dataclasses.replace(raw, mag=mag)


def freeze(raw, t0: float, t1: float):
    """Polls in [t0, t1] become stale repeats of the last poll before t0."""
    mag = raw.mag.copy()
    i0, i1 = poll_index(raw, t0 - 1e-9), poll_index(raw, t1)
    mag[i0 + 1 : i1 + 1] = mag[i0]
    return with_mag(raw, mag)


# ------------------------------------------------------------------------------------ known answers
def test_linear_drift_and_constant_field_are_recovered_exactly():
    raw = make_sweep(6)
    ds = process_sweep(raw).dataset
    np.testing.assert_array_equal(ds.pose_id, raw.pose_id)
    np.testing.assert_allclose(ds.delta_b, ds.truth_delta_b, rtol=0, atol=1e-17)  # |ΔB| = 1e-4 T
    np.testing.assert_allclose(ds.label, ds.truth_label, rtol=0, atol=1e-14)
    assert np.all(ds.n_coil_on >= 2 * 12)  # 40 ms pulses, 15 ms settling, 2 ms polls


def test_stale_repeats_are_not_samples():
    raw = make_sweep(3)
    # The sensor stops converting from just before the switch-on until 20 ms after it: those polls repeat the
    # last coil-off reading. If any of them counted as a settled coil-on sample, ΔB would be off by ~100 µT.
    stale = freeze(raw, t_on(raw, 1) - 0.001, t_on(raw, 1) + 0.02)
    res, ref = process_sweep(stale), process_sweep(raw)
    np.testing.assert_allclose(res.dataset.delta_b, res.dataset.truth_delta_b, rtol=0, atol=1e-17)
    assert res.report.samples["mag_stale"] > 5
    assert res.dataset.n_coil_on[1] < ref.dataset.n_coil_on[1]


def test_coil_on_samples_before_settling_and_off_samples_in_the_tail_are_excluded():
    raw = make_sweep(3)
    mag = raw.mag.copy()
    for pose in range(3):
        for pulse in range(2):
            a, b = t_on(raw, pose, pulse), t_off(raw, pose, pulse)
            rising = (raw.mag_t >= a) & (raw.mag_t < a + CFG.settle_time)
            tail = (raw.mag_t > b) & (raw.mag_t <= b + CFG.settle_time)
            mag[rising] -= 3e-5 * np.arange(1, rising.sum() + 1)[:, None]  # transient
            mag[tail] += 2e-5
    ds = process_sweep(with_mag(raw, mag)).dataset
    np.testing.assert_allclose(ds.delta_b, ds.truth_delta_b, rtol=0, atol=1e-17)


def test_settled_boundary_sample_counts():
    raw = make_sweep(2)
    a = t_on(raw, 0)
    raw2 = insert_polls(raw, [a + CFG.settle_time], raw.mag[poll_index(raw, a + CFG.settle_time)] + 1e-9)
    n0 = process_sweep(raw).dataset.n_coil_on[0]
    assert process_sweep(raw2).dataset.n_coil_on[0] == n0 + 1


def reference_delta_b(raw, cfg=CFG):
    """Straightforward per-pose loop, independent of the vectorised code (polyfit per axis)."""
    fresh = np.ones(len(raw.mag_t), bool)
    fresh[1:] = np.any(raw.mag[1:] != raw.mag[:-1], axis=1) | np.isnan(raw.mag[1:]).any(1)
    ons, offs = raw.coil_t[raw.coil_on], raw.coil_t[~raw.coil_on]
    out, labels = [], []
    for t0, t1 in zip(raw.pose_t_start, raw.pose_t_end):
        w = fresh & (raw.mag_t >= t0) & (raw.mag_t <= t1) & np.isfinite(raw.mag).all(1)
        on = np.zeros_like(w)
        off = w.copy()
        for a, b in zip(ons, offs):
            on |= (raw.mag_t >= a + cfg.settle_time) & (raw.mag_t <= b)
            off &= ~((raw.mag_t >= a) & (raw.mag_t <= b + cfg.settle_time))
        on &= w
        t, m = raw.mag_t, raw.mag
        b_on = np.stack([np.polyval(np.polyfit(t[off], m[off, j], 1), t[on]) for j in range(3)], -1)
        out.append((m[on] - b_on).mean(0))
        a_w = (raw.accel_t >= t0) & (raw.accel_t <= t1)
        labels.append(unit(raw.accel[a_w].mean(0)))
    return np.array(out), np.array(labels)


def test_noisy_sweep_matches_a_per_pose_reference():
    raw = make_sweep(5, seed=3)
    rng = np.random.default_rng(0)
    mag = raw.mag + rng.normal(scale=6e-7, size=raw.mag.shape)
    idx = np.maximum.accumulate(np.where(rng.random(len(mag)) < 0.3, 0, np.arange(len(mag))))
    mag = mag[idx]  # 30 % stale repeats
    accel = raw.accel + rng.normal(scale=0.02, size=raw.accel.shape)
    raw = dataclasses.replace(raw, mag=mag, accel=accel)
    ds = process_sweep(raw).dataset
    ref_db, ref_label = reference_delta_b(raw)
    np.testing.assert_allclose(ds.delta_b, ref_db, rtol=0, atol=1e-15)
    np.testing.assert_allclose(ds.label, ref_label, rtol=0, atol=1e-13)
    np.testing.assert_allclose(np.linalg.norm(ds.label, axis=1), 1.0, atol=1e-15)


def test_isolated_nan_poll_is_discarded_and_the_pose_kept():
    raw = make_sweep(3)
    mag = raw.mag.copy()
    mag[poll_index(raw, t_on(raw, 2) + 0.03)] = np.nan
    mag[poll_index(raw, t_on(raw, 2) - 0.05), 1] = np.inf
    res = process_sweep(with_mag(raw, mag))
    assert res.report.n_kept == 3 and res.report.samples["mag_nonfinite"] == 2
    np.testing.assert_allclose(res.dataset.delta_b, res.dataset.truth_delta_b, rtol=0, atol=1e-17)


# ------------------------------------------------------------------------------------ drop reasons
def _defect(raw, reason):
    """Damage pose index 1 (pose_id 101) so that it is dropped for ``reason``."""
    w0, w1 = raw.pose_t_start[1], raw.pose_t_end[1]
    in_w = (raw.mag_t >= w0) & (raw.mag_t <= w1)
    coil_on_polls = np.zeros_like(in_w)
    for p in range(2):
        coil_on_polls |= (raw.mag_t >= t_on(raw, 1, p)) & (raw.mag_t <= t_off(raw, 1, p))
    if reason == "not_stationary":
        acc = raw.accel.copy()
        a_w = (raw.accel_t >= w0) & (raw.accel_t <= w1)
        acc[a_w, 0] += 0.2 * (-1.0) ** np.arange(a_w.sum())
        return dataclasses.replace(raw, accel=acc)
    if reason == "too_few_coil_on":
        raw = freeze(raw, t_on(raw, 1, 0), t_off(raw, 1, 0))
        return freeze(raw, t_on(raw, 1, 1), t_off(raw, 1, 1) - 0.005)  # <= 3 fresh polls left in 5 ms
    if reason == "missing_coil_off":
        return freeze(raw, w0, t_on(raw, 1) - 1e-6)
    if reason == "saturated":
        mag = raw.mag.copy()
        mag[poll_index(raw, w0 + 0.05), 2] = -1300e-6  # the quiet magnetometer's full scale
        return with_mag(raw, mag)
    if reason == "nan":
        mag = raw.mag.copy()
        mag[coil_on_polls] = np.nan
        return with_mag(raw, mag)
    if reason == "no_pulse":
        drop = (raw.coil_t > w0) & (raw.coil_t < w1)
        return dataclasses.replace(raw, coil_t=raw.coil_t[~drop], coil_on=raw.coil_on[~drop])
    a_w = (raw.accel_t >= w0) & (raw.accel_t <= w1)
    if reason == "absent":
        acc = raw.accel.copy()
        acc[a_w] = 0.0  # a bus that reads zeros
        return dataclasses.replace(raw, accel=acc)
    if reason == "accel_saturated":
        acc = raw.accel.copy()
        acc[np.flatnonzero(a_w)[3], 2] = 8 * 9.80665  # the quiet IMU's full scale
        return dataclasses.replace(raw, accel=acc)
    if reason == "accel_stuck":
        # A noisy IMU whose readings freeze in pose 101: bit-identical samples its noise makes impossible.
        acc = raw.accel + np.random.default_rng(1).normal(scale=0.01, size=raw.accel.shape)
        acc[a_w] = acc[np.flatnonzero(a_w)[0]]
        meta = dict(raw.meta, sensor=SensorParts.default().to_config())
        return dataclasses.replace(raw, accel=acc, meta=meta)
    if reason == "mag_stuck":
        mag = raw.mag.copy()
        mag[in_w] = mag[np.flatnonzero(in_w)[0]]
        return with_mag(raw, mag)
    if reason in ("gyro_saturated", "gyro_stuck"):
        return _with_gyro_defect(raw, reason, a_w)
    if reason == "no_accel":
        keep = (raw.accel_t < w0) | (raw.accel_t > w1)
        return dataclasses.replace(raw, accel_t=raw.accel_t[keep], accel=raw.accel[keep])
    raise AssertionError(reason)


NOISY_GYRO = ChipAxis(4.36332, 0.000133231, 0.000261799, "rad/s")  # the ICM-20948's: noise ~14 LSB at 100 Hz


def _with_gyro_defect(raw, reason, in_pose):
    """A rate stream (on the accelerometer's clock, the noisy gyro's noise) whose pose 101 is stuck or clipped."""
    rate = np.random.default_rng(4).normal(scale=0.0019, size=raw.accel.shape)
    rows = np.flatnonzero(in_pose)
    if reason == "gyro_stuck":
        rate[rows] = rate[rows[0]]
    else:
        rate[rows[5], 1] = -NOISY_GYRO.full_scale  # at the rail
    imu = dataclasses.replace(QUIET_PARTS.imu, gyro=NOISY_GYRO)
    meta = dict(raw.meta, sensor=dataclasses.replace(QUIET_PARTS, imu=imu).to_config())
    streams = {**raw.streams, "rate": {"t": raw.accel_t.copy(), "rate": rate}}
    return RawSweep(streams=streams, meta=meta)


@pytest.mark.parametrize("reason", REASONS)
def test_each_defect_drops_its_pose_with_its_reason(reason):
    res = process_sweep(_defect(make_sweep(4), reason))
    assert res.report.dropped[reason] == [101]
    assert res.report.counts() == {r: int(r == reason) for r in REASONS}
    assert res.report.n_kept == 3 and 101 not in res.dataset.pose_id
    assert reason in res.report.summary() and res.dataset.meta["report"]["dropped_pose_ids"][reason] == [101]
    np.testing.assert_allclose(res.dataset.delta_b, res.dataset.truth_delta_b, rtol=0, atol=1e-17)


def test_nan_accel_samples_drop_only_when_too_few_remain():
    raw = make_sweep(3)
    acc = raw.accel.copy()
    a_w = np.flatnonzero((raw.accel_t >= raw.pose_t_start[1]) & (raw.accel_t <= raw.pose_t_end[1]))
    acc[a_w[::2]] = np.nan
    res = process_sweep(dataclasses.replace(raw, accel=acc))
    assert res.report.n_kept == 3
    np.testing.assert_allclose(res.dataset.label, res.dataset.truth_label, atol=1e-14)
    acc[a_w[:-1]] = np.nan
    assert process_sweep(dataclasses.replace(raw, accel=acc)).report.dropped["nan"] == [101]


# ------------------------------------------------------------------------------------ whole-sweep errors
@pytest.mark.parametrize("scale, unit_name", [(1e6, "uT"), (1e4, "gauss"), (1e3, "mT")])
def test_field_in_wrong_unit_is_refused_with_the_key_that_converts_it(scale, unit_name):
    raw = make_sweep(2)
    wrong = with_mag(raw, raw.mag * scale)
    key = rf"\+processing.field_unit={unit_name}"
    with pytest.raises(DataError, match=rf"stream 'mag'.*median \|m\| = [0-9.]+.*looks like {unit_name}: set {key}"):
        process_sweep(wrong)
    res = process_sweep(wrong, ProcessingConfig(field_unit=unit_name))
    np.testing.assert_allclose(res.dataset.delta_b, res.dataset.truth_delta_b, rtol=1e-9, atol=0)
    assert res.report.notes == [f"stream 'mag' converted from {unit_name} to T (processing.field_unit={unit_name})"]


def test_accel_in_g_is_refused_and_converted():
    raw = make_sweep(2)
    wrong = dataclasses.replace(raw, accel=raw.accel / 9.80665)
    with pytest.raises(
        DataError, match=r"stream 'accel'.*median \|a\| = 1.*looks like g: set \+processing.accel_unit=g"
    ):
        process_sweep(wrong)
    res = process_sweep(wrong, ProcessingConfig(accel_unit="g"))
    np.testing.assert_allclose(res.dataset.label, res.dataset.truth_label, atol=1e-14)


def _times_scaled(raw, factor):
    t = {k: np.asarray(v) * factor for k, v in (("mag_t", raw.mag_t), ("accel_t", raw.accel_t), ("coil_t", raw.coil_t))}
    return dataclasses.replace(raw, **t, pose_t_start=raw.pose_t_start * factor, pose_t_end=raw.pose_t_end * factor)


@pytest.mark.parametrize("unit_name, factor", [("ms", 1e3), ("us", 1e6), ("ns", 1e9)])
def test_times_in_another_unit_are_refused_by_their_spacing_and_converted(unit_name, factor):
    raw = make_sweep(3)
    wrong = _times_scaled(raw, factor)
    with pytest.raises(
        DataError,
        match=rf"stream 'accel': field 't'.*100 Hz.*look like {unit_name}: set "
        rf"\+processing.time_unit={unit_name}$",
    ):
        process_sweep(wrong)
    res, ref = process_sweep(wrong, ProcessingConfig(time_unit=unit_name)), process_sweep(raw)
    np.testing.assert_allclose(res.dataset.delta_b, ref.dataset.delta_b, rtol=1e-9)
    np.testing.assert_array_equal(res.dataset.n_coil_on, ref.dataset.n_coil_on)
    assert res.report.notes == [f"times converted from {unit_name} to s (processing.time_unit={unit_name})"]


def test_times_declared_in_ms_but_in_seconds_are_refused():
    with pytest.raises(DataError, match=r"look like s: set \+processing.time_unit=s"):
        process_sweep(make_sweep(3), ProcessingConfig(time_unit="ms"))


def test_a_rate_no_unit_explains_names_the_parts():
    raw = _times_scaled(make_sweep(3), 1e-3)  # 100 µs spacing from a 100 Hz IMU
    with pytest.raises(DataError, match=r"no time unit explains it: check sensor.imu.output_rate_hz"):
        process_sweep(raw)


def test_no_coil_off_samples():
    raw = make_sweep(2)
    raw = dataclasses.replace(raw, coil_t=np.array([-1.0]), coil_on=np.array([True]))
    with pytest.raises(DataError, match="stream 'mag': no coil-off samples"):
        process_sweep(raw)


@pytest.mark.parametrize("on", [[], [False, False]])
def test_no_coil_events(on):
    raw = dataclasses.replace(make_sweep(2), coil_t=np.arange(len(on), dtype=float), coil_on=np.array(on, bool))
    with pytest.raises(DataError, match="stream 'coil'"):
        process_sweep(raw)


def test_every_pose_dropped_reports_how_many_and_why():
    raw = make_sweep(4)
    acc = raw.accel + 0.3 * (-1.0) ** np.arange(len(raw.accel_t))[:, None]
    with pytest.raises(
        DataError,
        match=r"only 0 of 4 poses \(0%\) are left, at least 50% .*min_kept_fraction.*not_stationary: 4.*"
        r"most were dropped as 'not_stationary' \(4 poses\): the module still moves",
    ):
        process_sweep(dataclasses.replace(raw, accel=acc))


def test_a_stuck_accelerometer_through_the_whole_sweep_is_refused_not_trained_on():
    # Every sample bit-identical: every label would be the same. Even for the noise-free parts of these
    # sweeps, one reading across poses commanded to different targets is a stuck sensor.
    raw = make_sweep(6)
    acc = np.broadcast_to(raw.accel[len(raw.accel) // 2], raw.accel.shape).copy()
    with pytest.raises(DataError, match=r"only 0 of 6 poses .*accel_stuck: 6.*repeats one reading bit for bit"):
        process_sweep(dataclasses.replace(raw, accel=acc))


def test_one_pose_with_zero_accelerometer_readings_drops_that_pose_only():
    raw = make_sweep(6)
    acc = raw.accel.copy()
    a_w = (raw.accel_t >= raw.pose_t_start[2]) & (raw.accel_t <= raw.pose_t_end[2])
    acc[a_w] = 0.0
    res = process_sweep(dataclasses.replace(raw, accel=acc))
    assert res.report.dropped["absent"] == [102] and res.report.n_kept == 5
    assert res.report.samples["accel_zero"] == int(a_w.sum())
    np.testing.assert_allclose(res.dataset.label, res.dataset.truth_label, atol=1e-14)


def test_a_single_zero_sample_is_discarded_and_the_pose_kept():
    raw = make_sweep(3)
    acc = raw.accel.copy()
    acc[np.flatnonzero(raw.accel_t >= raw.pose_t_start[1])[2]] = 0.0
    res = process_sweep(dataclasses.replace(raw, accel=acc))
    assert res.report.n_kept == 3
    np.testing.assert_allclose(res.dataset.label, res.dataset.truth_label, atol=1e-14)


def test_clipping_follows_the_magnetometer_part():
    # Pose 101's field is raised to 480 µT: within the default ±1300 µT part, at the rail of a LIS3MDL at ±4 gauss
    # (its 16-bit output ends at 32767/6842 gauss = 479 µT).
    from flexlearn.sensing.parts import ChipAxis, MagnetometerPart
    from tests.data.streams_factory import QUIET_PARTS

    raw = make_sweep(4)
    mag = raw.mag.copy()
    w = (raw.mag_t >= raw.pose_t_start[1]) & (raw.mag_t <= raw.pose_t_end[1])
    mag[w, 0] = np.where(mag[w, 0] > 4.79e-4, mag[w, 0], 4.7891e-4)  # clipped at the part's rail
    clipped = with_mag(raw, mag)
    lis = SensorParts.preset("lis3mdl_4g", "sim_default").magnetometer
    quiet_lis = MagnetometerPart("lis3mdl_4g", ChipAxis(lis.field.full_scale, lis.field.lsb, 0.0, "T"), 80.0)
    parts = dataclasses.replace(QUIET_PARTS, magnetometer=quiet_lis)
    res = process_sweep(clipped, parts=parts)
    assert res.report.dropped["saturated"] == [101] and res.report.n_kept == 3
    assert res.report.samples["mag_saturated"] == int(w.sum())
    assert res.report.sensor["magnetometer"]["name"] == "lis3mdl_4g"
    assert process_sweep(clipped).report.dropped["saturated"] == []  # the ±1300 µT part does not clip there


def test_an_explicit_saturation_limit_overrides_the_part():
    raw = make_sweep(4)
    limit = float(np.abs(raw.mag[(raw.mag_t >= raw.pose_t_start[2]) & (raw.mag_t <= raw.pose_t_end[2])]).max())
    res = process_sweep(raw, ProcessingConfig(saturation_limit=limit))
    assert 102 in res.report.dropped["saturated"]


def test_min_kept_fraction_decides_between_dropping_and_refusing():
    raw = make_sweep(4)
    acc = raw.accel.copy()
    for p in (0, 1, 2):
        acc[(raw.accel_t >= raw.pose_t_start[p]) & (raw.accel_t <= raw.pose_t_end[p])] = 0.0
    with pytest.raises(DataError, match=r"only 1 of 4 poses \(25%\) .*'absent' \(3 poses\)"):
        process_sweep(dataclasses.replace(raw, accel=acc))
    res = process_sweep(dataclasses.replace(raw, accel=acc), ProcessingConfig(min_kept_fraction=0.2))
    assert res.report.n_kept == 1


@pytest.mark.parametrize("stream", ["mag", "accel"])
def test_nan_only_stream(stream):
    raw = make_sweep(2)
    values = np.full_like(getattr(raw, stream), np.nan)
    with pytest.raises(DataError, match=f"stream '{stream}'.*only NaN"):
        process_sweep(dataclasses.replace(raw, **{stream: values}))


def test_overlapping_hold_windows():
    raw = make_sweep(3)
    end = raw.pose_t_end.copy()
    end[0] = raw.pose_t_start[1] + 0.01
    with pytest.raises(DataError, match="pose_id 100 .* pose_id 101 .* overlap"):
        process_sweep(dataclasses.replace(raw, pose_t_end=end))


def test_config_is_validated():
    assert from_dict(ProcessingConfig, {"settle_time": 0.02}).settle_time == 0.02
    with pytest.raises(ConfigError, match="settle_time"):
        from_dict(ProcessingConfig, {"settle_time": -1.0})
    with pytest.raises(ConfigError, match="split_fractions"):
        from_dict(ProcessingConfig, {"split_fractions": [0.5, 0.2, 0.2]})
    with pytest.raises(ConfigError, match="settle_tme"):
        from_dict(ProcessingConfig, {"settle_tme": 0.01})


# ------------------------------------------------------------------------------------ splits
def test_splits_are_deterministic_disjoint_and_stable_under_filtering():
    raw = make_sweep(60, hold=0.45, gap=0.05)
    a, b = process_sweep(raw).dataset, process_sweep(raw).dataset
    np.testing.assert_array_equal(a.split, b.split)
    parts = [set(a.subset(s).pose_id.tolist()) for s in SPLITS]
    assert sum(map(len, parts)) == len(a) and set().union(*parts) == set(a.pose_id.tolist())
    assert all(parts) and not (parts[0] & parts[1] or parts[0] & parts[2] or parts[1] & parts[2])
    reseeded = process_sweep(raw, ProcessingConfig(split_seed=7)).dataset
    assert not np.array_equal(reseeded.split, a.split)
    filtered = process_sweep(_defect(raw, "saturated")).dataset  # pose 101 dropped, the rest keep their split
    np.testing.assert_array_equal(filtered.split, a.split[a.pose_id != 101])


def _quiet_magnetometer(full_scale: float, lsb: float) -> SensorParts:
    from flexlearn.sensing.parts import MagnetometerPart

    return dataclasses.replace(
        QUIET_PARTS, magnetometer=MagnetometerPart("lis3mdl", ChipAxis(full_scale, lsb, 0.0, "T"), 80.0)
    )


def test_readings_on_another_grid_than_the_parts_lsb_name_the_part():
    """A LIS3MDL running at ±4 gauss (LSB 1/6842 gauss) declared at ±16 gauss (LSB 1/1711 gauss): its readings step
    by a quarter of the declared LSB, so clipping at its real rail would go unseen; the note says so and names the
    keys. The right part, or readings on no grid (a logger's calibrated floats), give no note."""
    raw = make_sweep(4)
    lsb_4g = 1e-4 / 6842
    noisy = raw.mag + np.random.default_rng(5).normal(scale=3 * lsb_4g, size=raw.mag.shape)
    quantised = with_mag(raw, np.round(noisy / lsb_4g) * lsb_4g)
    (note,) = process_sweep(quantised, parts=_quiet_magnetometer(16e-4, 1e-4 / 1711)).report.notes
    assert note.startswith("stream 'mag': readings step by 1.462e-08 T, 0.25x the LSB 5.845e-08 T"), note
    assert "rail near 0.0004 T" in note and "clipping below" in note and "goes unseen" in note, note
    assert "sensor/magnetometer=<preset>" in note, note
    (note,) = process_sweep(quantised, parts=_quiet_magnetometer(1e-4, lsb_4g / 4)).report.notes
    assert "4x the LSB" in note and "taken as clipped" in note, note
    assert process_sweep(quantised, parts=_quiet_magnetometer(4e-4, lsb_4g)).report.notes == []
    assert process_sweep(with_mag(raw, noisy), parts=_quiet_magnetometer(16e-4, 1e-4 / 1711)).report.notes == []
