"""The ``import-mjcf`` command of ``python -m solver``: a MuJoCo (MJCF) model to a scene file."""

from __future__ import annotations

import argparse

from ..import_command import add_settings_arguments, run_import, settings_from
from .importer import DEFAULT_STRENGTH_RATIO, MjcfWarning, import_mjcf


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register ``import-mjcf`` on an ``argparse`` sub-parsers object; sets ``handler(args) -> int``."""
    parser = subparsers.add_parser(
        "import-mjcf", help="convert a MuJoCo (MJCF) model into a scene file (.json)",
        description="Convert a MuJoCo model (bodies and geoms, hinge/slide/ball/free joints with ranges, "
                    "position and velocity actuators, connect and weld equalities), compiled by MuJoCo, into an "
                    "abd-scene JSON file. What the scene cannot represent is printed as warnings.",
    )
    parser.add_argument("mjcf", metavar="MODEL.xml", help="the MJCF file; meshes are found as MuJoCo finds them")
    parser.add_argument("--out", "-o", metavar="SCENE.json", help="scene file to write (default: MODEL.json)")
    add_settings_arguments(parser, DEFAULT_STRENGTH_RATIO)
    parser.add_argument("--quiet", action="store_true", help="no summary on stderr (warnings are still printed)")
    parser.set_defaults(handler=run_command)
    return parser


def run_command(args: argparse.Namespace) -> int:
    """The ``import-mjcf`` command: 0 on success, 2 on bad input (``error: ...`` on stderr), 1 when the
    ``mujoco`` package is missing. What is left out is printed as ``warning: ...``."""

    def load():
        result = import_mjcf(args.mjcf, settings=settings_from(args), strength_ratio=args.strength_ratio)
        return result.scene, result.unsupported

    return run_import(args.mjcf, args.out, "MJCF", MjcfWarning, load, args.quiet,
                      lambda scene: f"{len(scene.bodies)} bodies, {len(scene.joints)} joints")
