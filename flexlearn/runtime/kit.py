"""The Raspberry Pi kit: one self-contained folder that runs an exported robot bundle with one command.

Layout of ``<kit>/`` (written by ``flexlearn-export ... kit=<kit>``)::

    README.md                  the install command and the run command
    requirements.txt           what the Pi installs (TorchScript: torch CPU, numpy, pyserial; + executorch for .pte)
    pi_runner.py, arm_runner.py   the runner (scripts/ of flexlearn)
    pikit/                     the runtime package it imports (flexlearn.runtime.pikit, copied as a top-level package,
                               with the Foxglove schemas its MCAP writer stores: pikit/foxglove_schemas/)
    robot_bundle.pt [.pte]     the bundle(s), each with <file>.manifest.json naming the set
    calibration.json           the receiver calibration built into the bundle (a copy, when it came from a file)
    selfcheck/frames.jsonl     a recorded stream (simulated robot, coil pulses, a target, spool positions)
    selfcheck/expected.json    the records each bundle gives on it here (``pi_runner.py --self-check`` compares)
    kit.json                   every file above with its SHA-256 (``set``), the torch versions that load the bundle

The folder is written under a temporary name beside ``<kit>`` and swapped in as a whole (`flexlearn.atomic.atomic_dir`:
a kill at any instant leaves the previous kit or the new one); ``kit.json`` is the last file written in it, and the
runner verifies every file it names before anything is loaded (`pikit.manifest.verify_set`).
"""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from pathlib import Path
from typing import Any, Iterable, Optional, Sequence

import torch

import flexlearn
from flexlearn.atomic import OutputPathError, atomic_dir
from flexlearn.runtime import pikit
from flexlearn.runtime.export import Artifact, manifest_text, versions
from flexlearn.runtime.pikit import compat, frame_checks, frame_lines, program_bundle, runner, selfcheck
from flexlearn.runtime.pikit.manifest import KIT_MANIFEST

KIT_SCHEMA = "flexlearn-pi-kit/1"
SCRIPTS = Path(flexlearn.__file__).resolve().parents[1] / "scripts"
RUNNERS = ("pi_runner.py", "arm_runner.py")
EXECUTORCH_PIN = "executorch==1.5.1"
EXECUTORCH_PI = "1.0.1"
"""The ExecuTorch runtime of a ``.pte`` kit on aarch64: PyPI's 1.0.1 links torch 2.9, so it runs with PyPI's
torch 2.9.1 aarch64 CPU wheel (1.5.1 links torch 2.13, whose aarch64 wheel on PyPI is the CUDA build and does
not import without the CUDA libraries). Measured: a ``.pte`` exported with 1.5.1 passes the kit's self-check
under emulated aarch64 with it (max |Δ| 1.9e-10 against x86)."""
EXECUTORCH_RUNTIME_IMPORTS = ("sympy", "mpmath", "networkx", "filelock", "flatbuffers", "tabulate", "ruamel.yaml")
"""What ``executorch.runtime`` imports (1.5.1, found by importing it in a venv of torch, numpy and executorch
installed with ``--no-deps``): with them a ``.pte`` kit installs without the exporter's dependencies."""
TORCH_PI = "2.9.1"
TORCH_PI_VERSION = (2, 9)  # PyPI's newest aarch64 CPU wheel (its 2.13 aarch64 wheel is the CUDA build)


def torch_needed(artifacts: Sequence[Artifact]) -> tuple:
    """The oldest torch (major, minor) that loads every TorchScript bundle of ``artifacts`` (`compat`).

    Args:
        artifacts: the kit's bundles; only the ``.pt`` ones are read.

    Returns:
        (major, minor), at least `compat.TORCH_MIN`.
    """
    need = compat.TORCH_MIN
    for art in artifacts:
        if art.path.suffix == ".pt":
            with zipfile.ZipFile(io.BytesIO(art.data)) as zf:
                code = "".join(zf.read(n).decode("utf-8", "replace") for n in zf.namelist() if "/code/" in n)
            need = max(need, compat.required_torch(code))
    return need


def requirements(formats: Sequence[str], need: tuple = compat.TORCH_MIN) -> str:
    """The kit's ``requirements.txt`` for its bundle ``formats`` ("pt", "pte").

    A TorchScript kit needs torch (the CPU build), numpy and pyserial: on aarch64 (the Pi) torch 2.9.1 from PyPI,
    whose aarch64 wheel is the CPU build (11 packages in all); elsewhere any torch the bundle loads with. It also
    lists typing-extensions, the one package torch imports to load and run a TorchScript bundle, so that
    ``pip install --no-deps -r requirements.txt`` (the README's install) leaves out torch's compiler dependencies
    (sympy, networkx, jinja2, fsspec, filelock, mpmath). A ``.pte`` adds ExecuTorch, which needs the torch it was
    built against: on aarch64 the runtime `EXECUTORCH_PI` with torch 2.9.1 (both from PyPI), elsewhere 1.5.1 with
    torch 2.13 (CPU build); and the packages its runtime imports (`EXECUTORCH_RUNTIME_IMPORTS`), not its exporter's
    dependencies (pandas, scikit-learn, coremltools, ...).

    Args:
        formats: the bundle formats of the kit ("pt", "pte").
        need: the oldest torch (major, minor) the bundles load with (`torch_needed`).

    Returns:
        The file's text.
    """
    lines = [
        f"# flexlearn Pi kit ({', '.join(formats)}): pip install --no-deps -r requirements.txt (README.md, step 2)",
        f"# The bundle loads with {compat.supported_range(need)}.",
    ]
    if "pte" in formats and need <= TORCH_PI_VERSION:
        lines += [
            f"# aarch64 (the Pi): PyPI's torch {TORCH_PI} CPU wheel and the ExecuTorch runtime {EXECUTORCH_PI},",
            "# which links it; elsewhere torch 2.13 (CPU build, PyTorch CPU index) and ExecuTorch 1.5.1",
            "--extra-index-url https://download.pytorch.org/whl/cpu",
            f'torch=={TORCH_PI}; platform_machine == "aarch64"',
            f'executorch=={EXECUTORCH_PI}; platform_machine == "aarch64"',
            'torch==2.13.0+cpu; platform_machine != "aarch64"',
            f'{EXECUTORCH_PIN}; platform_machine != "aarch64"',
            "# what its runtime imports (not its exporter's dependencies)",
            *EXECUTORCH_RUNTIME_IMPORTS,
        ]
    elif "pte" in formats or need > TORCH_PI_VERSION:
        lines += [
            "# torch 2.13 (ExecuTorch 1.5.1 links it, or the bundle needs it): CPU build from the PyTorch CPU index",
            "--extra-index-url https://download.pytorch.org/whl/cpu",
            "torch==2.13.0+cpu",
        ]
        if "pte" in formats:
            lines += [EXECUTORCH_PIN, "# what its runtime imports (not its exporter's dependencies)"]
            lines += list(EXECUTORCH_RUNTIME_IMPORTS)
    else:
        lines += [
            f'torch=={TORCH_PI}; platform_machine == "aarch64"  # PyPI\'s aarch64 CPU wheel (no CUDA libraries)',
            f'torch>={compat.TORCH_MIN[0]}.{compat.TORCH_MIN[1]}; platform_machine != "aarch64"',
        ]
    lines += ["numpy>=1.24", "pyserial>=3.5  # --serial", "typing-extensions>=4.10  # imported by torch"]
    return "\n".join(lines) + "\n"


def readme(bundles: Sequence[str], formats: Sequence[str], need: tuple = compat.TORCH_MIN) -> str:
    """The kit's README: copy, install, check, run.

    Args:
        bundles: the bundle file names; the first is the runner's default.
        formats: their formats ("pt", "pte").
        need: the oldest torch (major, minor) the bundles load with (`torch_needed`).

    Returns:
        The README's Markdown text.
    """
    first = bundles[0]
    ctl = " --control"
    install_flags = "--no-deps "
    install_note = (
        "\n`--no-deps` installs only what running the bundles imports (requirements.txt lists it), not torch's\n"
        "compiler dependencies or ExecuTorch's exporter; on a PC whose torch is a CUDA build (x86 PyPI), leave\n"
        "`--no-deps` out so that pip brings its CUDA libraries.\n"
    )
    return f"""# flexlearn Raspberry Pi kit

Bundles: {", ".join(bundles)} (formats: {", ".join(formats)}). They load with {compat.supported_range(need)}.
64-bit Raspberry Pi OS (aarch64, Python 3.11) or any Linux with Python ≥ 3.9.

## 1. Copy this folder to the Pi

    scp -r {{this folder}} pi@raspberrypi.local:flexlearn-kit

## 2. Install (once)

    cd flexlearn-kit && python3 -m venv .venv && .venv/bin/pip install {install_flags}-r requirements.txt
{install_note}
## 3. Check that this machine gives the recorded outputs

    .venv/bin/python pi_runner.py --self-check

Prints one JSON line; exit status 0 when every bundle reproduces `selfcheck/expected.json` (within 1e-6 m, flags
and controller status identical), 1 otherwise.

## 4. Run

    .venv/bin/python pi_runner.py --serial /dev/ttyACM0{ctl} --out poses.jsonl

(`{first}` is the default bundle; `--log frames.jsonl` replays a recording, `--format bin` reads binary frames,
`python pi_runner.py --help` lists the options.) Every file is checked against `kit.json` before anything is
loaded: a changed or mixed kit is refused with one line (exit status 2). Write a new kit rather than editing
files in this one.
"""


def _record(data: bytes, name: str, control: bool, frames: list) -> list:
    """The records a bundle's bytes give on ``frames`` (typed), through the runner's own code."""
    if name.endswith(".pte"):
        methods, meta, program = program_bundle.load_pte_methods(data, name)
        bundle: Any = program_bundle.ProgramBundle(methods, meta, program)
    else:
        bundle = torch.jit.load(io.BytesIO(data), map_location="cpu")
    recorder = runner.Recorder()
    with torch.inference_mode():
        runner.FrameRunner(bundle, recorder, control, quiet=True).process(frames)
    return recorder.records


def expected_outputs(artifacts: Sequence[Artifact], frames_jsonl: bytes, n: int) -> dict:
    """``selfcheck/expected.json``: each bundle's records on the recorded frames (controller on).

    Args:
        artifacts: the bundle(s) (``.pt`` and/or ``.pte``).
        frames_jsonl: the recorded frames (JSON lines).
        n: the bundle's segment count.

    Returns:
        ``{"tolerance", "recorded_with", "bundles": {file name: records}}``.
    """
    frames = list(frame_checks.typed(frame_lines.read_lines(io.BytesIO(frames_jsonl)), n))
    torch.set_num_threads(1)
    return {
        "tolerance": selfcheck.TOL,
        "recorded_with": {**versions()},
        "bundles": {a.path.name: _record(a.data, a.path.name, True, frames) for a in artifacts},
    }


def _runtime_files() -> dict[str, bytes]:
    """pi_runner.py, arm_runner.py, ``pikit/*.py`` and the Foxglove schemas of ``pikit/foxglove_schemas/`` (what
    ``--mcap`` stores in its files) as the kit holds them."""
    files = {}
    for name in RUNNERS:
        src = SCRIPTS / name
        if not src.is_file():
            raise OutputPathError(
                f"kit: '{src}' not found: the kit copies the runner from flexlearn's source tree (scripts/); "
                "export the kit from a source checkout (pip install -e .)"
            )
        files[name] = src.read_bytes()
    package = Path(pikit.__file__).resolve().parent
    for src in sorted(package.glob("*.py")) + sorted((package / "foxglove_schemas").glob("*")):
        files[src.relative_to(package.parent).as_posix()] = src.read_bytes()
    return files


def kit_files(
    artifacts: Sequence[Artifact], frames_jsonl: bytes, n: int, calibration: Optional[Path] = None
) -> dict[str, bytes]:
    """Every file of the kit (relative path → bytes), ``kit.json`` last.

    Args:
        artifacts: the bundle(s) (``robot_bundle.pt`` and/or ``.pte``), as built for the export.
        frames_jsonl: the self-check's recorded frames (JSON lines).
        n: the bundle's segment count.
        calibration: the calibration file built into the bundle (copied for reference), if one.

    Returns:
        The files, in writing order.
    """
    names = [a.path.name for a in artifacts]
    formats = [a.path.suffix.lstrip(".") for a in artifacts]
    members = {a.path.name: manifest_text(a, {}).sha256 for a in artifacts}
    files: dict[str, bytes] = {}
    for art in artifacts:
        files[art.path.name] = art.data
        files[art.path.name + ".manifest.json"] = manifest_text(art, members if len(members) > 1 else {}).text.encode()
    if calibration is not None:
        files["calibration.json"] = Path(calibration).read_bytes()
    files.update(_runtime_files())
    need = torch_needed(artifacts)
    files["requirements.txt"] = requirements(formats, need).encode()
    files["README.md"] = readme(names, formats, need).encode()
    files[f"{selfcheck.FOLDER}/{selfcheck.FRAMES}"] = frames_jsonl
    expected = expected_outputs(artifacts, frames_jsonl, n)
    files[f"{selfcheck.FOLDER}/{selfcheck.EXPECTED}"] = json.dumps(expected, allow_nan=False).encode()
    kit = {
        "kit": KIT_SCHEMA,
        "bundles": names,
        "formats": formats,
        "torch_exported": torch.__version__,
        "torch_loads": compat.supported_range(need),
        "flexlearn_version": versions()["flexlearn_version"],
        "set": {name: hashlib.sha256(data).hexdigest() for name, data in files.items()},
    }
    files[KIT_MANIFEST] = (json.dumps(kit, indent=2, sort_keys=True) + "\n").encode()
    return files


def write_kit(
    kit_dir: str | Path,
    artifacts: Sequence[Artifact],
    frames_jsonl: bytes,
    n: int,
    calibration: Optional[Path] = None,
    inputs: Iterable[str | Path] = (),
) -> Path:
    """Build every file of the kit (`kit_files`), then write the folder as a whole (`atomic_dir`).

    Args:
        kit_dir: the kit folder (replaced as a whole).
        artifacts: the bundle(s) (``robot_bundle.pt`` and/or ``.pte``), as built for the export.
        frames_jsonl: the self-check's recorded frames (JSON lines).
        n: the bundle's segment count.
        calibration: the calibration file built into the bundle (copied for reference), if one.
        inputs: the run's input files, never overwritten.

    Returns:
        ``kit_dir`` as a `Path`.

    Raises:
        OutputPathError: ``kit_dir`` is refused (an existing folder flexlearn did not write, an input) or cannot
            be written.
    """
    files = kit_files(artifacts, frames_jsonl, n, calibration)
    with atomic_dir(kit_dir, inputs) as tmp:
        for name, data in files.items():  # kit.json is the last
            path = tmp / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
    return Path(kit_dir)
