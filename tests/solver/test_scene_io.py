"""Scene file: loading, validation (every SceneError case, via load_scene and via the CLI),
saving and round trips, and the ``run`` command's exit statuses."""

from __future__ import annotations

import copy
import io
import json
import math
import os
import re
import subprocess
import sys
import types
import zipfile
from pathlib import Path

import numpy as np
import pytest

import scenes
from solver import Trajectory
from solver.scene import (
    Body, Driving, Joint, Limit, Mesh, Scene, SceneError, Settings, SoftTransform,
)
from solver.scene_io import dumps_scene, load_scene, save_scene, scene_digest, scene_from_dict, scene_to_dict
from solver.scene_validation import validate_scene

REPO = Path(__file__).resolve().parents[2]


# ---------------------------------------------------------------------------------------------
# Documents used by the error cases
# ---------------------------------------------------------------------------------------------

def prismatic(**kwargs) -> dict:
    """The two-body prismatic scene with a limit and a drive (frame_count 48)."""
    values = dict(
        limit={"lower": -0.5, "upper": 0.5, "strength": 1.0},
        driving={"strength_ratio": 100.0, "is_constrained": 1, "is_passive": 0, "aim_distance": 0.3},
        slider_fields={"soft_transform": {"strength_ratio": [10.0, 10.0]}},
    )
    values.update(kwargs)
    return scenes.prismatic_scene(**values)


def pendulum(**kwargs) -> dict:
    return scenes.revolute_pendulum_scene(limit={"lower": -1.0, "upper": 1.0, "strength": 1.0}, **kwargs)


def body(doc: dict, name: str) -> dict:
    return next(b for b in doc["bodies"] if b["name"] == name)


def joint(doc: dict, name: str) -> dict:
    return next(j for j in doc["joints"] if j["name"] == name)


def edit(base, change):
    """A case builder: a copy of ``base()`` changed in place by ``change(doc)``."""
    def build():
        doc = base()
        change(doc)
        return doc
    return build


def _set(obj: dict, key, value):
    obj[key] = value


def _anchored(doc, kind: str) -> dict:
    """The pendulum's hinge made a ``kind`` (fixed or spherical) joint at its anchor, without a limit."""
    hinge = joint(doc, "hinge")
    hinge.update(type=kind, position=hinge.pop("position0"))
    for key in ("position1", "init_angle", "limit"):
        hinge.pop(key, None)
    return hinge


def _spherical_with_limit(doc):
    _anchored(doc, "spherical")["limit"] = {"lower": -1.0, "upper": 1.0}


def _flat_slider(doc):
    for vertex in body(doc, "slider")["mesh"]["vertices"]:
        vertex[2] = 0.0


def _flip_all(doc):
    mesh = body(doc, "slider")["mesh"]
    mesh["triangles"] = [[a, c, b] for a, b, c in mesh["triangles"]]


def _flip_one(doc):
    triangles = body(doc, "slider")["mesh"]["triangles"]
    a, b, c = triangles[3]
    triangles[3] = [a, c, b]


def _scaled(doc):
    transform = body(doc, "slider")["transform"]
    for row in range(3):
        for col in range(3):
            transform[row][col] *= 2.0


def _reflected(doc):
    body(doc, "slider")["transform"][0][0] = -1.0


def _sheared(doc):
    body(doc, "slider")["transform"][0][1] = 0.3


def _animated_without_transforms(doc):
    body(doc, "slider")["motion"] = "animated"


def _animated_wrong_length(doc):
    slider = body(doc, "slider")
    slider["motion"] = "animated"
    slider["animated_transforms"] = [slider["transform"]] * 10


def _animated_wrong_frame0(doc):
    slider = body(doc, "slider")
    slider["motion"] = "animated"
    slider["animated_transforms"] = [scenes.translation((5.0, 0.0, 0.0))] * 49


def _mass(doc, mass=1.0, center=(0.0, 0.0, 0.0), inertia=((1, 0, 0), (0, 1, 0), (0, 0, 1))):
    body(doc, "slider")["mass"] = {"mass": mass, "mass_center": list(center), "inertia": [list(r) for r in inertia]}


def _duplicate_body(doc):
    doc["bodies"].append(copy.deepcopy(body(doc, "slider")))


def _duplicate_joint(doc):
    doc["joints"].append(copy.deepcopy(joint(doc, "rail")))


def _degenerate_triangle(doc):
    body(doc, "slider")["mesh"]["triangles"][0] = [0, 0, 1]


def _with_part(mesh: dict, part: dict, *, inside_out: bool) -> dict:
    """``mesh`` with the closed mesh ``part`` added as a separate component (its triangles'
    winding flipped when ``inside_out``)."""
    offset = len(mesh["vertices"])
    triangles = [[c, b, a] if inside_out else [a, b, c] for a, b, c in part["triangles"]]
    return {"vertices": mesh["vertices"] + part["vertices"],
            "triangles": mesh["triangles"] + [[offset + i for i in t] for t in triangles]}


def _inside_out_part(doc):
    """The slider (a 0.4 m cube, scenes.prismatic_scene) with a disjoint inside-out 0.1 m cube beside it."""
    slider = body(doc, "slider")
    slider["mesh"] = _with_part(slider["mesh"], scenes.box_mesh(0.1, center=(0.5, 0.0, 0.0)), inside_out=True)


def _many_bodies(count: int, frame_count: int) -> dict:
    return scenes.scene([scenes.box_body(f"box{k}", 0.1, position=(k, 0, 0)) for k in range(count)],
                        frame_count=frame_count, substeps=1)


def _drop(obj: dict, key):
    del obj[key]


def _text(text: str):
    return lambda: text


# (id, document builder (dict, or the raw file text), substrings the message must contain)
CASES = [
    ("unknown-body-name", edit(prismatic, lambda d: _set(joint(d, "rail"), "l_body", "bse")),
     ["rail", "l_body", "bse"]),
    ("unknown-r-body", edit(prismatic, lambda d: _set(joint(d, "rail"), "r_body", "nobody")),
     ["rail", "r_body", "nobody"]),
    ("zero-volume", edit(prismatic, _flat_slider), ["slider", "mesh", "zero volume"]),
    ("inside-out-part", edit(prismatic, _inside_out_part),
     ["body 'slider': mesh: has an inside-out part: the 12 triangles connected to triangle 12 face inwards "
      "(signed volume -0.001 m^3 < 0)", "Recalculate Outside"]),
    ("degenerate-triangle", edit(prismatic, _degenerate_triangle), ["slider", "mesh.triangles", "repeats a vertex"]),
    ("triangle-index-out-of-range",
     edit(prismatic, lambda d: _set(body(d, "slider")["mesh"]["triangles"], 5, [0, 1, 8])),
     ["slider", "mesh.triangles", "out of range"]),
    ("negative-triangle-index", edit(prismatic, lambda d: _set(body(d, "slider")["mesh"]["triangles"], 5, [0, 1, -1])),
     ["slider", "mesh.triangles", "out of range"]),
    ("non-integer-triangle-index",
     edit(prismatic, lambda d: _set(body(d, "slider")["mesh"]["triangles"], 5, [0, 1, 2.5])),
     ["slider", "mesh.triangles", "integer"]),
    ("too-few-vertices",
     edit(prismatic, lambda d: _set(body(d, "slider")["mesh"], "vertices", [[0, 0, 0], [1, 0, 0]])),
     ["slider", "mesh.vertices", "3 vertices"]),
    ("vertex-wrong-shape", edit(prismatic, lambda d: _set(body(d, "slider")["mesh"]["vertices"], 2, [0.0, 1.0])),
     ["slider", "mesh.vertices"]),
    ("zero-length-axis", edit(prismatic, lambda d: _set(joint(d, "rail"), "position1", joint(d, "rail")["position0"])),
     ["rail", "position1", "zero-length"]),
    ("nan-vertex", edit(prismatic, lambda d: _set(body(d, "slider")["mesh"]["vertices"][0], 0, math.nan)),
     ["slider", "mesh.vertices", "finite"]),
    ("infinite-gravity", edit(prismatic, lambda d: _set(d["settings"]["gravity"], 2, -math.inf)),
     ["settings", "gravity", "finite"]),
    ("nan-position", edit(prismatic, lambda d: _set(joint(d, "rail")["position0"], 1, math.nan)),
     ["rail", "position0", "finite"]),
    ("infinite-kappa", edit(prismatic, lambda d: _set(body(d, "slider"), "kappa", math.inf)),
     ["slider", "kappa", "finite"]),
    ("nan-in-series",
     edit(prismatic, lambda d: _set(joint(d, "rail")["driving"], "aim_distance", [0.0] * 48 + [math.nan])),
     ["rail", "driving.aim_distance", "frame 48"]),
    ("series-wrong-length",
     edit(prismatic, lambda d: _set(joint(d, "rail")["driving"], "aim_distance", [0.0, 0.1, 0.2])),
     ["rail", "driving.aim_distance", "49"]),
    ("limit-series-wrong-length", edit(prismatic, lambda d: _set(joint(d, "rail")["limit"], "upper", [1.0] * 50)),
     ["rail", "limit.upper", "49"]),
    ("soft-series-wrong-length",
     edit(prismatic, lambda d: _set(body(d, "slider")["soft_transform"], "strength_ratio", [[1, 1]] * 3)),
     ["slider", "soft_transform.strength_ratio", "49"]),
    ("aim-series-wrong-length",
     edit(prismatic, lambda d: _set(body(d, "slider")["soft_transform"], "aim_transform", [scenes.translation()] * 2)),
     ["slider", "soft_transform.aim_transform", "49"]),
    ("animated-wrong-length", edit(prismatic, _animated_wrong_length), ["slider", "animated_transforms", "49"]),
    ("animated-without-transforms", edit(prismatic, _animated_without_transforms), ["slider", "animated_transforms"]),
    ("animated-frame0-differs", edit(prismatic, _animated_wrong_frame0), ["slider", "animated_transforms", "frame 0"]),
    ("animated-transforms-on-dynamic",
     edit(prismatic, lambda d: _set(body(d, "slider"), "animated_transforms", [scenes.translation()] * 49)),
     ["slider", "animated_transforms", "dynamic"]),
    ("velocity-wrong-length", edit(prismatic, lambda d: _set(body(d, "slider"), "linear_velocity", [0.0, 0.0])),
     ["slider", "linear_velocity", "shape"]),
    ("lower-above-upper", edit(prismatic, lambda d: _set(joint(d, "rail"), "limit", {"lower": 0.5, "upper": -0.5})),
     ["rail", "limit.lower", "upper"]),
    ("lower-above-upper-at-frame",
     edit(prismatic, lambda d: _set(joint(d, "rail")["limit"], "lower", [0.0] * 10 + [0.6] + [0.0] * 38)),
     ["rail", "limit.lower", "frame 10"]),
    ("revolute-lower-above-upper",
     edit(pendulum, lambda d: _set(joint(d, "hinge"), "limit", {"lower": 1.0, "upper": -1.0})),
     ["hinge", "limit.lower"]),
    ("negative-limit-strength", edit(prismatic, lambda d: _set(joint(d, "rail")["limit"], "strength", -1.0)),
     ["rail", "limit.strength", ">= 0"]),
    ("negative-driving-strength", edit(prismatic, lambda d: _set(joint(d, "rail")["driving"], "strength_ratio", -1.0)),
     ["rail", "driving.strength_ratio", ">= 0"]),
    ("negative-joint-strength", edit(prismatic, lambda d: _set(joint(d, "rail"), "strength_ratio", -100.0)),
     ["rail", "strength_ratio", ">= 0"]),
    ("negative-soft-strength",
     edit(prismatic, lambda d: _set(body(d, "slider")["soft_transform"], "strength_ratio", [10.0, -1.0])),
     ["slider", "soft_transform.strength_ratio", ">= 0"]),
    ("flag-not-0-or-1", edit(prismatic, lambda d: _set(joint(d, "rail")["driving"], "is_passive", 2)),
     ["rail", "driving.is_passive", "0 or 1"]),
    ("soft-flag-not-0-or-1",
     edit(prismatic, lambda d: _set(body(d, "slider")["soft_transform"], "is_constrained", 0.5)),
     ["slider", "soft_transform.is_constrained", "0 or 1"]),
    ("duplicate-body-name", edit(prismatic, _duplicate_body), ["slider", "name", "duplicate"]),
    ("duplicate-joint-name", edit(prismatic, _duplicate_joint), ["rail", "name", "duplicate"]),
    ("joint-to-itself", edit(prismatic, lambda d: _set(joint(d, "rail"), "r_body", "base")),
     ["rail", "r_body", "base"]),
    ("aim-distance-on-revolute", edit(pendulum, lambda d: _set(joint(d, "hinge"), "driving", {"aim_distance": 0.1})),
     ["hinge", "driving.aim_distance", "prismatic", "aim_angle"]),
    ("aim-angle-on-prismatic", edit(prismatic, lambda d: _set(joint(d, "rail")["driving"], "aim_angle", 0.1)),
     ["rail", "driving.aim_angle", "revolute"]),
    ("both-aims", edit(pendulum, lambda d: _set(joint(d, "hinge"), "driving", {"aim_angle": 0.1, "aim_velocity": 2.0})),
     ["hinge", "driving.aim_velocity", "not both"]),
    ("limit-on-spherical", edit(pendulum, _spherical_with_limit), ["hinge", "limit", "not on a spherical joint"]),
    ("axis-on-fixed", edit(pendulum, lambda d: _set(_anchored(d, "fixed"), "position0", [0, 0, 0])),
     ["hinge", "position0", "not on a fixed joint"]),
    ("fixed-without-position",
     edit(pendulum, lambda d: joint(d, "hinge").update(type="fixed", position0=None) or
          [joint(d, "hinge").pop(key) for key in ("position0", "position1", "init_angle", "limit")]),
     ["hinge", "position", "missing"]),
    ("init-angle-on-prismatic", edit(prismatic, lambda d: _set(joint(d, "rail"), "init_angle", 0.2)),
     ["rail", "init_angle"]),
    ("init-distance-on-revolute", edit(pendulum, lambda d: _set(joint(d, "hinge"), "init_distance", 0.2)),
     ["hinge", "init_distance"]),
    ("unknown-joint-type", edit(prismatic, lambda d: _set(joint(d, "rail"), "type", "ball")), ["rail", "type", "ball"]),
    ("typo-in-driving", edit(prismatic, lambda d: _set(joint(d, "rail")["driving"], "strenght_ratio", 5.0)),
     ["rail", "driving.strenght_ratio", "unknown", "strength_ratio"]),
    ("typo-in-body", edit(prismatic, lambda d: _set(body(d, "slider"), "mass_denisty", 5.0)),
     ["slider", "mass_denisty", "unknown"]),
    ("typo-in-joint", edit(prismatic, lambda d: _set(joint(d, "rail"), "postion1", [0, 0, 0])),
     ["rail", "postion1", "unknown"]),
    ("typo-in-limit", edit(prismatic, lambda d: _set(joint(d, "rail")["limit"], "uper", 1.0)),
     ["rail", "limit.uper", "unknown"]),
    ("typo-in-soft-transform", edit(prismatic, lambda d: _set(body(d, "slider")["soft_transform"], "aim", 1.0)),
     ["slider", "soft_transform.aim", "unknown"]),
    ("typo-in-mesh", edit(prismatic, lambda d: _set(body(d, "slider")["mesh"], "faces", [])),
     ["slider", "mesh.faces", "unknown"]),
    ("typo-in-settings", edit(prismatic, lambda d: _set(d["settings"], "framerate", 30)),
     ["settings", "framerate", "unknown"]),
    ("unknown-top-level-key", edit(prismatic, lambda d: _set(d, "camera", {})), ["scene", "camera", "unknown"]),
    ("wrong-format", edit(prismatic, lambda d: _set(d, "format", "abd-scenes")), ["format", "abd-scene"]),
    ("missing-format", edit(prismatic, lambda d: _drop(d, "format")), ["format", "missing"]),
    ("wrong-version", edit(prismatic, lambda d: _set(d, "version", 2)), ["version", "2"]),
    ("version-as-string", edit(prismatic, lambda d: _set(d, "version", "1")), ["version"]),
    ("scaled-transform", edit(prismatic, _scaled), ["slider", "transform", "not rigid", "bake", "scale", "mesh"]),
    ("sheared-transform", edit(prismatic, _sheared), ["slider", "transform", "not rigid"]),
    ("reflected-transform", edit(prismatic, _reflected), ["slider", "transform", "det"]),
    ("transform-last-row", edit(prismatic, lambda d: _set(body(d, "slider")["transform"], 3, [0, 0, 1, 1])),
     ["slider", "transform", "last row"]),
    ("scaled-aim-transform",
     edit(prismatic, lambda d: _set(body(d, "slider")["soft_transform"], "aim_transform",
                                    [[2, 0, 0, 0], [0, 2, 0, 0], [0, 0, 2, 0], [0, 0, 0, 1]])),
     ["slider", "soft_transform.aim_transform", "not rigid"]),
    ("zero-mass", edit(prismatic, lambda d: _mass(d, mass=0.0)), ["slider", "mass.mass", "> 0"]),
    ("negative-mass", edit(prismatic, lambda d: _mass(d, mass=-2.0)), ["slider", "mass.mass", "> 0"]),
    ("inertia-not-symmetric", edit(prismatic, lambda d: _mass(d, inertia=((1, 0.5, 0), (0, 1, 0), (0, 0, 1)))),
     ["slider", "mass.inertia", "symmetric"]),
    ("inertia-not-definite", edit(prismatic, lambda d: _mass(d, inertia=((1, 0, 0), (0, 1, 0), (0, 0, -1)))),
     ["slider", "mass.inertia", "positive definite"]),
    ("inertia-zero", edit(prismatic, lambda d: _mass(d, inertia=((0, 0, 0), (0, 0, 0), (0, 0, 0)))),
     ["slider", "mass.inertia", "positive definite"]),
    ("inertia-triangle-inequality", edit(prismatic, lambda d: _mass(d, inertia=((1, 0, 0), (0, 1, 0), (0, 0, 3)))),
     ["slider", "mass.inertia", "triangle inequality"]),
    ("inertia-wrong-shape",
     edit(prismatic, lambda d: _set(body(d, "slider"), "mass",
                                    {"mass": 1.0, "mass_center": [0, 0, 0], "inertia": [1, 1, 1]})),
     ["slider", "mass.inertia", "shape"]),
    ("mass-missing-field", edit(prismatic, lambda d: _set(body(d, "slider"), "mass", {"mass": 1.0})),
     ["slider", "mass.mass_center", "missing"]),
    ("negative-density", edit(prismatic, lambda d: _set(body(d, "slider"), "mass_density", -1000.0)),
     ["slider", "mass_density", "> 0"]),
    ("zero-kappa", edit(prismatic, lambda d: _set(body(d, "slider"), "kappa", 0.0)), ["slider", "kappa", "> 0"]),
    ("negative-kappa", edit(prismatic, lambda d: _set(body(d, "slider"), "kappa", -1e8)), ["slider", "kappa", "> 0"]),
    ("string-density", edit(prismatic, lambda d: _set(body(d, "slider"), "mass_density", "heavy")),
     ["slider", "mass_density", "number"]),
    ("boolean-kappa", edit(prismatic, lambda d: _set(body(d, "slider"), "kappa", True)), ["slider", "kappa", "number"]),
    ("null-transform", edit(prismatic, lambda d: _set(body(d, "slider"), "transform", None)), ["slider", "transform"]),
    ("unknown-motion", edit(prismatic, lambda d: _set(body(d, "slider"), "motion", "kinematic")),
     ["slider", "motion", "kinematic"]),
    ("zero-substeps", edit(prismatic, lambda d: _set(d["settings"], "substeps", 0)), ["settings", "substeps", ">= 1"]),
    ("too-many-time-steps", edit(prismatic, lambda d: d["settings"].update(frame_count=1_000_000, substeps=101)),
     ["settings: substeps: frame_count * substeps = 1000000 * 101 = 101000000 time steps", "100000000"]),
    ("trajectory-too-big", lambda: _many_bodies(63, 1_000_000),
     ["settings: frame_count: the trajectory of 63 bodies and 0 joints", "1008001008 values", "1000000000"]),
    ("zero-frame-rate", edit(prismatic, lambda d: _set(d["settings"], "frame_rate", 0.0)),
     ["settings", "frame_rate", "> 0"]),
    ("negative-frame-rate", edit(prismatic, lambda d: _set(d["settings"], "frame_rate", -24.0)),
     ["settings", "frame_rate", "> 0"]),
    ("negative-frame-count", edit(prismatic, lambda d: _set(d["settings"], "frame_count", -1)),
     ["settings", "frame_count", ">= 0"]),
    ("non-integer-substeps", edit(prismatic, lambda d: _set(d["settings"], "substeps", 2.5)),
     ["settings", "substeps", "integer"]),
    ("string-frame-count", edit(prismatic, lambda d: _set(d["settings"], "frame_count", "48")),
     ["settings", "frame_count", "integer"]),
    ("non-integer-max-iterations", edit(prismatic, lambda d: _set(d["settings"], "max_iterations", 1.5)),
     ["settings", "max_iterations", "integer"]),
    ("min-above-max-iterations", edit(prismatic, lambda d: d["settings"].update(max_iterations=3, min_iterations=5)),
     ["settings", "min_iterations"]),
    ("zero-velocity-tol", edit(prismatic, lambda d: _set(d["settings"], "velocity_tol", 0.0)),
     ["settings", "velocity_tol", "> 0"]),
    ("negative-line-search", edit(prismatic, lambda d: _set(d["settings"], "line_search_max_iterations", -1)),
     ["settings", "line_search_max_iterations"]),
    ("missing-mesh", edit(prismatic, lambda d: _drop(body(d, "slider"), "mesh")), ["slider", "mesh", "missing"]),
    ("missing-triangles", edit(prismatic, lambda d: _drop(body(d, "slider")["mesh"], "triangles")),
     ["slider", "mesh.triangles", "missing"]),
    ("missing-position1", edit(prismatic, lambda d: _drop(joint(d, "rail"), "position1")),
     ["rail", "position1", "missing"]),
    ("missing-body-name", edit(prismatic, lambda d: _drop(d["bodies"][1], "name")), ["body #1", "name", "missing"]),
    ("body-not-object", edit(prismatic, lambda d: _set(d["bodies"], 1, "slider")), ["body #1", "object"]),
    ("bodies-not-list", edit(prismatic, lambda d: _set(d, "bodies", {"slider": {}})), ["bodies", "list"]),
    ("no-bodies", edit(prismatic, lambda d: d.update(bodies=[], joints=[])), ["bodies", "at least one"]),
    ("ragged-vertices", edit(prismatic, lambda d: _set(body(d, "slider")["mesh"]["vertices"], 0, [0, [0, 1], 2])),
     ["slider", "mesh.vertices"]),
    ("top-level-list", _text("[1, 2, 3]"), ["scene", "object"]),
    ("invalid-json", _text('{"format": "abd-scene", "version": 1,'), ["not valid JSON"]),
    ("duplicate-json-key", _text('{"format": "abd-scene", "version": 1, "version": 1, "bodies": []}'),
     ["version", "duplicate"]),
    ("duplicate-key-in-a-body",
     lambda: json.dumps(prismatic()).replace('"name": "slider"', '"name": "slider", "kappa": 1e8', 1)
     .replace('"kappa": 1e8', '"kappa": 1e8, "kappa": 1e8', 1),
     ["scene: kappa: duplicate key in the object named 'slider'"]),
    # NumPy would read a boolean among numbers as 1 or 0 (the gravity [1, 0, -9.81], vertex 0).
    ("boolean-in-gravity", edit(prismatic, lambda d: _set(d["settings"]["gravity"], 0, True)),
     ["settings", "gravity", "not booleans"]),
    ("boolean-triangle-index", edit(prismatic, lambda d: _set(body(d, "slider")["mesh"]["triangles"][0], 0, False)),
     ["slider", "mesh.triangles", "not booleans"]),
    ("boolean-in-a-series",
     edit(prismatic, lambda d: _set(joint(d, "rail")["driving"], "aim_distance", [0.0] * 48 + [True])),
     ["rail", "driving.aim_distance", "not booleans"]),
    ("empty-file", _text(""), ["not valid JSON"]),
]


def _write(tmp_path: Path, document) -> Path:
    path = tmp_path / "scene.json"
    if isinstance(document, str):
        path.write_text(document, encoding="utf-8")
    else:
        path.write_text(json.dumps(document), encoding="utf-8")
    return path


@pytest.mark.parametrize("build, expected", [pytest.param(b, e, id=i) for i, b, e in CASES])
def test_load_scene_refuses(tmp_path, build, expected):
    path = _write(tmp_path, build())
    with pytest.raises(SceneError) as caught:
        load_scene(path)
    message = str(caught.value)
    for part in expected:
        assert part in message, f"{part!r} not in {message!r}"


@pytest.mark.slow
@pytest.mark.parametrize("build, expected", [pytest.param(b, e, id=i) for i, b, e in CASES])
def test_cli_refuses(tmp_path, build, expected):
    path = _write(tmp_path, build())
    out = tmp_path / "result.npz"
    result = subprocess.run(
        [sys.executable, "-m", "solver", "run", str(path), "--out", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("error: "), result.stderr
    for part in expected:
        assert part in result.stderr, f"{part!r} not in {result.stderr!r}"
    assert "Traceback" not in result.stderr
    assert not out.exists()


def test_cli_unreadable_file(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "solver", "run", str(tmp_path / "missing.json"), "--out", str(tmp_path / "r.npz")],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 2
    assert "missing.json" in result.stderr and "cannot read" in result.stderr


def test_load_scene_unreadable_file(tmp_path):
    with pytest.raises(SceneError, match="cannot read"):
        load_scene(tmp_path / "missing.json")
    with pytest.raises(SceneError, match="cannot read"):
        load_scene(tmp_path)  # a directory
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(SceneError):
        load_scene(binary)


def test_huge_integer_literal_is_a_scene_error(tmp_path):
    path = _write(tmp_path, '{"format": "abd-scene", "version": ' + "9" * 5000 + "}")
    with pytest.raises(SceneError):
        load_scene(path)


def test_deeply_nested_json_is_a_scene_error(tmp_path):
    path = _write(tmp_path, "[" * 100_000 + "]" * 100_000)
    with pytest.raises(SceneError):
        load_scene(path)


# ---------------------------------------------------------------------------------------------
# Valid scenes, normalisation, round trips
# ---------------------------------------------------------------------------------------------

def assert_scenes_equal(a: Scene, b: Scene) -> None:
    assert json.dumps(scene_to_dict(a)) == json.dumps(scene_to_dict(b))
    for body_a, body_b in zip(a.bodies, b.bodies):
        np.testing.assert_array_equal(body_a.mesh.vertices, body_b.mesh.vertices)
        np.testing.assert_array_equal(body_a.transform, body_b.transform)
        if body_a.soft_transform is not None:
            np.testing.assert_array_equal(body_a.soft_transform.aim_transform, body_b.soft_transform.aim_transform)


def test_every_feature_example_loads_and_normalises(tmp_path):
    scene = load_scene(_write(tmp_path, scenes.every_feature_example()))
    frames = 49
    assert isinstance(scene.settings.substeps, int) and isinstance(scene.settings.frame_rate, float)
    assert scene.settings.gravity.shape == (3,) and scene.settings.gravity.dtype == np.float64
    base, slider = scene.bodies
    assert base.mesh.vertices.dtype == np.float64 and base.mesh.vertices.shape == (8, 3)
    assert base.mesh.triangles.dtype == np.int64 and base.mesh.triangles.shape == (12, 3)
    assert base.transform.shape == (4, 4)
    soft = base.soft_transform
    assert soft.strength_ratio.shape == (frames, 2)
    assert soft.aim_transform.shape == (frames, 4, 4)
    assert soft.is_constrained.shape == (frames,) and np.all(soft.is_constrained == 1.0)
    assert slider.soft_transform is None and slider.animated_transforms is None
    (rail,) = scene.joints
    assert rail.position0.shape == (3,) and rail.position0.dtype == np.float64
    for series in (rail.limit.lower, rail.limit.upper, rail.limit.strength, rail.driving.strength_ratio,
                   rail.driving.is_constrained, rail.driving.is_passive, rail.driving.aim_distance):
        assert isinstance(series, np.ndarray) and series.shape == (frames,) and series.dtype == np.float64
    assert np.all(rail.driving.aim_distance == 0.3)


def every_joint_type() -> dict:
    """Four bodies linked by a driven revolute joint (position aim, per frame), a prismatic joint
    with a velocity drive, a fixed and a spherical joint (frame_count 2)."""
    bodies = [scenes.box_body("base", 0.5, motion="fixed"), scenes.box_body("arm", 0.3, (1.0, 0.0, 0.0)),
              scenes.box_body("slider", 0.2, (2.0, 0.0, 0.0)), scenes.box_body("ball", 0.2, (1.0, 0.0, -1.0))]
    joints = [
        {"name": "motor", "type": "revolute", "l_body": "base", "r_body": "arm", "position0": [0.5, 0, 0],
         "position1": [0.5, 1, 0], "driving": {"aim_angle": [0.0, 10 * np.pi, 10 * np.pi], "is_passive": [0, 0, 1]}},
        {"name": "rail", "type": "prismatic", "l_body": "arm", "r_body": "slider", "position0": [2, 0, 0],
         "position1": [3, 0, 0], "driving": {"aim_velocity": 0.5, "strength_ratio": 20.0}},
        {"name": "weld", "type": "fixed", "l_body": "slider", "r_body": "base", "position": [1.5, 0, 0]},
        {"name": "socket", "type": "spherical", "l_body": "arm", "r_body": "ball", "position": [1, 0, -0.5],
         "strength_ratio": 50.0},
    ]
    return scenes.scene(bodies, joints, frame_count=2)


def test_every_joint_type_loads_with_its_own_keys(tmp_path):
    motor, rail, weld, socket = load_scene(_write(tmp_path, every_joint_type())).joints
    assert motor.driving.aim_distance is None and motor.driving.aim_velocity is None
    np.testing.assert_array_equal(motor.driving.aim_angle, [0.0, 10 * np.pi, 10 * np.pi])
    assert rail.driving.aim_distance is None and rail.driving.aim_angle is None
    np.testing.assert_array_equal(rail.driving.aim_velocity, [0.5, 0.5, 0.5])
    for anchored in (weld, socket):
        assert anchored.position0 is None and anchored.position1 is None and anchored.position.shape == (3,)
        assert anchored.limit is None and anchored.driving is None
    assert socket.strength_ratio == 50.0 and weld.type == "fixed"


@pytest.mark.parametrize("document", [
    pytest.param(every_joint_type(), id="every-joint-type"),
    pytest.param(scenes.every_feature_example(), id="every-feature-example"),
    pytest.param(prismatic(), id="prismatic"),
    pytest.param(pendulum(arm_pose_angle=0.4, init_angle=0.1), id="pendulum"),
])
def test_round_trip(tmp_path, document):
    first = load_scene(_write(tmp_path, document))
    path = tmp_path / "saved.json"
    save_scene(first, path)
    second = load_scene(path)
    assert_scenes_equal(first, second)
    assert scene_from_dict(json.loads(json.dumps(scene_to_dict(second)))) is not None
    assert dumps_scene(second) == path.read_text(encoding="utf-8")


def test_big_meshes_go_to_an_arrays_file_beside_the_scene_file(tmp_path, monkeypatch):
    from solver import scene_io

    scene = load_scene(_write(tmp_path, prismatic()))  # two boxes of 8 vertices
    path = tmp_path / "saved.json"
    assert save_scene(scene, path) is None and not list(tmp_path.glob("*.npz"))  # small meshes stay inline
    inline_text = path.read_text(encoding="utf-8")
    monkeypatch.setattr(scene_io, "INLINE_VERTEX_LIMIT", 7)  # now every box is "big"
    arrays_path = save_scene(scene, path)
    assert arrays_path == tmp_path / "saved_meshes.npz" and arrays_path.is_file()
    written = json.loads(path.read_text(encoding="utf-8"))
    assert list(written)[:3] == ["format", "version", "arrays"] and written["arrays"] == "saved_meshes.npz"
    assert written["bodies"][1]["mesh"] == {"vertices": "body1_vertices", "triangles": "body1_triangles"}
    with np.load(arrays_path) as arrays:
        np.testing.assert_array_equal(arrays["body1_vertices"], scene.bodies[1].mesh.vertices)
        assert arrays["body1_triangles"].dtype == np.int64
    # The pair moves together: the scene file names its arrays file relative to its own folder.
    moved = tmp_path / "farm"
    moved.mkdir()
    for name in ("saved.json", "saved_meshes.npz"):
        (tmp_path / name).rename(moved / name)
    loaded = load_scene(moved / "saved.json")
    assert_scenes_equal(scene, loaded)
    assert dumps_scene(loaded) == inline_text  # the same scene as the inline file


def test_scene_digest_survives_the_file_and_follows_what_the_simulation_reads(tmp_path, monkeypatch):
    from solver import scene_io

    scene = load_scene(_write(tmp_path, prismatic()))
    digest = scene_digest(scene)
    assert len(digest) == 64 and int(digest, 16) >= 0
    path = tmp_path / "saved.json"
    save_scene(scene, path)
    assert scene_digest(load_scene(path)) == digest
    monkeypatch.setattr(scene_io, "INLINE_VERTEX_LIMIT", 7)  # the meshes in the arrays file
    save_scene(scene, path)
    assert scene_digest(load_scene(path)) == digest
    moved = copy.deepcopy(scene)
    moved.settings.device = "cupy"  # where the systems are solved, not what is solved
    assert scene_digest(moved) == digest
    for change in (lambda s: setattr(s.bodies[1], "mass_density", 1001.0),
                   lambda s: s.joints[0].driving.aim_distance.__setitem__(5, 0.31),
                   lambda s: setattr(s.settings, "substeps", s.settings.substeps + 1)):
        changed = copy.deepcopy(scene)
        change(changed)
        assert scene_digest(changed) != digest


def _npy_bytes(array: np.ndarray) -> bytes:
    """A single array's .npy file, which np.load reads as an array, not as an archive."""
    stream = io.BytesIO()
    np.save(stream, array)
    return stream.getvalue()


def _damaged_member(array: np.ndarray) -> bytes:
    """A compressed .npz of ``array`` named body1_vertices whose zip structure is whole but whose
    member's deflate stream is damaged (zlib fails while the array is read)."""
    stream = io.BytesIO()
    np.savez_compressed(stream, body1_vertices=array)
    raw = bytearray(stream.getvalue())
    with zipfile.ZipFile(io.BytesIO(bytes(raw))) as archive:
        info = archive.getinfo("body1_vertices.npy")
    start = info.header_offset + 30 + len(info.filename) + len(info.extra)
    for k in range(start + 5, start + 40):
        raw[k] ^= 0xFF
    return bytes(raw)


def _arrays_case(tmp_path: Path, arrays_name, mesh_field, arrays) -> Path:
    """The prismatic scene with the slider's vertices named ``mesh_field`` in ``arrays_name``
    (``arrays`` written there as an .npz when a dict, as they are when bytes or a function
    returning bytes)."""
    document = prismatic()
    if arrays_name is not None:
        document["arrays"] = arrays_name
    body(document, "slider")["mesh"]["vertices"] = mesh_field
    if callable(arrays):
        arrays = arrays()
    if isinstance(arrays, bytes):
        (tmp_path / "scene_meshes.npz").write_bytes(arrays)
    elif arrays is not None:
        np.savez(tmp_path / "scene_meshes.npz", **arrays)
    return _write(tmp_path, document)


@pytest.mark.parametrize("arrays_name, mesh_field, arrays, expected", [
    pytest.param(None, "body1_vertices", None, "body 'slider': mesh.vertices: names the array 'body1_vertices', "
                 'but the scene has no "arrays" file', id="no-arrays-file"),
    pytest.param("scene_meshes.npz", "body1_vertices", None, "cannot read the scene's arrays file", id="missing-file"),
    pytest.param("../scene_meshes.npz", "body1_vertices", {}, "arrays: must be the name of a .npz file", id="a-path"),
    pytest.param("scene_meshes.json", "body1_vertices", {}, "arrays: must be the name of a .npz file", id="not-npz"),
    pytest.param("scene_meshes.npz", "body1_vertices", {"other": np.zeros((8, 3))},
                 "body 'slider': mesh.vertices: no array 'body1_vertices' in the arrays file", id="missing-array"),
    pytest.param("scene_meshes.npz", "body1_vertices", {"body1_vertices": np.array([None] * 8, dtype=object)},
                 "cannot read the scene's arrays file", id="object-array"),
    pytest.param("scene_meshes.npz", "body1_vertices", b"PK\x03\x04 a zip file cut short",
                 "cannot read the scene's arrays file", id="truncated"),
    pytest.param("scene_meshes.npz", "body1_vertices", {"body1_vertices": np.zeros((8, 2))},
                 "body 'slider': mesh.vertices", id="wrong-shape"),
    pytest.param("scene_meshes.npz", "body1_vertices", lambda: _npy_bytes(np.zeros((8, 3))),
                 "cannot read the scene's arrays file: not a .npz archive", id="an-npy-file"),
    pytest.param("scene_meshes.npz", "body1_vertices", lambda: _damaged_member(np.zeros((800, 3))),
                 "cannot read the scene's arrays file", id="damaged-member"),
])
def test_arrays_file_problems_are_scene_errors(tmp_path, arrays_name, mesh_field, arrays, expected):
    with pytest.raises(SceneError, match=re.escape(expected)):
        load_scene(_arrays_case(tmp_path, arrays_name, mesh_field, arrays))


def _npz_with_header(members: dict) -> bytes:
    """An .npz (stored, uncompressed) whose members are ``name: (npy header dict, data bytes)``:
    a header may claim any shape, whatever data follows it."""
    stream = io.BytesIO()
    with zipfile.ZipFile(stream, "w") as archive:
        for name, (header, data) in members.items():
            npy = io.BytesIO()
            np.lib.format.write_array_header_1_0(npy, header)
            archive.writestr(f"{name}.npy", npy.getvalue() + data)
    return stream.getvalue()


def _slider_vertices() -> np.ndarray:
    return np.asarray(body(prismatic(), "slider")["mesh"]["vertices"], dtype=np.float64)


def test_an_arrays_file_is_read_only_for_the_arrays_the_meshes_name(tmp_path):
    """np.load's archive read every member, used or not: an unused member of zeros took its whole
    size in memory (3.2 GB from a 3 MB file), and a damaged one failed the scene. Only the named
    arrays are read now, each after its header is checked."""
    import tracemalloc

    stream = io.BytesIO()
    with zipfile.ZipFile(stream, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        with archive.open("body1_vertices.npy", "w") as member:
            np.save(member, _slider_vertices())
        with archive.open("unused.npy", "w", force_zip64=True) as member:  # 200 MB of zeros
            np.lib.format.write_array_header_1_0(member, {"descr": "<f8", "fortran_order": False,
                                                          "shape": (25_000_000,)})
            zeros = bytes(2**20)
            for _ in range(200_000_000 // len(zeros)):
                member.write(zeros)
            member.write(bytes(200_000_000 % len(zeros)))
        archive.writestr("damaged.npy", b"\x93NUMPY not an array")
    path = _arrays_case(tmp_path, "scene_meshes.npz", "body1_vertices", stream.getvalue())
    assert (tmp_path / "scene_meshes.npz").stat().st_size < 1_000_000
    tracemalloc.start()
    try:
        scene = load_scene(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    np.testing.assert_array_equal(scene.bodies[1].mesh.vertices, _slider_vertices())
    assert peak < 20_000_000


@pytest.mark.parametrize("header, data, expected", [
    pytest.param({"descr": "<f8", "fortran_order": False, "shape": (10**9, 3)}, bytes(8 * 24),
                 "its header claims 24000000000 bytes, more than the 192 the archive holds for it", id="huge-shape"),
    pytest.param({"descr": "|O", "fortran_order": False, "shape": (8, 3)}, bytes(8 * 24),
                 "dtype |O is not a plain", id="object-dtype"),
])
def test_an_array_header_beyond_what_the_file_holds_is_refused_before_reading(tmp_path, header, data, expected):
    """A header claiming a huge shape ended in a MemoryError traceback that named no file (exit 1);
    now the scene error names the file and the array, and nothing is allocated for it."""
    path = _arrays_case(tmp_path, "scene_meshes.npz", "body1_vertices",
                        _npz_with_header({"body1_vertices": (header, data)}))
    with pytest.raises(SceneError, match=re.escape(f"{tmp_path / 'scene_meshes.npz'}: cannot read the scene's arrays "
                                                   f"file: array 'body1_vertices': {expected}")):
        load_scene(path)
    result = subprocess.run([sys.executable, "-m", "solver", "run", str(path), "--out", str(tmp_path / "r.npz")],
                            cwd=REPO, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert "scene_meshes.npz: cannot read the scene's arrays file: array 'body1_vertices'" in result.stderr


def test_the_arrays_beyond_the_size_limit_are_refused(tmp_path, monkeypatch):
    """The arrays a scene reads from its arrays file are bounded in all (MAX_ARRAYS_BYTES)."""
    from solver import scene_io

    path = _arrays_case(tmp_path, "scene_meshes.npz", "body1_vertices", {"body1_vertices": _slider_vertices()})
    monkeypatch.setattr(scene_io, "MAX_ARRAYS_BYTES", 8 * 24 - 1)
    with pytest.raises(SceneError, match="192 bytes, beyond the limit of 191 bytes"):
        load_scene(path)
    monkeypatch.setattr(scene_io, "MAX_ARRAYS_BYTES", 8 * 24)
    load_scene(path)


def test_an_arrays_file_that_is_a_fifo_is_refused_not_waited_on(tmp_path):
    """A FIFO in the arrays file's place made the run wait forever; it is refused, named."""
    path = _arrays_case(tmp_path, "scene_meshes.npz", "body1_vertices", None)
    os.mkfifo(tmp_path / "scene_meshes.npz")
    result = subprocess.run([sys.executable, "-m", "solver", "run", str(path), "--out", str(tmp_path / "r.npz")],
                            cwd=REPO, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert f"{tmp_path / 'scene_meshes.npz'}: cannot read the scene's arrays file: not a regular file (a FIFO)" \
        in result.stderr


def test_round_trip_of_per_frame_series(tmp_path):
    frame_count = 4
    frames = frame_count + 1
    aims = [scenes.pose((0.1 * f, 0.0, 0.5), (0, 0, 1), 0.2 * f) for f in range(frames)]
    document = prismatic(
        frame_count=frame_count,
        driving={"strength_ratio": [1.0, 2.0, 3.0, 4.0, 5.0], "is_constrained": [0, 1, 1, 1, 0],
                 "is_passive": [1, 0, 0, 0, 0], "aim_distance": [0.0, 0.1, 0.2, 0.3, 0.4]},
        limit={"lower": [-1.0, -0.9, -0.8, -0.7, -0.6], "upper": 1.0, "strength": [1, 2, 3, 4, 5]},
        slider_fields={"soft_transform": {"strength_ratio": [[f, 2 * f] for f in range(frames)],
                                          "aim_transform": aims, "is_constrained": [True, False, True, True, True]}},
    )
    scene = scene_from_dict(document)
    rail = scene.joints[0]
    np.testing.assert_array_equal(rail.driving.is_passive, [1, 0, 0, 0, 0])
    np.testing.assert_array_equal(rail.limit.upper, np.ones(frames))
    soft = scene.bodies[1].soft_transform
    np.testing.assert_allclose(soft.aim_transform, np.array(aims))
    np.testing.assert_array_equal(soft.strength_ratio[:, 1], 2 * np.arange(frames))
    np.testing.assert_array_equal(soft.is_constrained, [1, 0, 1, 1, 1])
    path = tmp_path / "series.json"
    save_scene(scene, path)
    assert_scenes_equal(scene, load_scene(path))
    written = json.loads(path.read_text())
    assert written["joints"][0]["limit"]["upper"] == 1.0  # constant series are written once
    assert written["joints"][0]["driving"]["is_constrained"] == [0, 1, 1, 1, 0]


def test_soft_transform_aim_defaults_to_initial_transform():
    document = prismatic(frame_count=2, slider_fields={"soft_transform": {}})
    slider = scene_from_dict(document).bodies[1]
    assert slider.soft_transform.aim_transform.shape == (3, 4, 4)
    np.testing.assert_array_equal(slider.soft_transform.aim_transform[2], slider.transform)
    np.testing.assert_array_equal(slider.soft_transform.strength_ratio, [[100.0, 100.0]] * 3)


def test_settings_defaults_and_optional_keys():
    document = prismatic()
    del document["settings"]
    del document["joints"]
    scene = scene_from_dict(document)
    defaults = Settings()
    assert scene.settings.frame_rate == defaults.frame_rate and scene.settings.max_iterations == defaults.max_iterations
    assert scene.joints == []
    document = prismatic(max_iterations=20, min_iterations=2, velocity_tol=0.01, transrate_tol=0.05,
                         line_search_max_iterations=4, frame_rate=30, substeps=5.0)
    s = scene_from_dict(document).settings
    assert (s.max_iterations, s.min_iterations, s.velocity_tol, s.transrate_tol, s.line_search_max_iterations) == (
        20, 2, 0.01, 0.05, 4)
    assert s.frame_rate == 30.0 and isinstance(s.frame_rate, float)
    assert s.substeps == 5 and isinstance(s.substeps, int)
    assert s.dt == pytest.approx(1.0 / 150.0)


def test_revolute_joint_and_both_bodies_non_dynamic_are_allowed():
    document = pendulum()
    body(document, "arm")["motion"] = "fixed"
    scene = scene_from_dict(document)
    assert scene.joints[0].type == "revolute" and scene.joints[0].limit.lower.shape == (49,)


def test_closed_mesh_with_a_zero_area_triangle_is_allowed():
    # Split box edge (2, 1) at its midpoint 8: triangle [0, 2, 1] becomes [2, 8, 0] + [8, 1, 0] and
    # the zero-area triangle [1, 8, 2] closes the mesh.
    mesh = scenes.box_mesh(1.0)
    mesh["vertices"].append([(a + b) / 2 for a, b in zip(mesh["vertices"][2], mesh["vertices"][1])])
    mesh["triangles"][0:1] = [[2, 8, 0], [8, 1, 0], [1, 8, 2]]
    document = prismatic()
    body(document, "slider")["mesh"] = mesh
    slider = scene_from_dict(document).bodies[1]
    assert slider.mesh.triangles.shape == (14, 3)


@pytest.mark.parametrize("change, closed, turned", [
    (lambda d: body(d, "slider")["mesh"]["triangles"].pop(), False, False),
    (_flip_one, False, False),
    (_flip_all, True, True),
], ids=["open", "inconsistent-orientation", "inside-out"])
def test_open_and_inside_out_meshes_load(change, closed, turned):
    """A mesh with a hole or an inconsistent winding loads as an open surface (its mass from its
    convex hull); one wound inside out is turned the right way, with a note."""
    from solver.body_validation import mass_source
    from solver.scene_validation import scene_notes

    document = prismatic()
    change(document)
    scene = scene_from_dict(document)
    slider = next(b for b in scene.bodies if b.name == "slider")
    assert mass_source(slider.mesh) == ("mesh" if closed else "convex hull")
    notes = scene_notes(scene)
    assert len(notes) == int(turned)
    if turned:
        assert notes[0].startswith("body 'slider': mesh is wound inside out (signed volume -0.064 m^3 < 0")


def test_cavities_are_allowed_and_an_inside_out_part_in_a_hollow_is_refused():
    """A hollow cube (an inward 0.5 m shell inside a 1 m one) weighs its walls; an island in the
    hollow may have a cavity of its own; an inward shell in the hollow itself is inside out."""
    from solver.model import body_mass

    outer = scenes.box_mesh(1.0)
    hollow = _with_part(outer, scenes.box_mesh(0.5), inside_out=True)
    island = _with_part(hollow, scenes.box_mesh(0.2, center=(0.1, 0.0, 0.0)), inside_out=False)
    nested = _with_part(island, scenes.box_mesh(0.1, center=(0.1, 0.0, 0.0)), inside_out=True)
    for mesh, volume in ((hollow, 1.0 - 0.125), (nested, 1.0 - 0.125 + 0.008 - 0.001)):
        document = prismatic()
        body(document, "slider")["mesh"] = mesh
        slider = scene_from_dict(document).bodies[1]
        assert body_mass(slider).mass == pytest.approx(1000.0 * volume)
    stray = _with_part(hollow, scenes.box_mesh(0.1, center=(0.1, 0.1, 0.1)), inside_out=True)
    document = prismatic()
    body(document, "slider")["mesh"] = stray
    with pytest.raises(SceneError,
                       match="body 'slider': mesh: has an inside-out part: the 12 triangles connected to triangle 24 "):
        scene_from_dict(document)


def _hollow_box(cavities: int) -> Mesh:
    """A 2 m box holding ``cavities`` inward box shells on a grid, apart from each other."""
    side = math.ceil(cavities ** (1.0 / 3.0))
    pitch = 1.8 / side
    outer = scenes.box_mesh(2.0)
    vertices, triangles = [np.array(outer["vertices"], dtype=float)], [np.array(outer["triangles"])]
    for k in range(cavities):
        center = (np.array([k % side, (k // side) % side, k // side**2]) + 0.5) * pitch - 0.9
        cavity = scenes.box_mesh(0.5 * pitch, center=tuple(center))
        vertices.append(np.array(cavity["vertices"], dtype=float))
        triangles.append(np.array(cavity["triangles"])[:, ::-1] + 8 * (k + 1))
    return Mesh(vertices=np.concatenate(vertices), triangles=np.concatenate(triangles))


def test_many_cavities_are_checked_near_linearly_and_once_per_run(tmp_path, monkeypatch):
    """Each inward part got a winding number over every other triangle (2000 cavities: 13 s), and
    a run checked its meshes three times (loading, digest, simulation). The winding number is now
    summed over the parts whose bounding box holds the point only (here the outer box's 12
    triangles per cavity), and a mesh validated once is not checked again."""
    from solver import body_validation, mesh_checks

    counted = []
    solid_angles = mesh_checks._solid_angles
    monkeypatch.setattr(mesh_checks, "_solid_angles",
                        lambda points, corners: counted.append(len(corners)) or solid_angles(points, corners))
    checks = []
    inside_out = body_validation.mesh_inside_out_problem
    monkeypatch.setattr(body_validation, "mesh_inside_out_problem",
                        lambda *arguments: checks.append(1) or inside_out(*arguments))
    cavities = 300
    scene = Scene(settings=Settings(frame_count=1), joints=[], bodies=[Body(name="hollow", mesh=_hollow_box(cavities))])
    save_scene(scene, tmp_path / "hollow.json")
    checks.clear()
    counted.clear()
    loaded = load_scene(tmp_path / "hollow.json")
    scene_digest(loaded)
    validate_scene(loaded)  # as the simulation does
    assert len(checks) == 1 and sum(counted) == 12 * cavities
    # A stray inward shell outside the box is named, among the cavities.
    mesh = _hollow_box(cavities)
    stray = scenes.box_mesh(0.1, center=(3.0, 0.0, 0.0))
    mesh = Mesh(vertices=np.concatenate([mesh.vertices, stray["vertices"]]),
                triangles=np.concatenate([mesh.triangles, np.array(stray["triangles"])[:, ::-1] + len(mesh.vertices)]))
    with pytest.raises(SceneError, match=f"the 12 triangles connected to triangle {12 * (cavities + 1)} face inwards"):
        validate_scene(Scene(settings=Settings(frame_count=1), joints=[], bodies=[Body(name="hollow", mesh=mesh)]))


@pytest.mark.parametrize("limit, value, expected", [
    ("MAX_WINDING_TRIANGLES", 12 * 50 - 1, "would sum 600 solid angles (their points lie in the bounding boxes of many "
                                            "parts), more than the 599 a mesh may ask for"),
    ("MAX_PART_PAIRS", 10, "pairs of a part and another part's bounding box, more than the 10 a mesh may ask for"),
])
def test_the_cavity_check_is_bounded(monkeypatch, limit, value, expected):
    from solver import mesh_checks

    monkeypatch.setattr(mesh_checks, limit, value)
    hollow = Body(name="hollow", mesh=_hollow_box(50))
    with pytest.raises(SceneError, match=re.escape("body 'hollow': mesh: has 50 inward-facing parts")) as caught:
        validate_scene(Scene(settings=Settings(frame_count=1), joints=[], bodies=[hollow]))
    assert expected in str(caught.value)


def test_size_limits_are_inclusive_and_checked_before_the_bodies(monkeypatch):
    from solver import scene_validation, settings_validation

    frame_count = 1_000_000
    box = scenes.box_mesh(0.1)
    bodies = [Body(f"box{k}", Mesh(box["vertices"], box["triangles"]),
                   transform=np.array(scenes.translation((k, 0, 0))))
              for k in range(63)]
    assert settings_validation.MAX_TIME_STEPS == 100 * frame_count
    validate_scene(Scene(Settings(frame_count=frame_count, substeps=100), bodies[:1]))
    # 62 bodies over 1_000_001 frames hold 992_000_992 values, within the limit; 63 do not.
    assert 62 * 16 * (frame_count + 1) <= scene_validation.MAX_TRAJECTORY_VALUES < 63 * 16 * (frame_count + 1)
    validate_scene(Scene(Settings(frame_count=frame_count, substeps=1), bodies[:62]))
    # Refused before any body is validated (which broadcasts per-frame series: soft transform aims
    # of 16 values per frame, animated transforms).
    monkeypatch.setattr(scene_validation, "validate_body", lambda *args: pytest.fail("a body was validated"))
    with pytest.raises(SceneError, match="the trajectory of 63 bodies and 0 joints"):
        validate_scene(Scene(Settings(frame_count=frame_count, substeps=1), bodies))


def test_mass_override_and_animated_body():
    document = prismatic(frame_count=2)
    _mass(document, mass=2.0, center=(0.0, 0.1, 0.0), inertia=((0.2, 0.01, 0), (0.01, 0.3, 0), (0, 0, 0.25)))
    base = body(document, "base")
    base["motion"] = "animated"
    base["animated_transforms"] = [scenes.translation((0.1 * f, 0, 0)) for f in range(3)]
    del base["transform"]  # an animated body's transform defaults to its frame 0
    scene = scene_from_dict(document)
    assert scene.bodies[1].mass.mass == 2.0 and scene.bodies[1].mass.inertia.shape == (3, 3)
    assert scene.bodies[0].animated_transforms.shape == (3, 4, 4)
    np.testing.assert_array_equal(scene.bodies[0].transform, np.eye(4))


def test_null_optional_objects():
    document = prismatic()
    body(document, "slider")["soft_transform"] = None
    body(document, "slider")["mass"] = None
    joint(document, "rail")["limit"] = None
    joint(document, "rail")["driving"] = None
    scene = scene_from_dict(document)
    assert scene.bodies[1].soft_transform is None and scene.joints[0].limit is None and scene.joints[0].driving is None


# ---------------------------------------------------------------------------------------------
# validate_scene on dataclasses built directly (the Blender add-on's path)
# ---------------------------------------------------------------------------------------------

def dataclass_scene(**settings) -> Scene:
    mesh = scenes.box_mesh(0.5)
    return Scene(
        settings=Settings(frame_count=np.int64(3), substeps=np.int32(2), frame_rate=np.float32(24.0), **settings),
        bodies=[
            Body("base",
                 Mesh(np.array(mesh["vertices"], dtype=np.float32), np.array(mesh["triangles"], dtype=np.int32)),
                 motion="fixed"),
            Body("slider", Mesh(mesh["vertices"], mesh["triangles"]), transform=np.array(scenes.translation((1, 0, 0))),
                 soft_transform=SoftTransform(strength_ratio=(50, 50), is_constrained=True)),
        ],
        joints=[Joint("rail", "prismatic", "base", "slider", (1, 0, 0), np.array([2.0, 0, 0]),
                      limit=Limit(lower=-1, upper=[1, 1, 1, 2]), driving=Driving(aim_distance=0.5, is_passive=False))],
    )


def test_validate_scene_returns_new_normalised_scene():
    scene = dataclass_scene()
    before = copy.deepcopy(scene)
    checked = validate_scene(scene)
    assert checked is not scene
    # The input is untouched.
    assert scene.settings.frame_count == before.settings.frame_count and type(scene.settings.frame_count) is np.int64
    assert scene.bodies[1].soft_transform.aim_transform is None
    assert scene.joints[0].limit.lower == -1
    assert scene.bodies[0].mesh.vertices.dtype == np.float32
    # The output is normalised.
    assert type(checked.settings.frame_count) is int and type(checked.settings.frame_rate) is float
    assert checked.bodies[0].mesh.vertices.dtype == np.float64 and checked.bodies[0].mesh.triangles.dtype == np.int64
    assert checked.bodies[1].soft_transform.is_constrained.tolist() == [1.0] * 4
    assert checked.joints[0].limit.upper.tolist() == [1.0, 1.0, 1.0, 2.0]
    assert checked.joints[0].driving.is_passive.tolist() == [0.0] * 4
    # Validation is idempotent, and never shares writable arrays with its input: a mesh it
    # returned is read-only, and validating it again (a run's digest, its simulation) keeps it.
    again = validate_scene(checked)
    assert_scenes_equal(checked, again)
    assert not np.shares_memory(checked.bodies[0].mesh.vertices, scene.bodies[0].mesh.vertices)
    assert again.bodies[1].mesh is checked.bodies[1].mesh and not checked.bodies[1].mesh.vertices.flags.writeable
    assert not np.shares_memory(again.joints[0].limit.upper, checked.joints[0].limit.upper)


@pytest.mark.parametrize("change, expected", [
    pytest.param(lambda s: setattr(s.bodies[1], "mass_density", "1000"), ["slider", "mass_density"],
                 id="string-number"),
    pytest.param(lambda s: setattr(s.bodies[1], "kappa", None), ["slider", "kappa"], id="none-number"),
    pytest.param(lambda s: setattr(s.bodies[1], "mesh", {"vertices": [], "triangles": []}), ["slider", "mesh"],
                 id="dict-mesh"),
    pytest.param(lambda s: setattr(s.bodies[1].mesh, "triangles", [["a", "b", "c"]]), ["slider", "mesh.triangles"],
                 id="string-indices"),
    pytest.param(lambda s: setattr(s.bodies[1], "name", 3), ["body #1", "name"], id="non-string-name"),
    pytest.param(lambda s: setattr(s.bodies[1], "soft_transform", (1, 1)), ["slider", "soft_transform"],
                 id="tuple-soft"),
    pytest.param(lambda s: setattr(s.joints[0], "limit", {"lower": 0}), ["rail", "limit"], id="dict-limit"),
    pytest.param(lambda s: setattr(s.joints[0], "l_body", None), ["rail", "l_body"], id="none-body-name"),
    pytest.param(lambda s: setattr(s.joints[0].driving, "aim_distance", "far"), ["rail", "driving.aim_distance"],
                 id="string-series"),
    pytest.param(lambda s: setattr(s.joints[0].driving, "aim_distance", [1, "x", 2, 3]),
                 ["rail", "driving.aim_distance"], id="mixed-series"),
    pytest.param(lambda s: setattr(s.joints[0].driving, "aim_distance", 1 + 2j), ["rail", "driving.aim_distance"],
                 id="complex"),
    pytest.param(lambda s: setattr(s.settings, "gravity", "down"), ["settings", "gravity"], id="string-gravity"),
    pytest.param(lambda s: setattr(s.settings, "frame_count", 10**7), ["settings", "frame_count", "<="],
                 id="huge-frame-count"),
    pytest.param(lambda s: setattr(s, "settings", None), ["settings"], id="no-settings"),
    pytest.param(lambda s: s.bodies.append("box"), ["body #2"], id="not-a-body"),
    pytest.param(lambda s: s.joints.append(None), ["joint #1"], id="not-a-joint"),
    pytest.param(lambda s: setattr(s, "joints", None), ["joints"], id="joints-none"),
    pytest.param(lambda s: setattr(s.bodies[1], "transform", np.diag([1.0, 1.0, 1.0 + 1e-3, 1.0])),
                 ["slider", "transform", "bake"], id="scaled"),
    pytest.param(lambda s: setattr(s.bodies[1].mesh, "vertices", np.array(s.bodies[1].mesh.vertices) * 1e200),
                 ["slider", "mesh"], id="overflow"),
])
def test_validate_scene_checks_types(change, expected):
    scene = dataclass_scene()
    change(scene)
    with pytest.raises(SceneError) as caught:
        validate_scene(scene)
    for part in expected:
        assert part in str(caught.value), str(caught.value)


def test_validate_scene_refuses_non_scene():
    with pytest.raises(SceneError):
        validate_scene({"bodies": []})
    with pytest.raises(SceneError):
        scene_to_dict("scene")
    with pytest.raises(SceneError):
        scene_from_dict(None)


def test_nearly_rigid_float32_transform_is_accepted():
    angle = 0.7
    rotation = np.array(scenes.pose((1, 2, 3), (1, 1, 0), angle), dtype=np.float32)
    scene = dataclass_scene()
    scene.bodies[1].transform = rotation
    checked = validate_scene(scene)
    np.testing.assert_array_equal(checked.bodies[1].transform[3], [0, 0, 0, 1])


# ---------------------------------------------------------------------------------------------
# The CLI with a stand-in solver (in-process) and, when it exists, the real one
# ---------------------------------------------------------------------------------------------

class _FakeSolverError(RuntimeError):
    pass


def _fake_trajectory(scene: Scene, converged: np.ndarray) -> Trajectory:
    frames = scene.settings.frame_count + 1
    steps = scene.settings.frame_count * scene.settings.substeps
    return Trajectory(
        transforms=np.broadcast_to(np.eye(4), (frames, len(scene.bodies), 4, 4)).copy(),
        body_names=np.array([b.name for b in scene.bodies]),
        joint_names=np.array([j.name for j in scene.joints]),
        distance=np.zeros((frames, len(scene.joints))),
        angle=np.full((frames, len(scene.joints)), np.nan),
        newton_iterations=np.ones(steps, dtype=np.int64),
        line_search_iterations=np.zeros(steps, dtype=np.int64),
        converged=converged,
        fast_rotation=np.zeros(steps, dtype=bool),
        residual=np.where(converged, 0.25, 3.5),
        frame_rate=scene.settings.frame_rate,
        substeps=scene.settings.substeps,
    )


def _fake_simulation(monkeypatch, behaviour: str):
    module = types.ModuleType("solver.simulation")
    module.SolverError = _FakeSolverError

    def simulate(scene, progress=None):
        steps = scene.settings.frame_count * scene.settings.substeps
        converged = np.ones(steps, dtype=bool)
        if behaviour == "not-converged":
            converged[7] = False
            converged[9] = False
        if behaviour == "error":
            raise _FakeSolverError("the Newton solve broke down")
        if behaviour == "out-of-memory":
            raise MemoryError()
        for frame in range(1, scene.settings.frame_count + 1):
            if progress is not None:
                progress(frame, scene.settings.frame_count)
        return _fake_trajectory(scene, converged)

    module.simulate = simulate
    monkeypatch.setitem(sys.modules, "solver.simulation", module)


@pytest.fixture
def cli():
    import solver.__main__ as cli_module

    return cli_module


def test_trajectory_round_trips_and_files_from_before_its_newer_fields_still_load(tmp_path):
    scene = validate_scene(scene_from_dict(prismatic(frame_count=3, substeps=4)))
    trajectory = _fake_trajectory(scene, np.ones(12, dtype=bool))
    trajectory.fast_rotation[5] = True
    trajectory.residual[3] = 0.75
    trajectory.scene_digest = scene_digest(scene)
    trajectory.save(tmp_path / "new.npz")
    loaded = Trajectory.load(tmp_path / "new.npz")
    assert np.array_equal(loaded.fast_rotation, trajectory.fast_rotation) and loaded.substeps == 4
    np.testing.assert_array_equal(loaded.residual, trajectory.residual)
    assert loaded.scene_digest == trajectory.scene_digest and isinstance(loaded.scene_digest, str)
    assert loaded.fast_rotation_warning().startswith("in 1 of 12 time steps")
    with np.load(tmp_path / "new.npz") as data:
        np.savez(tmp_path / "old.npz", **{key: data[key] for key in data.files
                                          if key not in ("fast_rotation", "residual", "scene_digest", "rotation")})
    old = Trajectory.load(tmp_path / "old.npz")
    assert old.fast_rotation.shape == (12,) and not old.fast_rotation.any()
    assert old.rotation.shape == (4, len(scene.joints), 3) and np.isnan(old.rotation).all()
    assert old.residual.shape == (12,) and np.isnan(old.residual).all() and old.scene_digest == ""


def test_cli_success_with_stand_in_solver(tmp_path, monkeypatch, capsys, cli):
    _fake_simulation(monkeypatch, "ok")
    scene_path = _write(tmp_path, prismatic(frame_count=3, substeps=4))
    out = tmp_path / "result.npz"
    assert cli.main(["run", str(scene_path), "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "frame 1/3" in err and "frame 3/3" in err
    assert Trajectory.load(out).frame_count == 3
    assert cli.main(["run", str(scene_path), "--out", str(out), "--quiet"]) == 0
    assert capsys.readouterr().err == ""


def test_cli_not_converged_saves_and_exits_1(tmp_path, monkeypatch, capsys, cli):
    _fake_simulation(monkeypatch, "not-converged")
    scene_path = _write(tmp_path, prismatic(frame_count=3, substeps=4))
    out = tmp_path / "result.npz"
    assert cli.main(["run", str(scene_path), "--out", str(out), "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "time step 7 (frame 2, substep 4 of 4)" in err and "its last Newton step was 3.5 times the tolerance" in err
    assert out.exists()


def test_cli_solver_error_exits_1(tmp_path, monkeypatch, capsys, cli):
    _fake_simulation(monkeypatch, "error")
    scene_path = _write(tmp_path, prismatic(frame_count=3, substeps=4))
    out = tmp_path / "result.npz"
    assert cli.main(["run", str(scene_path), "--out", str(out)]) == 1
    assert "error: solver failed: the Newton solve broke down" in capsys.readouterr().err
    assert not out.exists()


def test_cli_bad_out_directory_and_usage(tmp_path, capsys, cli):
    scene_path = _write(tmp_path, prismatic())
    assert cli.main(["run", str(scene_path), "--out", str(tmp_path / "no" / "such" / "dir.npz")]) == 2
    assert "--out" in capsys.readouterr().err
    with pytest.raises(SystemExit) as caught:
        cli.main([])
    assert caught.value.code == 2
    with pytest.raises(SystemExit) as caught:
        cli.main(["frobnicate"])
    assert caught.value.code == 2


def test_cli_out_directory_gets_the_scene_stem(tmp_path, monkeypatch, capsys, cli):
    _fake_simulation(monkeypatch, "ok")
    scene_path = _write(tmp_path, prismatic(frame_count=3, substeps=4))  # scene.json
    results = tmp_path / "results"
    results.mkdir()
    for out in (str(results), str(results) + "/"):
        assert cli.main(["run", str(scene_path), "--out", out, "--quiet"]) == 0
        assert [p.name for p in results.iterdir()] == ["scene.npz"]
        assert Trajectory.load(results / "scene.npz").frame_count == 3
    with pytest.raises(SystemExit):
        cli.main(["run", "--help"])
    assert "<scene stem>.npz" in capsys.readouterr().out


@pytest.mark.parametrize("case", ["out-names-a-directory", "default-names-a-directory", "read-only-directory"])
def test_cli_unwritable_out_is_refused_before_simulating(tmp_path, monkeypatch, capsys, cli, case):
    _fake_simulation(monkeypatch, "error")  # exit status 1 if it were reached
    scene_path = _write(tmp_path, prismatic(frame_count=3, substeps=4))
    if case == "out-names-a-directory":
        (tmp_path / "x.npz").mkdir()  # --out x means x.npz, as numpy appends the suffix
        argv, expected = ["--out", str(tmp_path / "x")], f"error: --out: '{tmp_path / 'x.npz'}' is a directory"
    elif case == "default-names-a-directory":
        (tmp_path / "scene.npz").mkdir()
        argv = []
        expected = (f"error: the trajectory file beside the scene file (choose another with --out): "
                    f"'{tmp_path / 'scene.npz'}' is a directory")
    else:  # os.access stands in for a directory without write permission (root may write anywhere)
        locked = tmp_path / "locked"
        locked.mkdir()
        from solver import output_files

        monkeypatch.setattr(output_files.os, "access", lambda path, mode: Path(path) != locked)
        argv, expected = ["--out", str(locked)], f"error: --out: cannot create files in directory '{locked}'"
    assert cli.main(["run", str(scene_path), *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(expected), err
    assert "frame 1/3" not in err  # nothing was simulated


def test_cli_out_of_memory_is_an_error_line_not_a_traceback(tmp_path, monkeypatch, capsys, cli):
    _fake_simulation(monkeypatch, "out-of-memory")
    scene_path = _write(tmp_path, prismatic(frame_count=3, substeps=4))
    assert cli.main(["run", str(scene_path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: out of memory") and "Traceback" not in err
    assert not (tmp_path / "scene.npz").exists()


def test_cli_refuses_to_write_its_trajectory_over_an_input(tmp_path, monkeypatch, capsys, cli):
    """The default output <scene stem>.npz may be the scene's own arrays file, and --out may name
    it or the scene file: the run is refused before simulating, and the input stays readable."""
    _fake_simulation(monkeypatch, "error")  # exit status 1 if it were reached
    vertices = np.array(body(prismatic(), "slider")["mesh"]["vertices"], dtype=float)
    scene_path = _arrays_case(tmp_path, "scene.npz", "body1_vertices", {})
    np.savez(tmp_path / "scene.npz", body1_vertices=vertices)
    arrays_before = (tmp_path / "scene.npz").read_bytes()
    load_scene(scene_path)  # a valid scene
    for argv in ([], ["--out", str(tmp_path / "scene.npz")], ["--out", str(tmp_path / "scene")],
                 ["--out", str(tmp_path)]):
        assert cli.main(["run", str(scene_path), *argv]) == 2
        err = capsys.readouterr().err
        assert "is an input of the run (the scene file or its arrays file)" in err, err
        assert (tmp_path / "scene.npz").read_bytes() == arrays_before
    npz_scene = tmp_path / "npz_scene.npz"  # a scene file that itself has the .npz suffix
    npz_scene.write_text(json.dumps(prismatic()), encoding="utf-8")
    assert cli.main(["run", str(npz_scene)]) == 2
    assert "is an input of the run" in capsys.readouterr().err
    assert json.loads(npz_scene.read_text(encoding="utf-8"))["format"] == "abd-scene"


def test_cli_names_a_missing_scene_and_an_empty_out(tmp_path, capsys, cli):
    """A scene in a missing folder is named as the scene (not as an output problem of that
    folder); an empty --out is refused rather than taken as no --out."""
    assert cli.main(["run", str(tmp_path / "no" / "scene.json")]) == 2
    assert capsys.readouterr().err.startswith(f"error: {tmp_path / 'no' / 'scene.json'}: cannot read the scene file")
    assert cli.main(["run", str(tmp_path)]) == 2
    assert "a directory, not a scene file" in capsys.readouterr().err
    scene_path = _write(tmp_path, prismatic())
    assert cli.main(["run", str(scene_path), "--out", ""]) == 2
    assert capsys.readouterr().err.startswith("error: --out: an empty path")


def test_cli_write_failure_keeps_the_earlier_trajectory(tmp_path, monkeypatch, capsys, cli):
    """A trajectory write that fails part-way (a full disk) leaves the file already at --out as
    it was, and no partial or temporary file."""
    _fake_simulation(monkeypatch, "ok")
    scene_path = _write(tmp_path, prismatic(frame_count=3, substeps=4))
    out = tmp_path / "result.npz"
    assert cli.main(["run", str(scene_path), "--out", str(out), "--quiet"]) == 0
    before = out.read_bytes()

    def failing_save(self, stream):
        stream.write(b"PK\x03\x04 the first bytes")
        raise OSError(28, "No space left on device")

    link = tmp_path / "link.npz"  # written through: the link stays, its target is replaced
    link.symlink_to(out)
    assert cli.main(["run", str(scene_path), "--out", str(link), "--quiet"]) == 0
    assert link.is_symlink() and Trajectory.load(out).frame_count == 3
    link.unlink()
    before = out.read_bytes()

    monkeypatch.setattr(Trajectory, "save", failing_save)
    assert cli.main(["run", str(scene_path), "--out", str(out), "--quiet"]) == 1
    assert "No space left on device" in capsys.readouterr().err
    assert out.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["result.npz", "scene.json"]


def test_save_scene_writes_whole_files_or_none(tmp_path, monkeypatch):
    """Re-saving a scene whose JSON write fails leaves the old scene file and its arrays file as
    they were (not a truncated document, not new arrays beside the old one) and no temporary
    file; a directory in the way writes nothing."""
    from solver import scene_io

    monkeypatch.setattr(scene_io, "INLINE_VERTEX_LIMIT", 4)  # the slider's mesh goes to the arrays file
    scene = validate_scene(scene_from_dict(prismatic()))
    path = tmp_path / "rig.json"
    assert save_scene(scene, path) == tmp_path / "rig_meshes.npz"
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    changed = validate_scene(scene_from_dict(prismatic(frame_count=5)))
    real_write_aside = scene_io.write_aside

    def write_aside(destination, write):
        if Path(destination).suffix == ".json":
            def partly(stream):
                stream.write(b'{"format": "abd-sc')
                raise OSError(27, "File too large")
            return real_write_aside(destination, partly)
        return real_write_aside(destination, write)

    monkeypatch.setattr(scene_io, "write_aside", write_aside)
    with pytest.raises(OSError, match="File too large"):
        save_scene(changed, path)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
    assert load_scene(path).settings.frame_count == 48
    monkeypatch.setattr(scene_io, "write_aside", real_write_aside)
    (tmp_path / "folder.json").mkdir()
    with pytest.raises(IsADirectoryError):
        save_scene(scene, tmp_path / "folder.json")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["folder.json", "rig.json", "rig_meshes.npz"]


def test_cli_runs_a_scene(tmp_path):
    scene_path = _write(tmp_path, prismatic(frame_count=2, substeps=2))
    out = tmp_path / "result.npz"
    result = subprocess.run(
        [sys.executable, "-m", "solver", "run", str(scene_path), "--out", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )
    assert result.returncode in (0, 1), result.stderr
    assert "frame 2/2" in result.stderr
    trajectory = Trajectory.load(out)
    assert trajectory.transforms.shape == (3, 2, 4, 4)
    assert trajectory.scene_digest == scene_digest(load_scene(scene_path))  # what Blender checks before applying it


def test_documented_example_loads():
    text = (REPO / "docs" / "scene_format.md").read_text(encoding="utf-8")
    example = text.split("## Example", 1)[1].split("```json", 1)[1].split("```", 1)[0]
    scene = scene_from_dict(json.loads(example))
    rail = scene.joints[0]
    np.testing.assert_array_equal(rail.driving.aim_distance, [0.0, 0.1, 0.2, 0.3, 0.3])
    assert scene.bodies[1].mass.mass == 64.0


def test_names_that_look_like_number_lists_survive_the_file(tmp_path, monkeypatch):
    """Body and joint names and the scene file's own name are strings: putting each innermost
    number list on one line must not touch them. "part[ 1 ]" came back as "part[1]" (so a
    trajectory computed from the saved scene no longer matched the rig), and a scene saved as
    "shot[ 1 ].json" named its arrays file "shot[1]_meshes.npz", which did not exist."""
    from solver import scene_io

    document = prismatic()
    names = {"base": "base[ 1 ]", "slider": "arm [ 2,  3 ]"}
    for body in document["bodies"]:
        body["name"] = names[body["name"]]
    for joint in document["joints"]:
        joint["name"] = "j[ 1 ]"
        joint["l_body"], joint["r_body"] = names[joint["l_body"]], names[joint["r_body"]]
    scene = load_scene(_write(tmp_path, document))
    monkeypatch.setattr(scene_io, "INLINE_VERTEX_LIMIT", 7)  # every box goes to the arrays file
    path = tmp_path / "shot[ 1 ].json"
    assert save_scene(scene, path) == tmp_path / "shot[ 1 ]_meshes.npz"
    loaded = load_scene(path)
    assert [body.name for body in loaded.bodies] == ["base[ 1 ]", "arm [ 2,  3 ]"]
    assert [joint.name for joint in loaded.joints] == ["j[ 1 ]"]
    assert scene_digest(loaded) == scene_digest(scene)


def test_a_trajectory_file_is_read_for_its_fields_only_and_within_limits(tmp_path):
    """Trajectory.load read every member of the archive (a damaged or huge unused one failed or
    filled the memory), allocated what a header claimed, and waited on a FIFO. It reads the
    fields only, checks each header first, and refuses what is not a regular file, naming it."""
    from solver.array_files import ArrayFileError

    scene = scene_from_dict(prismatic())
    trajectory = _fake_trajectory(scene, np.ones(scene.settings.frame_count * scene.settings.substeps, dtype=bool))
    path = tmp_path / "result.npz"
    trajectory.save(path)
    with zipfile.ZipFile(path, "a") as archive:
        archive.writestr("unused.npy", b"\x93NUMPY damaged")
    np.testing.assert_array_equal(Trajectory.load(path).transforms, trajectory.transforms)

    huge = tmp_path / "huge.npz"  # its transforms' header claims 128 TB
    npy = io.BytesIO()
    np.lib.format.write_array_header_1_0(npy, {"descr": "<f8", "fortran_order": False, "shape": (10**6, 10**6, 4, 4)})
    with zipfile.ZipFile(path) as source, zipfile.ZipFile(huge, "w") as archive:
        for info in source.infolist():
            archive.writestr(info.filename, npy.getvalue() + bytes(64) if info.filename == "transforms.npy"
                             else source.read(info))
    with pytest.raises(ArrayFileError, match=re.escape(f"{huge}: array 'transforms': its header claims")):
        Trajectory.load(huge)

    fifo = tmp_path / "fifo.npz"
    os.mkfifo(fifo)
    with pytest.raises(ArrayFileError, match=re.escape(f"{fifo}: not a regular file (a FIFO)")):
        Trajectory.load(fifo)


@pytest.mark.slow
def test_ctrl_c_while_the_scene_is_read_stops_the_run_with_130(tmp_path):
    """Ctrl+C outside the simulation loop (here while the scene's arrays file is open: read and
    validated) printed a traceback and exited with -2. It stops with exit status 130, a one-line
    message, and no trajectory file, whole or partial."""
    import signal
    import time

    import trimesh

    from solver.scene import Body, Mesh, Scene, Settings

    if not os.path.isdir("/proc/self/fd"):
        pytest.skip("needs /proc to see when the run has the arrays file open")
    ball = trimesh.creation.icosphere(subdivisions=7)  # 327 680 triangles: validated in about a second
    scene = Scene(settings=Settings(frame_count=2), joints=[],
                  bodies=[Body(name="ball", mesh=Mesh(vertices=ball.vertices, triangles=ball.faces))])
    arrays = save_scene(scene, tmp_path / "scene.json")
    out = tmp_path / "result.npz"
    process = subprocess.Popen([sys.executable, "-m", "solver", "run", str(tmp_path / "scene.json"), "--out", str(out)],
                               cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None and time.monotonic() < deadline, "the run never opened its arrays file"
            try:
                descriptors = f"/proc/{process.pid}/fd"
                opened = {os.path.realpath(f"{descriptors}/{fd}") for fd in os.listdir(descriptors)}
            except OSError:  # a descriptor closed while being read
                continue
            if str(arrays) in opened:
                break
            time.sleep(0.001)
        process.send_signal(signal.SIGINT)
        stderr = process.communicate(timeout=60)[1]
    finally:
        process.kill()
        process.wait()
    assert process.returncode == 130, stderr
    assert stderr.strip().endswith("error: interrupted") and "Traceback" not in stderr, stderr
    assert sorted(path.name for path in tmp_path.iterdir()) == ["scene.json", "scene_meshes.npz"]


# NumPy's compiled core: numpy.core before NumPy 2, numpy._core since.
NUMPY_CORE = "numpy._core.multiarray" if int(np.__version__.split(".")[0]) >= 2 else "numpy.core.multiarray"


@pytest.mark.slow
@pytest.mark.parametrize("module", [NUMPY_CORE, "numba.core.config", "scipy.sparse", "solver.simulation"])
def test_ctrl_c_while_the_solver_imports_stops_the_run_with_130(tmp_path, module):
    """Ctrl+C while ``python -m solver`` imported NumPy and Numba (the package did so at its own
    import, before the command's Ctrl+C handling) printed a traceback. The interrupt is sent as
    soon as the run has imported ``module`` (``-X importtime`` reports each import on stderr as
    it ends), inside its imports of NumPy, Numba, SciPy and the simulation: it stops with exit
    status 130, one line and no trajectory file, or, where the run ended first, it succeeded."""
    import signal

    document = scenes.revolute_pendulum_scene()
    document["settings"]["frame_count"] = 2
    (tmp_path / "scene.json").write_text(json.dumps(document))
    out = tmp_path / "result.npz"
    process = subprocess.Popen([sys.executable, "-X", "importtime", "-m", "solver", "run", str(tmp_path / "scene.json"),
                                "--out", str(out), "--quiet"],
                               cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stderr is not None
        lines = []
        for line in process.stderr:
            lines.append(line)
            if line.rsplit("|", 1)[-1].strip() == module:
                process.send_signal(signal.SIGINT)
                break
        else:
            pytest.fail(f"the run never imported {module}: {''.join(lines)[-2000:]}")
        stderr = "".join(lines) + process.communicate(timeout=120)[1]
    finally:
        process.kill()
        process.wait()
    assert "Traceback" not in stderr, stderr[-3000:]
    if process.returncode == 0:  # the run ended before the interrupt arrived
        assert out.is_file()
        return
    assert process.returncode == 130, stderr[-3000:]
    assert stderr.strip().endswith("error: interrupted"), stderr[-3000:]
    assert not out.exists()


@pytest.mark.parametrize("name, expected", [
    pytest.param("arm\0", r"body #1: name: must not contain control characters, got '\x00' in 'arm\x00'", id="nul"),
    pytest.param("\0", r"body #1: name: must not contain control characters, got '\x00'", id="only-nul"),
    pytest.param("two\nlines", r"body #1: name: must not contain control characters, got '\n'", id="line-break"),
    pytest.param("a" * 20_000_000, "body #1: name: 20000000 characters, more than the 1000 a name may have",
                 id="20-MB"),
])
def test_a_body_name_with_control_characters_or_too_long_is_refused(name, expected):
    r"""Names that differ by a NUL (``arm``, ``arm\0``) collapsed into one in the trajectory file's
    names, and a 20 MB name was quoted whole in an error line. Both are refused, in a short line."""
    document = prismatic()
    body(document, "slider")["name"] = name
    joint(document, "rail")["r_body"] = name
    with pytest.raises(SceneError) as caught:
        scene_from_dict(document)
    assert str(caught.value).startswith(expected) and len(str(caught.value)) < 200
    document = prismatic()
    joint(document, "rail")["r_body"] = "b" * 20_000_000  # a reference to no body: quoted in part
    with pytest.raises(SceneError, match="joint 'rail': r_body: no body named 'bbbb") as caught:
        scene_from_dict(document)
    assert len(str(caught.value)) < 200
    body(document, "slider")["name"] = "é" * 1000  # the longest name accepted
    joint(document, "rail")["r_body"] = "é" * 1000
    assert scene_from_dict(document).bodies[1].name == "é" * 1000


@pytest.mark.slow
def test_a_full_disk_fails_the_run_in_one_line_and_leaves_no_file(tmp_path):
    """A trajectory write that fails (a file-size limit, as a full disk) is reported in one line
    with exit status 1; NumPy's archive was left open and its ZipFile.__del__ then printed an
    ignored exception about the closed file."""
    import resource
    import signal

    path = _write(tmp_path, scenes.revolute_pendulum_scene(frame_count=200))
    command = [sys.executable, "-m", "solver", "run", str(path), "--quiet", "--out"]
    warm = subprocess.run(command + [str(tmp_path / "warm.npz")], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert warm.returncode == 0, warm.stderr  # the solver's cache is filled: the limit hits the trajectory only
    limit = (tmp_path / "warm.npz").stat().st_size // 2

    def limit_file_size():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    result = subprocess.run(command + [str(tmp_path / "result.npz")], cwd=REPO, capture_output=True, text=True,
                            timeout=600, preexec_fn=limit_file_size)
    assert result.returncode == 1
    assert result.stderr == f"error: cannot write {str(tmp_path / 'result.npz')!r}: [Errno 27] File too large\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scene.json", "warm.npz"]
