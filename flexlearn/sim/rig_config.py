"""Configuration of the sweep-rig simulator (`flexlearn.sim.rig`): a tree of validated dataclasses, SI units.

Build it from a plain dict (or OmegaConf node) with ``flexlearn.config.from_dict(RigConfig, d)``: unknown keys
and values out of range fail with a `ConfigError` that names the key path (e.g. ``magnetometer.noise``).
Defaults follow seed 002 (Sec. III-A, III-B1, III-B2) where it gives a figure, and a realistic choice noted in
the field's comment where it does not.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Optional, Protocol

from flexlearn.config import check, check_non_negative, check_positive
from flexlearn.errors import ConfigError
from flexlearn.sensing.coil import CoilConfig
from flexlearn.sensing.parts import SensorParts

__all__ = [
    "JointGeometry",
    "MagnetometerConfig",
    "AccelerometerConfig",
    "AmbientConfig",
    "AcquisitionConfig",
    "FaultConfig",
    "ModuleTolerances",
    "RigConfig",
    "SENSOR_BLOCKS",
    "SensorBlocks",
    "validate_sensor_blocks",
    "JOINT_TYPES",
]

JOINT_TYPES = ("spherical", "universal")
"""Joint models of `JointGeometry.joint` (`flexlearn.sim.rig.geometry.child_frame`)."""


def _rate(obj: object, where: str, *keys: str) -> None:
    for key in keys:
        v = getattr(obj, key)
        check(0.0 <= v <= 1.0, f"{where}.{key}", v, "must be a probability in [0, 1]")


@dataclass
class JointGeometry:
    """Spherical joint without twist and board placement (seed 002, Sec. III-B1). Lengths [m], angles [rad].

    The parent coil (board mid-plane) sits ``platform_offset + pivot_to_next`` (9 + 10 mm) above the pivot on the
    parent axis; the child magnetometer/IMU lies on the sphere of radius ``pivot_radius`` (10 mm) around the pivot
    (29 mm board spacing straight; see `flexlearn.sim.rig.sensor_position`). Targets lie within ``max_colatitude``
    of the straight child axis, stratified over ``n_cells`` Fibonacci cells; the rig reaches them with an RMS
    ``positioning_error`` (clamped to ``mechanical_limit``). The sensor frame is tilted from the child board frame
    by ``mount_misalignment`` about a random axis; ``magnetometer_offset`` is the sensor position in the child board
    frame.

    A rig of another design (all defaults reproduce the seed's rig):

    * ``joint``: "spherical" (a pivot without twist: R_rel = exp(rotation_between(e, u))) or "universal" (a Cardan
      joint, R_rel = R_x(α) R_y(β): first axis x on the parent side, second axis y, ``axis_offset`` [m] apart along
      the chain; it twists the child about u against the spherical joint);
    * ``pivot_offset`` (x, y) [m]: the pivot's lateral offset from the parent coil's axis;
    * separate chips on the child board: ``imu_offset`` (x, y, z) [m] the IMU's position (None: one chip at
      ``magnetometer_offset``), ``magnetometer_mount`` and ``imu_mount`` rotation vectors [rad] of each chip's
      axes on the board (e.g. (0, 0, π/2): turned a quarter about the board normal). The label is the IMU's.
    """

    pivot_to_next: float = 10.0e-3
    pivot_radius: float = 10.0e-3
    platform_offset: float = 9.0e-3
    mechanical_limit: float = math.radians(30.0)
    max_colatitude: float = math.radians(29.5)
    n_cells: int = 250
    positioning_error: float = math.radians(0.5)
    mount_misalignment: float = math.radians(1.0)
    magnetometer_offset: tuple[float, float, float] = (0.0, 0.0, 0.0)
    joint: str = "spherical"
    axis_offset: float = 0.0
    pivot_offset: tuple[float, float] = (0.0, 0.0)
    imu_offset: Optional[tuple[float, float, float]] = None
    magnetometer_mount: tuple[float, float, float] = (0.0, 0.0, 0.0)
    imu_mount: tuple[float, float, float] = (0.0, 0.0, 0.0)

    def validate(self, where: str = "geometry") -> None:
        """Range checks; errors name ``<where>.<key>``.

        Args:
            where: key path of this block in the config, used in error messages.

        Raises:
            ConfigError: a value is out of range.
        """
        check_positive(self, where, "pivot_to_next", "pivot_radius", "max_colatitude", "mechanical_limit")
        check_non_negative(self, where, "platform_offset", "positioning_error", "mount_misalignment", "axis_offset")
        check(self.joint in JOINT_TYPES, f"{where}.joint", self.joint, f"must be one of {list(JOINT_TYPES)}")
        check(
            self.axis_offset == 0.0 or self.joint == "universal",
            f"{where}.axis_offset",
            self.axis_offset,
            "is only read for joint=universal (a spherical pivot has one centre)",
        )
        for key in ("magnetometer_offset", "pivot_offset", "imu_offset"):
            v = getattr(self, key)
            check(v is None or all(abs(x) <= 0.05 for x in v), f"{where}.{key}", v, "must lie within ±0.05 m per axis")
        check(self.axis_offset <= 0.05, f"{where}.axis_offset", self.axis_offset, "must be at most 0.05 m")
        for key in ("magnetometer_mount", "imu_mount"):
            v = getattr(self, key)
            check(
                math.sqrt(sum(x * x for x in v)) <= math.pi + 1e-12,
                f"{where}.{key}",
                v,
                "must be a rotation vector of at most pi rad",
            )
        check(
            self.mechanical_limit < math.pi / 2,
            f"{where}.mechanical_limit",
            self.mechanical_limit,
            "must be below pi/2 rad",
        )
        check(
            self.max_colatitude <= self.mechanical_limit,
            f"{where}.max_colatitude",
            self.max_colatitude,
            f"must not exceed mechanical_limit ({self.mechanical_limit})",
        )
        check(self.n_cells >= 1, f"{where}.n_cells", self.n_cells, "must be >= 1")


@dataclass
class MagnetometerConfig:
    """Child magnetometer. Noise 0.6 µT/axis and ~90 Hz from seed 002 (III-A); the rest our choice.

    Attributes: ``noise`` [T] per axis and conversion; ``rate`` conversions/s; ``window`` [s] over which a
    conversion averages the field before it becomes ready; ``lsb`` [T] quantisation step (BNO08x reports
    are Q4 µT: 1/16 µT); ``full_scale`` [T] per-axis clip (±1300 µT, BMM150-like); ``hard_iron`` [T] std of
    the per-axis offset; ``soft_iron`` std of the entries of the symmetric perturbation E in S = I + E.
    """

    noise: float = 0.6e-6
    rate: float = 90.0
    window: float = 5.0e-3
    lsb: float = 0.0625e-6
    full_scale: float = 1300.0e-6
    hard_iron: float = 25.0e-6
    soft_iron: float = 0.02

    def validate(self, where: str = "magnetometer") -> None:
        """Range checks; errors name ``<where>.<key>``.

        Args:
            where: key path of this block in the config, used in error messages.

        Raises:
            ConfigError: a value is out of range.
        """
        check_positive(self, where, "rate", "window", "lsb", "full_scale")
        check_non_negative(self, where, "noise", "hard_iron", "soft_iron")
        check(
            self.window < 1.0 / self.rate,
            f"{where}.window",
            self.window,
            f"must be shorter than the conversion period 1/rate = {1.0 / self.rate:.4g} s",
        )
        check(self.soft_iron < 0.2, f"{where}.soft_iron", self.soft_iron, "must be < 0.2 (a few percent)")


@dataclass
class AccelerometerConfig:
    """Child accelerometer: ``noise`` and per-axis ``bias`` std [m/s²], ``rate`` samples/s, ``gravity`` [m/s²];
    ``lsb`` [m/s²] quantisation step and ``full_scale`` [m/s²] per-axis clip (0: not modelled)."""

    noise: float = 0.02
    bias: float = 0.02
    rate: float = 100.0
    gravity: float = 9.80665
    lsb: float = 0.0
    full_scale: float = 0.0

    def validate(self, where: str = "accelerometer") -> None:
        """Range checks; errors name ``<where>.<key>``.

        Args:
            where: key path of this block in the config, used in error messages.

        Raises:
            ConfigError: a value is out of range.
        """
        check_positive(self, where, "rate", "gravity")
        check_non_negative(self, where, "noise", "bias", "lsb", "full_scale")
        check(
            self.full_scale == 0.0 or self.full_scale > 1.5 * self.gravity,
            f"{where}.full_scale",
            self.full_scale,
            f"must be 0 (no clip) or above 1.5 g ({1.5 * self.gravity:.4g} m/s^2)",
        )


@dataclass
class AmbientConfig:
    """Earth field fixed in the world (= parent) frame, z up: ``magnitude`` [T], ``inclination`` (downward dip)
    and ``declination`` [rad]; a slow per-axis sinusoidal drift of amplitude ``drift`` [T] with periods
    around ``drift_period`` [s], and a linear trend of ``drift_rate`` [T/s] along a random direction (a warming
    board, a nearby machine; 0: none)."""

    magnitude: float = 50.0e-6
    inclination: float = math.radians(64.0)
    declination: float = math.radians(3.0)
    drift: float = 0.5e-6
    drift_period: float = 300.0
    drift_rate: float = 0.0

    def validate(self, where: str = "ambient") -> None:
        """Range checks; errors name ``<where>.<key>``.

        Args:
            where: key path of this block in the config, used in error messages.

        Raises:
            ConfigError: a value is out of range.
        """
        check_non_negative(self, where, "magnitude", "drift", "drift_rate")
        check_positive(self, where, "drift_period")
        check(
            abs(self.inclination) <= math.pi / 2, f"{where}.inclination", self.inclination, "must lie in [-pi/2, pi/2]"
        )


@dataclass
class AcquisitionConfig:
    """Timing of one pose (seed 002, III-B1/III-B2) and the coil drive. Times [s], field [T].

    Per pose: a move of ``move_duration`` (± ``move_jitter``), reported stationary (t_start), ``hold_delay``,
    then [coil-off ``off_window``, pulse ``pulse``] repeated until ``min_fresh`` fresh coil-on conversions
    polled at least ``settle`` after switch-on are in (at most ``max_pulses``), then a last coil-off window
    (t_end). The master polls the magnetometer every ``poll_period`` (instants jitter by ± ``poll_jitter``);
    switch commands jitter by ± ``switch_jitter``. The coil current settles with time constant ``coil_tau``
    and is scaled for ``field_at_neighbour`` at the child magnetometer in the straight pose, unless
    ``coil_current`` [A] > 0 sets the drive current itself (the field then follows from the coil).
    """

    field_at_neighbour: float = 100.0e-6
    coil_current: float = 0.0
    coil_tau: float = 1.0e-3
    poll_period: float = 5.0e-3
    poll_jitter: float = 5.0e-5
    move_duration: float = 0.15
    move_jitter: float = 0.01
    hold_delay: float = 0.02
    off_window: float = 0.05
    pulse: float = 0.04
    settle: float = 0.015
    min_fresh: int = 6
    max_pulses: int = 3
    switch_jitter: float = 1.0e-4

    def validate(self, where: str = "acquisition") -> None:
        """Range checks; errors name ``<where>.<key>``.

        Args:
            where: key path of this block in the config, used in error messages.

        Raises:
            ConfigError: a value is out of range.
        """
        check_positive(
            self, where, "field_at_neighbour", "coil_tau", "poll_period", "move_duration", "off_window", "pulse"
        )
        check_non_negative(
            self, where, "poll_jitter", "move_jitter", "hold_delay", "settle", "switch_jitter", "coil_current"
        )
        check(self.coil_current <= 20.0, f"{where}.coil_current", self.coil_current, "must be at most 20 A")
        check(
            self.poll_jitter < 0.25 * self.poll_period,
            f"{where}.poll_jitter",
            self.poll_jitter,
            "must be below a quarter of poll_period",
        )
        check(
            self.move_jitter < 0.5 * self.move_duration,
            f"{where}.move_jitter",
            self.move_jitter,
            "must be below half of move_duration",
        )
        check(self.settle < self.pulse, f"{where}.settle", self.settle, f"must be shorter than pulse ({self.pulse})")
        check(
            self.switch_jitter < 0.1 * min(self.pulse, self.off_window),
            f"{where}.switch_jitter",
            self.switch_jitter,
            "must be below a tenth of pulse and off_window",
        )
        check(self.min_fresh >= 1, f"{where}.min_fresh", self.min_fresh, "must be >= 1")
        check(1 <= self.max_pulses <= 10, f"{where}.max_pulses", self.max_pulses, "must lie in [1, 10]")


@dataclass
class FaultConfig:
    """Injected faults, so that quality filters have something real to remove. Rates are probabilities.

    ``swing_rate`` of poses keep oscillating during the hold (amplitude ``swing_amplitude`` [rad] ±50 %, frequency
    ``swing_frequency`` [Hz] ±30 % per pose, decaying with time constant ``swing_decay`` [s]); ``nan_rate`` of mag
    polls read NaN; ``saturation_rate`` of conversions clip one axis at full scale; ``short_pulse_rate`` of poses
    get every pulse cut to ``short_pulse`` (±25 %) [s], so they end with too few settled coil-on samples.
    """

    swing_rate: float = 0.01
    swing_amplitude: float = math.radians(2.0)
    swing_frequency: float = 2.5
    swing_decay: float = 1.0
    nan_rate: float = 0.002
    saturation_rate: float = 0.001
    short_pulse_rate: float = 0.003
    short_pulse: float = 0.018

    def validate(self, where: str = "faults") -> None:
        """Range checks; errors name ``<where>.<key>``.

        Args:
            where: key path of this block in the config, used in error messages.

        Raises:
            ConfigError: a value is out of range.
        """
        _rate(self, where, "swing_rate", "nan_rate", "saturation_rate", "short_pulse_rate")
        check_non_negative(self, where, "swing_amplitude")
        check_positive(self, where, "swing_frequency", "swing_decay", "short_pulse")


@dataclass
class ModuleTolerances:
    """What differs between two built modules of one design: standard deviations of the per-module draws.

    Every module (identified by ``RigConfig.module_seed``) draws once from these normal distributions (SI units;
    angles [rad] are RMS per axis of a small rotation, lengths [m] per axis). docs/modules.md justifies each
    magnitude; the magnetometer's own gain, soft iron and hard iron are ``magnetometer.soft_iron`` /
    ``hard_iron`` and the sensor tilt on its disk is ``geometry.mount_misalignment``.

    Attributes:
        mag_axes: magnetometer axes against the accelerometer's (two dies in one package).
        sensor_offset: (x, y, z) position of the sensor on its disk (board on the disk, chip on the board).
        pivot_radius: radius of the TPU hourglass's pivot (print tolerance of the joint).
        joint_length: axial distance parent board → pivot (print tolerance + compression under tendon load).
        coil_offset: (x, y, z) position of the parent coil's board on its disk.
        coil_tilt: tilt of the parent coil's board about x and y.
        tumble_samples: magnetometer readings of the module tumbled by hand in the ambient field (for
            `flexlearn.sensing.magcal.fit_ellipsoid`); 0: none recorded.
    """

    mag_axes: float = math.radians(0.5)
    sensor_offset: tuple[float, float, float] = (0.2e-3, 0.2e-3, 0.1e-3)
    pivot_radius: float = 0.2e-3
    joint_length: float = 0.15e-3
    coil_offset: tuple[float, float, float] = (0.2e-3, 0.2e-3, 0.1e-3)
    coil_tilt: float = math.radians(0.5)
    tumble_samples: int = 400

    def validate(self, where: str = "module") -> None:
        """Range checks; errors name ``<where>.<key>``.

        Args:
            where: key path of this block in the config, used in error messages.

        Raises:
            ConfigError: a value is out of range.
        """
        check_non_negative(self, where, "mag_axes", "pivot_radius", "joint_length", "coil_tilt")
        for key in ("sensor_offset", "coil_offset"):
            v = getattr(self, key)
            check(
                len(v) == 3 and all(0.0 <= x <= 2e-3 for x in v),
                f"{where}.{key}",
                v,
                "must be three standard deviations in [0, 2e-3] m",
            )
        for key in ("mag_axes", "coil_tilt"):
            check(
                getattr(self, key) <= math.radians(10.0),
                f"{where}.{key}",
                getattr(self, key),
                "must be at most 10 degrees (0.1745 rad)",
            )
        check(
            max(self.pivot_radius, self.joint_length) <= 2e-3,
            f"{where}.pivot_radius/joint_length",
            (self.pivot_radius, self.joint_length),
            "must be at most 2e-3 m",
        )
        check(
            self.tumble_samples == 0 or self.tumble_samples >= 20,
            f"{where}.tumble_samples",
            self.tumble_samples,
            "must be 0 (none) or >= 20",
        )


SENSOR_BLOCKS = ("coil", "geometry", "magnetometer", "accelerometer", "ambient", "acquisition")
"""Config blocks of the joint, coil and sensor models that both simulators share (`RigConfig` and
`flexlearn.sim.robot.RobotConfig`), in the order they are checked."""


class SensorBlocks(Protocol):
    """A config that holds the shared sensor-model blocks (`SENSOR_BLOCKS`): `RigConfig`, ``RobotConfig``."""

    coil: CoilConfig
    geometry: JointGeometry
    magnetometer: MagnetometerConfig
    accelerometer: AccelerometerConfig
    ambient: AmbientConfig
    acquisition: AcquisitionConfig


def validate_sensor_blocks(cfg: SensorBlocks) -> None:
    """Check the shared sensor blocks of a simulator config, one owner for both simulators.

    Each block of `SENSOR_BLOCKS` checks itself (errors name ``block.key``); then the cross-block constraint:
    the master polls the magnetometer faster than it converts (``acquisition.poll_period`` < 1 /
    ``magnetometer.rate``), so every conversion is seen by at least one poll (seed 002, III-B2).

    Args:
        cfg: a `RigConfig`, ``RobotConfig`` or any config with the six blocks as attributes.

    Raises:
        ConfigError: a block's value is out of range, or the poll period is not shorter than the conversion
            period; the message names the key path (e.g. ``acquisition.poll_period``).
    """
    for name in SENSOR_BLOCKS:
        getattr(cfg, name).validate(name)
    acq = cfg.acquisition
    check(
        acq.poll_period < 1.0 / cfg.magnetometer.rate,
        "acquisition.poll_period",
        acq.poll_period,
        f"must be shorter than the conversion period ({1.0 / cfg.magnetometer.rate:.4g} s)",
    )


@dataclass
class RigConfig:
    """Everything `simulate_sweep` needs; ``seed`` makes the sweep reproducible.

    ``module_seed`` identifies the built module (its tolerance draws, `ModuleTolerances`, and its sensor
    parameters); −1 uses ``seed``, so a plain ``seed`` change is another module. The same module swept again
    with fresh targets and noise: same ``module_seed``, another ``seed``.

    ``coil_layers`` (even, 2–16): copper layers of the coil board, equally spaced through
    ``coil.board_thickness`` and wound in series; layers k and L−1−k form one two-layer spiral
    (`flexlearn.sim.rig.coil.StackedCoil`). ``parts`` (None: the chips the blocks describe): the module's sensor
    parts in the shape of `flexlearn.sensing.parts.SensorParts` (``conf/sensor``); when given, the magnetometer's
    ``noise``/``lsb``/``full_scale``/``rate`` and the accelerometer's ``noise``/``lsb``/``full_scale``/``rate``
    come from the parts' datasheet values (`with_parts`), σ = noise_density·√(rate/2).
    """

    n_poses: int = 15000
    seed: int = 0
    module_seed: int = -1
    module: ModuleTolerances = field(default_factory=ModuleTolerances)
    coil: CoilConfig = field(default_factory=CoilConfig)
    geometry: JointGeometry = field(default_factory=JointGeometry)
    magnetometer: MagnetometerConfig = field(default_factory=MagnetometerConfig)
    accelerometer: AccelerometerConfig = field(default_factory=AccelerometerConfig)
    ambient: AmbientConfig = field(default_factory=AmbientConfig)
    acquisition: AcquisitionConfig = field(default_factory=AcquisitionConfig)
    faults: FaultConfig = field(default_factory=FaultConfig)
    coil_layers: int = 2
    parts: Optional[dict[str, Any]] = None

    def sensor_parts(self) -> Optional[SensorParts]:
        """The validated ``parts`` (None when not given).

        Raises:
            ConfigError: a part's key or value is wrong; the message names ``parts.<key>``.
        """
        return None if self.parts is None else SensorParts.from_config(self.parts, "parts")

    def with_parts(self) -> "RigConfig":
        """This config with the chip values of ``parts`` written into the magnetometer and accelerometer blocks.

        Magnetometer: noise σ = nd·√(rate/2) [T], lsb, full_scale [T], rate = the part's output rate [Hz];
        accelerometer alike from the IMU's accelerometer axis [m/s²] and the IMU's output rate. Without parts the
        config itself.
        """
        parts = self.sensor_parts()
        if parts is None:
            return self
        mag, imu = parts.magnetometer, parts.imu
        m_rate, a_rate = mag.output_rate_hz, imu.output_rate_hz
        magnetometer = replace(
            self.magnetometer,
            noise=mag.field.noise_density * math.sqrt(m_rate / 2.0),
            lsb=mag.field.lsb,
            full_scale=mag.field.full_scale,
            rate=m_rate,
        )
        accelerometer = replace(
            self.accelerometer,
            noise=imu.accel.noise_density * math.sqrt(a_rate / 2.0),
            lsb=imu.accel.lsb,
            full_scale=imu.accel.full_scale,
            rate=a_rate,
        )
        return replace(self, magnetometer=magnetometer, accelerometer=accelerometer)

    def validate(self) -> None:
        """Check every block (errors name ``block.key``) and the cross-block constraints.

        The sensor blocks and their poll-period constraint are checked by `validate_sensor_blocks` (shared
        with ``RobotConfig``); the fault and module blocks and the short-pulse constraint here.

        Raises:
            ConfigError: a value is out of range; the message names its key path.
        """
        check(self.n_poses >= 1, "n_poses", self.n_poses, "must be >= 1")
        check(self.seed >= 0, "seed", self.seed, "must be >= 0")
        check(self.module_seed >= -1, "module_seed", self.module_seed, "must be >= -1 (-1: the sweep's seed)")
        check(
            2 <= self.coil_layers <= 16 and self.coil_layers % 2 == 0,
            "coil_layers",
            self.coil_layers,
            "must be an even number in [2, 16]",
        )
        if self.parts is not None and not isinstance(self.parts, dict):
            raise ConfigError(f"config 'parts' = {self.parts!r}: expected a mapping {{magnetometer: ..., imu: ...}}")
        validate_sensor_blocks(self.with_parts())
        for name in ("faults", "module"):
            getattr(self, name).validate(name)
        acq = self.acquisition
        check(
            self.faults.short_pulse * 1.25 < acq.pulse + acq.off_window,
            "faults.short_pulse",
            self.faults.short_pulse,
            "must be well below pulse + off_window",
        )
