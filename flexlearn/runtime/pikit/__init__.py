"""The runtime the Raspberry Pi kit carries: standard library + torch (+ executorch for a ``.pte``), no flexlearn.

One source for both uses: flexlearn imports these modules as ``flexlearn.runtime.pikit``, and
``flexlearn-export ... kit=<dir>`` copies this folder as the top-level package ``pikit/`` beside ``pi_runner.py``.
The modules import each other only relatively (``from . import manifest``) and reach flexlearn's error family
only through `family`, so the same files work in both places.

Modules: `manifest` (file hashes, export-set manifests), `frame_lines` and `serial_frames` (frame protocols),
`frame_checks` (typed frames), `outputs` (writers, latency statistics, pacing), `calibration_file` (receiver
calibration with its physics checks), `program_bundle` (``.pte``/``.pt2`` bundles), `height_control` and
`time_base` (the tip-height PID and its clock, scripted into the bundle), `compat` (which torch loads a bundle),
`selfcheck` (the kit's recorded frames and the outputs they must give).
"""
