"""Property test: malformed scene documents are refused with SceneError or load, never crash.

Documents are random JSON values and mutations of valid scenes (missing and extra keys, wrong
types and shapes, NaN, infinities, huge and negative numbers, broken meshes). Every one must
either raise :class:`SceneError` from ``scene_from_dict`` or load; a loaded scene must survive a
``scene_to_dict`` round trip and, once ``solver.simulation`` exists, one frame of one substep of
``simulate`` must return or raise ``SolverError``.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import scenes
from solver.scene import Scene, SceneError
from solver.scene_io import scene_from_dict, scene_to_dict

HAS_SIMULATION = importlib.util.find_spec("solver.simulation") is not None

# ---------------------------------------------------------------------------------------------
# Valid starting points (small frame counts keep the per-frame series short)
# ---------------------------------------------------------------------------------------------


def _bases() -> list:
    frame_count = 2
    frames = frame_count + 1
    series = scenes.prismatic_scene(
        frame_count=frame_count, substeps=2,
        limit={"lower": [-0.5, -0.4, -0.3], "upper": 0.5, "strength": [1.0, 2.0, 3.0]},
        driving={"strength_ratio": [100.0, 50.0, 10.0], "is_constrained": [1, 1, 0], "is_passive": 0,
                 "aim_distance": [0.0, 0.1, 0.2]},
        slider_fields={"soft_transform": {
            "strength_ratio": [[10.0, 10.0], [20.0, 5.0], [0.0, 0.0]],
            "aim_transform": [scenes.pose((0.1 * f, 0.0, 0.5), (0, 0, 1), 0.1 * f) for f in range(frames)],
            "is_constrained": [1, 0, 1]}},
    )
    animated = scenes.prismatic_scene(
        frame_count=frame_count, substeps=1, base_motion="animated",
        base_fields={"animated_transforms": [scenes.translation((0.05 * f, 0.0, 0.0)) for f in range(frames)]},
        slider_fields={"mass": {"mass": 2.0, "mass_center": [0.0, 0.0, 0.01],
                                "inertia": [[0.1, 0.0, 0.0], [0.0, 0.1, 0.0], [0.0, 0.0, 0.1]]}},
    )
    return [
        scenes.every_feature_example(),
        series,
        animated,
        scenes.revolute_pendulum_scene(frame_count=frame_count, substeps=1, arm_pose_angle=0.3, init_angle=0.2,
                                       limit={"lower": -1.0, "upper": 1.0, "strength": 1.0}),
        scenes.prismatic_scene(frame_count=0, base_motion="dynamic", slider_size=(0.3, 0.2, 0.1)),
        scenes.scene([scenes.box_body("only", 0.5, linear_velocity=[1.0, 0.0, 0.0], angular_velocity=[0.0, 0.0, 3.0])],
                     frame_count=1),
    ]


BASES = _bases()

# ---------------------------------------------------------------------------------------------
# Strategies
# ---------------------------------------------------------------------------------------------

SPECIAL = [
    0, 0.0, -0.0, 1, -1, 2, 3, 4, 2.5, -2.5, 1e-300, 5e-324, 1e12, -1e12, 1e308, -1e308, 10**20, -(10**20), 10**400,
    math.nan, math.inf, -math.inf, True, False, None, "", "1", "abc", "dynamic", "revolute", "base", "slider",
    [], [0], [0, 0, 0], [math.nan] * 3, [1e308] * 3, [[0, 0, 0]] * 4, [[1, 0, 0, 0]] * 4, {}, {"x": 1},
]

scalars = (
    st.none() | st.booleans() | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=6) | st.sampled_from(SPECIAL).map(copy.deepcopy)
)
json_values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)
KEYS = st.sampled_from([
    "format", "version", "settings", "bodies", "joints", "name", "mesh", "vertices", "triangles", "transform",
    "mass", "mass_center", "inertia", "limit", "driving", "soft_transform", "strength_ratio", "strenght_ratio",
    "aim_transform", "is_constrained", "is_passive", "aim_distance", "lower", "upper", "strength", "frame_count",
    "extra", "init_angle", "init_distance", "animated_transforms", "motion",
]) | st.text(max_size=6)


def _paths(value, path=()):
    """Every (path) to a value inside nested dicts and lists, the root included."""
    yield path
    if isinstance(value, dict):
        for key, child in value.items():
            yield from _paths(child, path + (key,))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from _paths(child, path + (index,))


def _get(doc, path):
    for key in path:
        doc = doc[key]
    return doc


def _number_mutation(value, how: str):
    """``value`` mutated as ``how`` says; a Python int too large for a float (hypothesis draws
    those) becomes inf instead of raising OverflowError in the generator."""
    try:
        return _number_mutation_unchecked(value, how)
    except OverflowError:
        return float("inf")


def _number_mutation_unchecked(value, how: str):
    if how == "negate":
        return -value
    if how == "huge":
        return value * 1e300 if value else 1e300
    if how == "tiny":
        return value * 1e-300
    if how == "zero":
        return 0
    if how == "plus-half":
        return value + 0.5
    if how == "plus-one":
        return value + 1
    return value * 1.5 if isinstance(value, float) else value  # "perturb": usually still valid


@st.composite
def mutated_scenes(draw):
    doc = copy.deepcopy(draw(st.sampled_from(BASES)))
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        paths = list(_paths(doc))
        path = draw(st.sampled_from(paths))
        target = _get(doc, path)
        parent = _get(doc, path[:-1]) if path else None
        action = draw(st.sampled_from([
            "replace", "replace-special", "delete", "add-key", "duplicate", "number", "number", "number", "wrap",
            "unwrap", "reverse",
        ]))
        if action == "replace" and path:
            parent[path[-1]] = draw(json_values)
        elif action == "replace-special" and path:
            parent[path[-1]] = draw(st.sampled_from(SPECIAL).map(copy.deepcopy))
        elif action == "delete" and path:
            del parent[path[-1]]
        elif action == "add-key" and isinstance(target, dict):
            target[draw(KEYS)] = draw(json_values)
        elif action == "duplicate" and isinstance(target, list) and target:
            index = draw(st.integers(min_value=0, max_value=len(target) - 1))
            target.insert(index, copy.deepcopy(target[index]))
        elif action == "number" and path and isinstance(target, (int, float)) and not isinstance(target, bool):
            how = draw(st.sampled_from(
                ["negate", "huge", "tiny", "zero", "plus-half", "plus-one", "perturb", "perturb"]))
            parent[path[-1]] = _number_mutation(target, how)
        elif action == "wrap" and path:
            parent[path[-1]] = [target]
        elif action == "unwrap" and path and isinstance(target, list) and target:
            parent[path[-1]] = target[0]
        elif action == "reverse" and isinstance(target, list):
            target.reverse()
        elif path:
            parent[path[-1]] = draw(json_values)
    return doc


@st.composite
def gently_mutated_scenes(draw):
    """Valid scenes with a few float values scaled by 0.5..2: mostly still valid, so they reach ``simulate``."""
    doc = copy.deepcopy(draw(st.sampled_from(BASES)))
    paths = [p for p in _paths(doc) if p and isinstance(_get(doc, p), float)]
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        path = draw(st.sampled_from(paths))
        _get(doc, path[:-1])[path[-1]] *= draw(st.floats(min_value=0.5, max_value=2.0))
    return doc


@st.composite
def random_documents(draw):
    """Documents with the right top-level keys and random contents, or any JSON value."""
    if draw(st.booleans()):
        return draw(json_values)
    doc = {"format": "abd-scene", "version": 1}
    for key in ("settings", "bodies", "joints"):
        if draw(st.booleans()):
            doc[key] = draw(json_values)
    if draw(st.booleans()):
        doc["bodies"] = [draw(st.dictionaries(KEYS, json_values, max_size=6)) for _ in range(draw(st.integers(0, 2)))]
    return doc


documents = st.one_of(mutated_scenes(), mutated_scenes(), gently_mutated_scenes(), random_documents())

# ---------------------------------------------------------------------------------------------
# The property
# ---------------------------------------------------------------------------------------------


def one_frame(scene: Scene) -> Scene:
    """A copy of a validated scene with frame_count = 1 and substeps = 1 (series cut to 2 frames)."""
    last = scene.settings.frame_count
    keep = np.minimum([0, 1], last)

    def cut(series):
        return None if series is None else np.asarray(series)[keep]

    bodies = []
    for body in scene.bodies:
        soft = body.soft_transform
        if soft is not None:
            soft = replace(soft, strength_ratio=cut(soft.strength_ratio), aim_transform=cut(soft.aim_transform),
                           is_constrained=cut(soft.is_constrained))
        bodies.append(replace(body, soft_transform=soft, animated_transforms=cut(body.animated_transforms)))
    joints = []
    for joint in scene.joints:
        limit = joint.limit
        if limit is not None:
            limit = replace(limit, lower=cut(limit.lower), upper=cut(limit.upper), strength=cut(limit.strength))
        driving = joint.driving
        if driving is not None:
            driving = replace(driving, strength_ratio=cut(driving.strength_ratio),
                              is_constrained=cut(driving.is_constrained), is_passive=cut(driving.is_passive),
                              aim_distance=cut(driving.aim_distance))
        joints.append(replace(joint, limit=limit, driving=driving))
    return Scene(replace(scene.settings, frame_count=1, substeps=1), bodies, joints)


def check_document(document) -> str:
    """Load one document; returns "refused" or "loaded". Anything but SceneError propagates."""
    try:
        scene = scene_from_dict(document)
    except SceneError:
        return "refused"
    # A loaded scene round-trips through its JSON form.
    text = json.dumps(scene_to_dict(scene), allow_nan=False)
    again = scene_from_dict(json.loads(text))
    assert json.dumps(scene_to_dict(again)) == text
    if HAS_SIMULATION:
        from solver.simulation import SolverError, simulate

        try:
            simulate(one_frame(scene))
        except SolverError:
            pass
    return "loaded"


def test_bases_load():
    for base in BASES:
        assert check_document(copy.deepcopy(base)) == "loaded"


@pytest.mark.slow
@pytest.mark.timeout(300)
@settings(
    max_examples=1000, deadline=None, database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
)
@given(document=documents)
def test_malformed_documents_are_refused_or_load(document):
    check_document(document)
