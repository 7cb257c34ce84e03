"""The chains of ``chains.py`` side by side in our solver, MuJoCo, PyBullet and Blender's Bullet.

Scenes as in ``chains.py`` (docs/performance.md, "The benchmark scenes"): N boxes of 1 x 0.2 x 0.2 m at density
1000 (40 kg, I_cm = (0.267, 3.467, 3.467) kg m^2) end to end along +x from a fixed anchor,
starting horizontal and at rest, gravity (0, 0, -9.81), no collision and no damping anywhere.
(a) revolute: a hinge about world y at x = k between box k-1 (or the anchor) and box k.
(b) prismatic: a slider along x at x = k, limit [-0.5, 0.5] m, and a drive to +0.3 m on every
    joint with kp = 8000 N/m (kd = 800 N s/m in the PD engines; ours: ``chains.py``'s drive of
    the same physical stiffness, BDF1's numerical damping in place of kd).

How each engine is set up:
* ours: ``chains.chain_scene``; dt = 1/240 is 24 fps with 10 substeps, dt = 1/24 one step per
  frame. Timed as ``chains.py`` does: from the end of frame 1 to the end (the build and the first
  frame are excluded), so 47 of the 48 frames of 2 s are timed.
* MuJoCo (``mujoco``, benchmarks/requirements.txt): built with ``MjSpec``, bodies without geoms
  and with explicit inertia, ``implicitfast``; the drive is a ``position`` actuator (kp, kv) with
  ctrl = 0.3. MuJoCo resets a diverged state silently (only ``data.warning`` tells): such runs
  are reported as diverged, with the time it happened.
* PyBullet: a URDF (one element a line: a one-line URDF does not load) loaded with
  ``URDF_USE_INERTIA_FROM_FILE`` and a fixed base (btMultiBody, reduced coordinates, 50 solver
  iterations); the default velocity motors are switched off (``VELOCITY_CONTROL``, force 0),
  link and joint damping set to 0; the drive is ``PD_CONTROL`` (explicit PD). PyBullet cannot
  read link states back for 1000 links: drift "n/r".
* Blender: the bpy wheel's rigid-body world, run in a subprocess under ``timeout`` (bpy 4.5.15
  can deadlock at exit; the worker ends with ``os._exit``). Built through the data API: one
  ``bpy.ops.rigidbody.world_add()`` for the world, then ``bpy.data`` meshes and objects linked
  into ``rigidbody_world.collection`` (BOX shape, mass 40, damping 0, no deactivation, every
  collision collection off) and Empties linked into ``rigidbody_world.constraints`` (HINGE with
  the Empty's local z along world y; ``GENERIC_SPRING`` SPRING2 for the prismatic chain: x free
  within the limit with a spring kp = 8000, damping 800 towards the build pose, i.e. 0 m, because
  Blender has no position drive; the other 5 axes locked). 24 fps, ``substeps_per_frame`` 10
  (dt = 1/240) or 1 (dt = 1/24), ``solver_iterations`` 10. Frame 1 (which builds the Bullet
  world) is untimed; frames 2 to 49 (2 s) are timed.

Every repetition builds its scene fresh; the build is never timed. Before the repetitions an
untimed warm-up runs ``--warmup-seconds`` of the same scene (for ours also a full-length 2-body
chain first, so that every Numba kernel is compiled). The reported figure is the median over
``--repeats`` of wall seconds per simulated second. When the warm-up predicts that one
repetition would take more than ``--max-seconds-per-run`` wall seconds, the simulated time is cut
to fit (whole frames of 1/24 s) and the figure is marked ``*``; the drift is then taken at the
cut time (the note says which).

Drift (``chains.drift``): at the end, the largest separation of a joint's anchor as carried by
its two bodies; for prismatic joints the part of it perpendicular to the parent's axis. For the
prismatic chains the note gives the first and last joint's slide (the same separation along the
axis) and the largest |slide|, to show whether the motion is right and the limits hold.

Prints the table and, per chain, ours / each other engine's wall time; ``--markdown FILE`` also
writes the table there, ``--update-docs`` rewrites the generated block of docs/benchmark_runs.md
(its section "Latest ``peers.py`` run") with the table, the ratios, the command, the time and the
CPU.

    python benchmarks/peers.py --engines ours mujoco pybullet blender --sizes 10 100 --dt 240 24
    python benchmarks/peers.py --engines ours blender --sizes 10 100 1000 --dt 240 24 --update-docs
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, List, Optional

import numpy as np
import reporting

ENGINES = ("ours", "mujoco", "pybullet", "blender")
KINDS = ("revolute", "prismatic")
FPS = 24  # frames per second in every engine: dt = 1/240 is 10 steps a frame, 1/24 one
MASS = 40.0  # kg: 1 x 0.2 x 0.2 m at 1000 kg/m^3
INERTIA = (MASS * (0.2**2 + 0.2**2) / 12.0, MASS * (1.0 + 0.2**2) / 12.0, MASS * (1.0 + 0.2**2) / 12.0)
DRIVE_KP = 8000.0  # N/m, as chains.DRIVE_KP
DRIVE_KD = 800.0  # N s/m, for the PD engines
AIM = 0.3  # m
LIMIT = (-0.5, 0.5)  # m
BENCHMARKS = Path(__file__).resolve().parent
RESULT_MARK = "PEERS_RESULT "


@dataclass
class Run:
    """One timed run: ``wall`` seconds of stepping for ``sim`` simulated seconds."""

    wall: float
    sim: float
    #: (2, count + 1, 4, 4): poses at the start and the end, anchor first (our scene's body
    #: order); None when the engine could not return them.
    transforms: Optional[np.ndarray]
    notes: List[str] = field(default_factory=list)
    diverged: bool = False


@dataclass
class Result:
    """A measured configuration: one table row (``key``: the engine's name in ``ENGINES``)."""

    engine: str
    key: str
    kind: str
    count: int
    dt: int
    rate: Optional[float] = None  # median wall s / sim s
    cut: bool = False
    sim: float = 0.0  # simulated seconds per timed repetition
    drift: Optional[float] = None
    drift_text: str = ""
    notes: List[str] = field(default_factory=list)


def steps_per_frame(dt: int) -> int:
    """Time steps per 1/24 s frame at dt = 1/``dt``."""
    return dt // FPS


# ------------------------------------------------------------------------------------- engines


def run_ours(kind: str, count: int, dt: int, seconds: float) -> Run:
    """Our solver on ``chains.chain_scene``; stepping timed from the end of frame 1, as chains.py."""
    from chains import chain_scene  # noqa: PLC0415 (keeps the Blender worker free of Numba)
    from solver import simulate  # noqa: PLC0415

    scene = chain_scene(kind, count, dt, seconds, steps_per_frame(dt))
    stamps = {}

    def clock(frame: int, frame_count: int) -> None:
        stamps[frame] = time.perf_counter()

    trajectory = simulate(scene, progress=clock)
    frames = scene.settings.frame_count
    notes = []
    if not trajectory.all_converged:
        notes.append(f"{int(np.count_nonzero(~trajectory.converged))} steps not converged")
    return Run(wall=stamps[frames] - stamps[1], sim=(frames - 1) / scene.settings.frame_rate,
               transforms=trajectory.transforms[[0, -1]], notes=notes)


def _mujoco_model(kind: str, count: int, dt: int):
    import mujoco  # noqa: PLC0415

    spec = mujoco.MjSpec()
    spec.option.timestep = 1.0 / dt
    spec.option.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    parent = spec.worldbody
    for k in range(count):
        body = parent.add_body(name=f"box{k}", pos=[0.0 if k == 0 else 1.0, 0.0, 0.0], mass=MASS,
                               ipos=[0.5, 0.0, 0.0], inertia=list(INERTIA))
        if kind == "revolute":
            body.add_joint(name=f"joint{k}", type=mujoco.mjtJoint.mjJNT_HINGE, axis=[0.0, 1.0, 0.0])
        else:
            body.add_joint(name=f"joint{k}", type=mujoco.mjtJoint.mjJNT_SLIDE, axis=[1.0, 0.0, 0.0],
                           range=list(LIMIT), limited=mujoco.mjtLimited.mjLIMITED_TRUE)
            actuator = spec.add_actuator(name=f"drive{k}", target=f"joint{k}", trntype=mujoco.mjtTrn.mjTRN_JOINT)
            actuator.set_to_position(kp=DRIVE_KP, kv=DRIVE_KD)
        parent = body
    return spec.compile()


def _mujoco_poses(data, count: int) -> np.ndarray:
    poses = np.tile(np.eye(4), (count + 1, 1, 1))
    poses[1:, :3, :3] = data.xmat[1:].reshape(-1, 3, 3)
    poses[1:, :3, 3] = data.xpos[1:]
    return poses


def run_mujoco(kind: str, count: int, dt: int, seconds: float) -> Run:
    """MuJoCo, reduced coordinates, implicitfast; every step of ``seconds`` timed."""
    import mujoco  # noqa: PLC0415

    # Warnings to stderr instead of MUJOCO_LOG.TXT in the working directory; data.warning still counts them.
    mujoco.set_mju_user_warning(lambda message: print(f"MuJoCo warning: {message}", file=sys.stderr))
    model = _mujoco_model(kind, count, dt)
    data = mujoco.MjData(model)
    if model.nu:
        data.ctrl[:] = AIM
    mujoco.mj_forward(model, data)
    start_poses = _mujoco_poses(data, count)
    steps = int(round(seconds * FPS)) * steps_per_frame(dt)
    step = mujoco.mj_step
    start = time.perf_counter()
    for _ in range(steps):
        step(model, data)
    wall = time.perf_counter() - start
    run = Run(wall=wall, sim=steps / dt, transforms=np.stack([start_poses, _mujoco_poses(data, count)]))
    if data.warning[mujoco.mjtWarning.mjWARN_BADQACC].number:
        # The state was reset to the start: find when it diverged, stepping again untimed.
        data = mujoco.MjData(model)
        if model.nu:
            data.ctrl[:] = AIM
        diverged_step = steps
        for n in range(1, steps + 1):
            step(model, data)
            if data.warning[mujoco.mjtWarning.mjWARN_BADQACC].number:
                diverged_step = n
                break
        run.diverged = True
        run.notes.append(f"diverged in the step from t = {(diverged_step - 1) / dt:.3f} s (MuJoCo reset the state)")
    return run


def _urdf(kind: str, count: int) -> str:
    ixx, iyy, izz = (repr(v) for v in INERTIA)
    lines = ['<?xml version="1.0"?>', '<robot name="chain">', '<link name="anchor">',
             '  <inertial><mass value="1"/><inertia ixx="1" ixy="0" ixz="0" iyy="1" iyz="0" izz="1"/></inertial>',
             '</link>']
    for k in range(count):
        lines += [f'<link name="box{k}">', '  <inertial>', '    <origin xyz="0.5 0 0" rpy="0 0 0"/>',
                  f'    <mass value="{MASS!r}"/>',
                  f'    <inertia ixx="{ixx}" ixy="0" ixz="0" iyy="{iyy}" iyz="0" izz="{izz}"/>',
                  '  </inertial>', '</link>']
        parent = "anchor" if k == 0 else f"box{k - 1}"
        joint_type = "continuous" if kind == "revolute" else "prismatic"
        lines += [f'<joint name="joint{k}" type="{joint_type}">', f'  <parent link="{parent}"/>',
                  f'  <child link="box{k}"/>', f'  <origin xyz="{0 if k == 0 else 1} 0 0" rpy="0 0 0"/>']
        if kind == "revolute":
            lines.append('  <axis xyz="0 1 0"/>')
        else:
            lines += ['  <axis xyz="1 0 0"/>',
                      f'  <limit lower="{LIMIT[0]}" upper="{LIMIT[1]}" effort="1e12" velocity="1e12"/>']
        lines.append('</joint>')
    lines.append('</robot>')
    return "\n".join(lines) + "\n"


def _pybullet_poses(pybullet, client: int, body: int, count: int) -> Optional[np.ndarray]:
    try:
        states = pybullet.getLinkStates(body, list(range(count)), computeForwardKinematics=1,
                                        physicsClientId=client)
    except pybullet.error:
        return None  # PyBullet cannot read back the states of a chain this long (1000 links)
    poses = np.tile(np.eye(4), (count + 1, 1, 1))
    for k, state in enumerate(states):
        poses[k + 1, :3, :3] = np.reshape(pybullet.getMatrixFromQuaternion(state[5]), (3, 3))
        poses[k + 1, :3, 3] = state[4]  # the URDF link frame (at the joint), float32 in PyBullet
    return poses


def run_pybullet(kind: str, count: int, dt: int, seconds: float) -> Run:
    """PyBullet btMultiBody from a URDF; every step of ``seconds`` timed."""
    import pybullet  # noqa: PLC0415

    client = pybullet.connect(pybullet.DIRECT)
    try:
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "chain.urdf"
            path.write_text(_urdf(kind, count))
            pybullet.setGravity(0.0, 0.0, -9.81, physicsClientId=client)
            pybullet.setTimeStep(1.0 / dt, physicsClientId=client)
            pybullet.setPhysicsEngineParameter(numSubSteps=0, physicsClientId=client)
            body = pybullet.loadURDF(str(path), useFixedBase=True, flags=pybullet.URDF_USE_INERTIA_FROM_FILE,
                                     physicsClientId=client)
        joints = list(range(count))
        for link in [-1] + joints:
            pybullet.changeDynamics(body, link, linearDamping=0.0, angularDamping=0.0, jointDamping=0.0,
                                    physicsClientId=client)
        pybullet.setJointMotorControlArray(body, joints, pybullet.VELOCITY_CONTROL, forces=[0.0] * count,
                                           physicsClientId=client)
        if kind == "prismatic":
            pybullet.setJointMotorControlArray(body, joints, pybullet.PD_CONTROL, targetPositions=[AIM] * count,
                                               positionGains=[DRIVE_KP] * count, velocityGains=[DRIVE_KD] * count,
                                               forces=[1e12] * count, physicsClientId=client)
        start_poses = _pybullet_poses(pybullet, client, body, count)
        steps = int(round(seconds * FPS)) * steps_per_frame(dt)
        step = pybullet.stepSimulation
        start = time.perf_counter()
        for _ in range(steps):
            step(physicsClientId=client)
        wall = time.perf_counter() - start
        end_poses = _pybullet_poses(pybullet, client, body, count)
    finally:
        pybullet.disconnect(physicsClientId=client)
    transforms = None if start_poses is None or end_poses is None else np.stack([start_poses, end_poses])
    return Run(wall=wall, sim=steps / dt, transforms=transforms)


def _blender_box(bpy, name: str, size) -> object:
    half = [s / 2.0 for s in size]
    verts = [(x * half[0], y * half[1], z * half[2]) for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)]
    faces = [(0, 1, 3, 2), (4, 6, 7, 5), (0, 4, 5, 1), (2, 3, 7, 6), (0, 2, 6, 4), (1, 5, 7, 3)]
    mesh = bpy.data.meshes.new(name)
    mesh.from_pydata(verts, [], faces)
    mesh.update()
    return mesh


def run_blender(kind: str, count: int, dt: int, seconds: float) -> Run:
    """Blender's rigid-body world in this process (the --blender-worker subprocess only)."""
    import bpy  # noqa: PLC0415

    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    bpy.ops.rigidbody.world_add()  # the world has no data-API constructor; one call, O(1)
    world = scene.rigidbody_world
    world.collection = bodies = bpy.data.collections.new("RigidBodyWorld")
    world.constraints = constraints = bpy.data.collections.new("RigidBodyConstraints")

    def body(name: str, mesh, x: float, kind_: str):
        obj = bpy.data.objects.new(name, mesh)
        obj.location = (x, 0.0, 0.0)
        scene.collection.objects.link(obj)
        bodies.objects.link(obj)  # linking into the world's collection creates obj.rigid_body
        rb = obj.rigid_body
        rb.type = kind_
        rb.mass = MASS
        rb.collision_shape = "BOX"
        rb.linear_damping = rb.angular_damping = 0.0
        rb.use_deactivation = False
        rb.collision_collections = [False] * 20
        return obj

    box = _blender_box(bpy, "box", (1.0, 0.2, 0.2))
    objects = [body("anchor", _blender_box(bpy, "anchor", (0.2, 0.2, 0.2)), -0.1, "PASSIVE")]
    objects += [body(f"box{k}", box, k + 0.5, "ACTIVE") for k in range(count)]
    for k in range(count):
        empty = bpy.data.objects.new(f"joint{k}", None)
        empty.location = (float(k), 0.0, 0.0)
        scene.collection.objects.link(empty)
        constraints.objects.link(empty)  # creates empty.rigid_body_constraint
        con = empty.rigid_body_constraint
        if kind == "revolute":
            empty.rotation_euler = (-math.pi / 2.0, 0.0, 0.0)  # HINGE turns about local z: world y
            con.type = "HINGE"
        else:
            con.type = "GENERIC_SPRING"
            con.spring_type = "SPRING2"
            con.use_limit_lin_x = True
            con.limit_lin_x_lower, con.limit_lin_x_upper = LIMIT
            for axis in "yz":
                setattr(con, f"use_limit_lin_{axis}", True)
                setattr(con, f"limit_lin_{axis}_lower", 0.0)
                setattr(con, f"limit_lin_{axis}_upper", 0.0)
            for axis in "xyz":
                setattr(con, f"use_limit_ang_{axis}", True)
                setattr(con, f"limit_ang_{axis}_lower", 0.0)
                setattr(con, f"limit_ang_{axis}_upper", 0.0)
            con.use_spring_x = True  # rests at the build pose (0 m): Blender has no position drive
            con.spring_stiffness_x = DRIVE_KP
            con.spring_damping_x = DRIVE_KD
        con.object1, con.object2 = objects[k], objects[k + 1]
        con.disable_collisions = True

    frames = int(round(seconds * FPS))
    scene.render.fps, scene.render.fps_base = FPS, 1.0
    world.time_scale = 1.0
    world.substeps_per_frame = steps_per_frame(dt)
    world.solver_iterations = 10
    world.point_cache.frame_start, world.point_cache.frame_end = 1, frames + 1
    scene.frame_start, scene.frame_end = 1, frames + 1
    scene.frame_set(1)  # builds the Bullet world: untimed

    def poses() -> np.ndarray:
        return np.array([np.array(obj.matrix_world) for obj in objects])

    start_poses = poses()
    frame_set = scene.frame_set
    start = time.perf_counter()
    for frame in range(2, frames + 2):
        frame_set(frame)
    wall = time.perf_counter() - start
    return Run(wall=wall, sim=frames / FPS, transforms=np.stack([start_poses, poses()]))


RUNNERS = {"ours": run_ours, "mujoco": run_mujoco, "pybullet": run_pybullet, "blender": run_blender}


# ------------------------------------------------------------------------------------ measuring


def measure(runner: Callable[..., Run], kind: str, count: int, dt: int, args) -> tuple:
    """Warm-up, the cut decision and the repetitions; returns (rates, sim seconds, cut, last run)."""
    frame = 1.0 / FPS
    warm = runner(kind, count, dt, max(2 * frame, min(args.warmup_seconds, args.seconds)))
    seconds, cut = args.seconds, False
    estimate = warm.wall / warm.sim * args.seconds if warm.sim > 0 else 0.0
    if args.max_seconds_per_run and estimate > args.max_seconds_per_run:
        frames = max(2, int(args.max_seconds_per_run / (warm.wall / warm.sim) / frame))
        if frames * frame < args.seconds:
            seconds, cut = frames * frame, True
    rates, last = [], None
    for _ in range(args.repeats):
        last = runner(kind, count, dt, seconds)
        rates.append(last.wall / last.sim)
    return rates, seconds, cut, last


def blender_worker(args) -> None:
    """Subprocess body: measure one Blender configuration, save the poses, print one JSON line."""
    import bpy  # noqa: PLC0415

    kind, count, dt = args.kinds[0], args.sizes[0], args.dt[0]
    rates, seconds, cut, last = measure(run_blender, kind, count, dt, args)
    np.save(args.blender_worker, last.transforms)
    print(RESULT_MARK + json.dumps({"rates": rates, "seconds": seconds, "cut": cut,
                                    "version": bpy.app.version_string}), flush=True)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # bpy 4.5.15 can deadlock in its exit handlers (docs/testing.md, "The bpy wheel")


def measure_blender(kind: str, count: int, dt: int, args) -> tuple:
    """Run ``blender_worker`` in a subprocess under ``timeout``; returns what it measured."""
    with tempfile.TemporaryDirectory() as folder:
        poses = Path(folder) / "poses.npy"
        command = [sys.executable, str(Path(__file__).resolve()), "--blender-worker", str(poses),
                   "--kinds", kind, "--sizes", str(count), "--dt", str(dt),
                   "--seconds", str(args.seconds), "--repeats", str(args.repeats),
                   "--warmup-seconds", str(args.warmup_seconds),
                   "--max-seconds-per-run", str(args.max_seconds_per_run)]
        result = reporting.worker_result(command, RESULT_MARK, args.blender_timeout)
        run = Run(wall=0.0, sim=result["seconds"], transforms=np.load(poses))
    return result["rates"], result["seconds"], result["cut"], run, result["version"]


def joint_slides(scene, transforms: np.ndarray) -> np.ndarray:
    """Each joint's slide at the end: the anchor separation along the parent's axis (m)."""
    names = [body.name for body in scene.bodies]
    slides = []
    for joint in scene.joints:
        i, j = names.index(joint.l_body), names.index(joint.r_body)
        anchor = np.append(joint.position0, 1.0)
        gap = (transforms[-1, j] @ np.linalg.solve(transforms[0, j], anchor)
               - transforms[-1, i] @ np.linalg.solve(transforms[0, i], anchor))[:3]
        axis = transforms[-1, i, :3, :3] @ np.linalg.solve(transforms[0, i, :3, :3], joint.position1 - joint.position0)
        slides.append(float(gap @ axis / np.linalg.norm(axis)))
    return np.array(slides)


def evaluate(result: Result, run: Run, seconds: float) -> None:
    """Fill the drift and the notes of ``result`` from the last repetition ``run``."""
    from chains import chain_scene, drift  # noqa: PLC0415

    result.notes += run.notes
    if result.cut:
        result.notes.append(f"*: {seconds:.3f} s simulated, drift at that time")
    if run.diverged:
        result.drift_text = "diverged"
        return
    if run.transforms is None:
        result.drift_text = "n/r"
        return
    if not np.all(np.isfinite(run.transforms)):
        result.drift_text = "NaN"
        return
    scene = chain_scene(result.kind, result.count, result.dt, seconds, steps_per_frame(result.dt))
    result.drift = drift(scene, run.transforms)
    result.drift_text = f"{result.drift:.1e}"
    if result.kind == "prismatic":
        slides = joint_slides(scene, run.transforms)
        result.notes.append(f"slide first/last {slides[0]:.3f}/{slides[-1]:.3f} m, largest in magnitude "
                            f"{np.abs(slides).max():.3f} m")
        if result.engine.startswith("Blender"):
            result.notes.append("spring to 0 m (no position drive)")


def engine_label(engine: str, blender_version: Optional[str] = None) -> str:
    """The engine column's text."""
    if engine == "ours":
        return "ours (ABD, BDF1)"
    if engine == "mujoco":
        import mujoco  # noqa: PLC0415

        return f"MuJoCo {mujoco.__version__} (implicitfast)"
    if engine == "pybullet":
        from importlib.metadata import version  # noqa: PLC0415

        return f"PyBullet {version('pybullet')} (btMultiBody)"
    return f"Blender {(blender_version or '').split(' ')[0]} (Bullet RB world)".replace("Blender  ", "Blender ")


def available(engine: str) -> Optional[str]:
    """None when ``engine`` can run here, else why not."""
    module = {"ours": "numba", "mujoco": "mujoco", "pybullet": "pybullet", "blender": "bpy"}[engine]
    if importlib.util.find_spec(module) is None:
        hint = " (pip install -r benchmarks/requirements.txt)" if engine == "mujoco" else ""
        return f"skipping {engine}: Python module '{module}' is not installed in this environment{hint}"
    return None


def measure_row(engine: str, kind: str, count: int, dt: int, args) -> Result:
    """One table row; a failing engine gives a row whose note says why."""
    result = Result(engine=engine_label(engine) if engine != "blender" else "Blender", key=engine, kind=kind,
                    count=count, dt=dt)
    try:
        if engine == "blender":
            rates, seconds, cut, run, version = measure_blender(kind, count, dt, args)
            result.engine = engine_label(engine, version)
        else:
            if engine == "ours":  # compile every kernel this chain uses before anything is timed
                run_ours(kind, 2, dt, args.seconds)
            rates, seconds, cut, run = measure(RUNNERS[engine], kind, count, dt, args)
    except Exception as error:  # noqa: BLE001 (a benchmark row, not a crash)
        result.drift_text = "—"
        result.notes.append(f"failed: {type(error).__name__}: {str(error).strip().splitlines()[0][:120]}")
        return result
    result.rate, result.sim, result.cut = statistics.median(rates), seconds, cut
    evaluate(result, run, seconds)
    return result


def rate_text(result: Result) -> str:
    """The wall s / sim s cell: 3 significant figures, '*' when the simulated time was cut."""
    if result.rate is None:
        return "—"
    text = np.format_float_positional(result.rate, precision=3, unique=False, fractional=False, trim="k")
    return text.rstrip(".") + ("*" if result.cut else "")


COLUMNS = ("engine", "chain", "N", "dt", "wall s / sim s", "drift m", "note")


def cells(result: Result) -> list:
    """The row's cells, in COLUMNS order."""
    return [result.engine, result.kind, str(result.count), f"1/{result.dt}", rate_text(result),
            result.drift_text, "; ".join(result.notes)]


def markdown(results: List[Result], args) -> str:
    """The table as markdown, with the settings under it."""
    lines = [reporting.markdown_table(COLUMNS, [cells(result) for result in results])]
    lines.append(f"Median of {args.repeats} after a warm-up; {args.seconds:g} s simulated unless marked `*` "
                 f"(cut to keep one repetition under {args.max_seconds_per_run:g} s).")
    return "\n".join(lines) + "\n"


def ratios_markdown(results: List[Result]) -> str:
    """Per chain and other engine, ours / that engine's wall time (the "Fast solver" targets'
    figure: at most 1 against Blender's Bullet), as markdown; empty without our rows."""
    ours = {(r.dt, r.kind, r.count): r.rate for r in results if r.key == "ours" and r.rate is not None}
    rows = [f"| {r.kind} | {r.count} | 1/{r.dt} | {r.engine} | {ours[(r.dt, r.kind, r.count)] / r.rate:.2f} |"
            for r in results if r.key != "ours" and r.rate and (r.dt, r.kind, r.count) in ours]
    if not rows:
        return ""
    return "\n".join(["| chain | N | dt | against | ours / it (wall time) |", "|---|---|---|---|---|"] + rows) + "\n"


#: The block of a performance page that ``--update-docs`` rewrites (appended under a heading of
#: its own where the page has none).
DOCS_BEGIN, DOCS_END = reporting.docs_markers("peers.py")


def with_docs_block(page: str, block: str) -> str:
    """``page`` with this script's generated block (:func:`reporting.with_docs_block`)."""
    return reporting.with_docs_block(page, block, "peers.py")


def docs_block(results: List[Result], args, started: float) -> str:
    """The generated section: when and how the run was made, on what CPU, its table and ratios."""
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                   if line.startswith("model name"))
    except (OSError, StopIteration):
        import platform  # noqa: PLC0415

        cpu = platform.processor() or platform.machine()
    when = time.strftime("%Y-%m-%d %H:%M", time.gmtime(started)) + " to " + time.strftime("%H:%M UTC", time.gmtime())
    command = "python benchmarks/peers.py " + " ".join(sys.argv[1:])
    return (f"Written by `{command}`, {when}, on {cpu} ({os.cpu_count()} logical CPUs). "
            "Compare ratios within one run: timings on this machine vary by up to 1.8x from run to run.\n\n"
            + markdown(results, args) + "\n" + ratios_markdown(results))


def main() -> None:
    """Run the requested engines and chains; print the table (and write it as markdown)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--engines", nargs="+", default=list(ENGINES), choices=ENGINES)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 100])
    parser.add_argument("--kinds", nargs="+", default=list(KINDS), choices=KINDS)
    parser.add_argument("--dt", type=int, nargs="+", default=[240], choices=[240, 24],
                        help="steps per simulated second: 240 (24 fps, 10 steps a frame) or 24 (one a frame)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=2.0, help="simulated seconds per repetition")
    parser.add_argument("--warmup-seconds", type=float, default=0.25,
                        help="simulated seconds of the untimed warm-up run (also predicts the cost of a run)")
    parser.add_argument("--max-seconds-per-run", type=float, default=90.0,
                        help="cut the simulated time (marked *) where one repetition would take longer; 0: never")
    parser.add_argument("--blender-timeout", type=int, default=1200,
                        help="wall-seconds limit of one Blender subprocess (warm-up and repetitions)")
    parser.add_argument("--markdown", type=Path, help="also write the table as markdown to this file")
    parser.add_argument("--update-docs", type=Path, nargs="?", const=BENCHMARKS.parent / "docs" / "benchmark_runs.md",
                        help="also write the table and the ours / peer ratios into this page's generated "
                             "block (default docs/benchmark_runs.md)")
    parser.add_argument("--blender-worker", help=argparse.SUPPRESS)
    args = parser.parse_args()

    sys.path.insert(0, str(BENCHMARKS))
    if args.blender_worker:
        blender_worker(args)
        return
    sys.path.insert(0, str(BENCHMARKS.parent))

    engines = []
    for engine in args.engines:
        reason = available(engine)
        if reason:
            print(reason, file=sys.stderr, flush=True)
        else:
            engines.append(engine)

    started = time.time()
    widths = (34, 9, 5, 6, 14, 9)
    header = " ".join(f"{name:<{w}}" for name, w in zip(COLUMNS, widths)) + " note"
    print(header, flush=True)
    results = []
    for dt in args.dt:
        for kind in args.kinds:
            for count in args.sizes:
                for engine in engines:
                    result = measure_row(engine, kind, count, dt, args)
                    results.append(result)
                    row = cells(result)
                    print(" ".join(f"{cell:<{w}}" for cell, w in zip(row, widths)) + " " + row[-1], flush=True)
    ratios = ratios_markdown(results)
    if ratios:
        print("\n" + ratios, end="", flush=True)
    if args.markdown:
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text(markdown(results, args))
    if args.update_docs:
        page = args.update_docs.read_text() if args.update_docs.exists() else "# Performance\n"
        args.update_docs.write_text(with_docs_block(page, docs_block(results, args, started)))
        print(f"updated {args.update_docs}", flush=True)


if __name__ == "__main__":
    main()
