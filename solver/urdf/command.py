"""The ``import-urdf`` command of ``python -m solver``: a URDF robot to a scene file."""

from __future__ import annotations

import argparse
import math
import sys
import warnings
from pathlib import Path
from typing import Iterable, Optional


from ..scene import (
    SceneError, Settings,
)
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
    parser.add_argument("--frame-rate", type=float, default=Settings.frame_rate,
                        help="frames per second (default %(default)s)")
    parser.add_argument("--substeps", type=int, default=Settings.substeps,
                        help="time steps per frame (default %(default)s)")
    parser.add_argument("--frame-count", type=int, default=Settings.frame_count,
                        help="frames to simulate (default %(default)s)")
    parser.add_argument("--strength-ratio", type=float, default=DEFAULT_STRENGTH_RATIO,
                        help="joint stiffness ratio gamma, K = gamma (m_i + m_j) (default %(default)s)")
    parser.add_argument("--limit-strength", type=float, default=DEFAULT_LIMIT_STRENGTH,
                        help="joint limit strength in J (default %(default)s)")
    parser.add_argument("--quiet", action="store_true", help="no summary on stderr (warnings are still printed)")
    parser.set_defaults(handler=run_command)
    return parser


def run_command(args: argparse.Namespace) -> int:
    """The ``import-urdf`` command: 0 on success, 2 on bad input (``error: ...`` on stderr), 1 when the
    URDF packages (yourdfpy, trimesh, lxml) are missing. Warnings are printed as ``warning: ...``."""
    from ..scene_io import save_scene

    def error(message: str) -> int:
        print(f"error: {message}", file=sys.stderr, flush=True)
        return 2

    try:
        positions = _assignments(args.q, "--q")
        velocities = _assignments(args.qd, "--qd")
    except ValueError as problem:
        return error(str(problem))
    out = Path(args.out) if args.out else Path(args.urdf).with_suffix(".json")
    if not out.parent.is_dir():
        return error(f"--out: directory {str(out.parent)!r} does not exist")
    if out.resolve() == Path(args.urdf).resolve():
        return error(f"--out: {str(out)!r} is the URDF file itself, which the scene file would overwrite")
    settings = Settings(frame_rate=args.frame_rate, substeps=args.substeps, frame_count=args.frame_count)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UrdfWarning)
        try:
            result = import_urdf(args.urdf, fixed_base=args.fixed_base, joint_positions=positions,
                                 joint_velocities=velocities, settings=settings, strength_ratio=args.strength_ratio,
                                 limit_strength=args.limit_strength, load_visuals=False)
        except SceneError as problem:
            return error(str(problem))
        except ImportError as problem:
            print(f"error: {problem}", file=sys.stderr, flush=True)
            return 1
    for message in result.warnings:
        print(f"warning: {message}", file=sys.stderr, flush=True)
    try:
        arrays_path = save_scene(result.scene, out)
    except OSError as problem:
        return error(f"cannot write {str(out)!r}: {problem}")
    if not args.quiet:
        scene = result.scene
        fixed = [b.name for b in scene.bodies if b.motion == "fixed"]
        meshes = f" (big meshes in {arrays_path})" if arrays_path else ""
        print(f"wrote {out}{meshes}: {len(scene.bodies)} bodies ({len(fixed)} fixed), {len(scene.joints)} joints",
              file=sys.stderr, flush=True)
    return 0
