"""The ``import-urdf`` command of ``python -m solver``: a URDF robot to a scene file."""

from __future__ import annotations

import argparse
import math
from typing import Iterable, Optional

from ..import_command import add_settings_arguments, error, run_import, settings_from
from .importer import DEFAULT_STRENGTH_RATIO, import_urdf
from .limits import DEFAULT_LIMIT_STRENGTH
from .results import UrdfWarning


def _assignments(items: Optional[Iterable[str]], option: str) -> dict:
    values = {}
    for item in items or ():
        name, sep, text = item.rpartition("=")
        if not sep or not name:
            raise ValueError(f"{option}: expected JOINT=VALUE, got {item!r}")
        try:
            value = float(text)
        except ValueError:
            raise ValueError(f"{option}: {name}: {text!r} is not a number") from None
        if not math.isfinite(value):
            raise ValueError(f"{option}: {name}: value must be finite, got {text!r}")
        values[name] = value
    return values


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``import-urdf`` on an ``argparse`` sub-parsers object; sets ``handler(args) -> int``."""
    parser = subparsers.add_parser(
        "import-urdf", help="convert a URDF robot into a scene file (.json)",
        description="Convert a URDF robot (links, inertias, meshes, revolute/continuous/prismatic joints with "
                    "limits) into an abd-scene JSON file.",
    )
    parser.add_argument("urdf", metavar="ROBOT.urdf", help="the URDF file; meshes are looked up relative to it")
    parser.add_argument("--out", "-o", metavar="SCENE.json", help="scene file to write (default: ROBOT.json)")
    parser.add_argument("--q", action="append", metavar="JOINT=VALUE", default=[],
                        help="initial joint position (rad or m); repeat for several joints")
    parser.add_argument("--qd", action="append", metavar="JOINT=VALUE", default=[],
                        help="initial joint velocity (rad/s or m/s); repeat for several joints")
    parser.add_argument("--fixed-base", action="store_true", help="fix the root link even when it has mass")
    add_settings_arguments(parser, DEFAULT_STRENGTH_RATIO)
    parser.add_argument("--limit-strength", type=float, default=DEFAULT_LIMIT_STRENGTH,
                        help="joint limit strength in J (default %(default)s)")
    parser.add_argument("--quiet", action="store_true", help="no summary on stderr (warnings are still printed)")
    parser.set_defaults(handler=run_command)
    return parser


def run_command(args: argparse.Namespace) -> int:
    """The ``import-urdf`` command: 0 on success, 2 on bad input (``error: ...`` on stderr), 1 when the
    URDF packages (yourdfpy, trimesh, lxml) are missing. Warnings are printed as ``warning: ...``."""
    try:
        positions = _assignments(args.q, "--q")
        velocities = _assignments(args.qd, "--qd")
    except ValueError as problem:
        return error(str(problem))

    def load():
        result = import_urdf(args.urdf, fixed_base=args.fixed_base, joint_positions=positions,
                             joint_velocities=velocities, settings=settings_from(args),
                             strength_ratio=args.strength_ratio, limit_strength=args.limit_strength,
                             load_visuals=False)
        return result.scene, result.warnings

    def summary(scene) -> str:
        fixed = sum(body.motion == "fixed" for body in scene.bodies)
        return f"{len(scene.bodies)} bodies ({fixed} fixed), {len(scene.joints)} joints"

    return run_import(args.urdf, args.out, "URDF", UrdfWarning, load, args.quiet, summary)
