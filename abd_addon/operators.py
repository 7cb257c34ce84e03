"""Operators: add/remove affine body, connect bodies with joints, bake, free bake, export,
apply a trajectory file. The rig is built by :mod:`.rig`; these parse their properties and report.

Every failure is reported with ``self.report({'ERROR'}, ...)`` naming the object, returns
``{'CANCELLED'}`` and changes nothing; no traceback reaches the user (unexpected exceptions are
reported and their traceback printed to the console only).
"""

from __future__ import annotations

import threading
import time
import traceback

import bpy
from bpy.props import BoolProperty, EnumProperty, StringProperty
from bpy.types import Operator
from bpy_extras.io_utils import ExportHelper, ImportHelper
from mathutils import Vector

from ..solver.scene import SceneError
from .bake import bake as bake_module
from . import preview, rig, warmup
from .extension import extension_package, extension_root
from .properties import JOINT_TYPE_ITEMS
from .bake.rig_rules import RigError

#: Exceptions that mean "the user's rig, settings or files are wrong" (reported without a traceback).
USER_ERRORS = (RigError, SceneError, bake_module.TrajectoryFileError)


def solver_errors() -> tuple:
    """Rig, scene and solver failure exceptions (the solver is imported lazily: it loads Numba)."""
    try:
        from ..solver.simulation import SolverError
    except ImportError:
        return USER_ERRORS + (OSError,)
    return USER_ERRORS + (SolverError, OSError)


def report_exception(operator: Operator, error: BaseException, what: str) -> set:
    """Report ``error`` on ``operator`` as an ERROR (traceback to the console if unexpected)."""
    if isinstance(error, solver_errors()):
        operator.report({"ERROR"}, f"{what}: {error}")
    else:
        traceback.print_exception(type(error), error, error.__traceback__)
        operator.report({"ERROR"}, f"{what}: unexpected {type(error).__name__}: {error} (details in the console)")
    return {"CANCELLED"}


def linked_message(objects: list) -> str:
    """Why linked ``objects`` were left alone, and what to do."""
    names = ", ".join(f"'{ob.name}'" for ob in objects)
    return (f"{names} skipped: linked from a library, so this file would not keep the change; make it local "
            "(Object > Relations > Make Local) or give it a library override (Object > Library Override > Make)")


#: How many objects a report names before it says how many more there are.
NAMED_IN_REPORT = 3


def named(objects: list) -> str:
    """The quoted names of ``objects``, the first :data:`NAMED_IN_REPORT` of them and how many more."""
    names = ", ".join(f"'{ob.name}'" for ob in objects[:NAMED_IN_REPORT])
    rest = len(objects) - NAMED_IN_REPORT
    return names + (f" and {rest} more" if rest > 0 else "")


class _BodyOperator:
    """What Add / Remove Affine Body act on: the selected objects, or (``context_object``, set by
    the Physics properties' button) the object those properties show, as Blender's own Physics
    buttons act on it."""

    context_object: BoolProperty(
        name="Context Object",
        description="Act on the object the properties show (the active or pinned one) instead of the selected objects",
        default=False, options={"HIDDEN", "SKIP_SAVE"},
    )

    def targets(self, context) -> list:
        """The objects to act on: ``[context.object]`` with ``context_object``, else the selection."""
        if self.context_object:
            return [context.object] if context.object is not None else []
        return list(context.selected_objects)

    def editable(self, objects: list, none: str):
        """``(editable, linked)``: ``objects`` this file can change, and those linked from a
        library (skipped); or None, reported as an error, where there is none (``none`` says
        what to select) or none editable."""
        if not objects:
            self.report({"ERROR"}, none)
            return None
        linked = [ob for ob in objects if not ob.is_editable]
        editable = [ob for ob in objects if ob.is_editable]
        if not editable:
            self.report({"ERROR"}, linked_message(linked))
            return None
        return editable, linked


class ABD_OT_body_add(_BodyOperator, Operator):
    """Make the selected meshes affine bodies (in the Physics properties: the object shown there)"""

    bl_idname = "abd.body_add"
    bl_label = "Add Affine Body"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context):
        """Needs a selection, or an object (the one the Physics properties show)."""
        if context.selected_objects or context.object is not None:
            return True
        cls.poll_message_set("Select one or more mesh objects")
        return False

    def execute(self, context):
        """Enable ``abd_body`` on every editable mesh of :meth:`targets` (other objects, and linked
        ones, whose settings the file would not keep, are skipped with a warning)."""
        targets = self.targets(context)
        others = [ob for ob in targets if ob.type != "MESH"]
        not_meshes = (f"{named(others)} {'is not a mesh' if len(others) == 1 else 'are not meshes'} "
                      f"({', '.join(sorted({ob.type.title() for ob in others}))}): only meshes can be affine bodies "
                      "(Object > Convert > Mesh)")
        none = not_meshes if others else "Select one or more mesh objects: only meshes can be affine bodies"
        split = self.editable([ob for ob in targets if ob.type == "MESH"], none)
        if split is None:
            return {"CANCELLED"}
        meshes, linked = split
        for ob in meshes:
            rig.add_body(ob)
        message = f"{len(meshes)} affine bod{'y' if len(meshes) == 1 else 'ies'} added"
        if others:
            message += f"; skipped {not_meshes}"
        if linked:
            message += f"; {linked_message(linked)}"
        self.report({"WARNING"} if others or linked else {"INFO"}, message)
        return {"FINISHED"}


class ABD_OT_body_remove(_BodyOperator, Operator):
    """Stop simulating the selected objects as affine bodies (in the Physics properties: the object shown there)"""

    bl_idname = "abd.body_remove"
    bl_label = "Remove Affine Body"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context):
        """Needs a selected affine body, or an object that is one (the one the Physics properties show)."""
        if (any(ob.abd_body.enabled for ob in context.selected_objects)
                or context.object is not None and context.object.abd_body.enabled):
            return True
        cls.poll_message_set("Select one or more affine bodies")
        return False

    def execute(self, context):
        """Disable ``abd_body`` on the editable bodies of :meth:`targets` (linked ones are skipped
        with a warning)."""
        split = self.editable([ob for ob in self.targets(context) if ob.abd_body.enabled],
                              "Select one or more affine bodies")
        if split is None:
            return {"CANCELLED"}
        removed, linked = split
        for ob in removed:
            rig.remove_body(ob)
        message = f"{len(removed)} affine bod{'y' if len(removed) == 1 else 'ies'} removed"
        self.report({"WARNING"} if linked else {"INFO"}, message + (f"; {linked_message(linked)}" if linked else ""))
        return {"FINISHED"}


PIVOT_ITEMS = (
    ("ACTIVE", "Active",
     "Pivot at the parent's origin: the active object (in a chain, the body of each pair nearer it)"),
    ("CENTER", "Midpoint", "Pivot halfway between the two bodies' origins"),
    ("CURSOR", "3D Cursor", "Pivot at the 3D cursor"),
)

#: As Blender's own Connect Rigid Bodies (``rigidbody.connect``) offers them.
CONNECTION_PATTERN_ITEMS = (
    ("SELECTED_TO_ACTIVE", "Selected to Active",
     "Join every selected body to the active one, which is the parent of each joint"),
    ("CHAIN_DISTANCE", "Chain by Distance",
     "Join the selected bodies in a chain starting at the active one, each to the nearest one not yet in "
     "the chain (by origin); in each joint the body nearer the active one is the parent"),
)

AXIS_ITEMS = (
    ("X", "X", "World X axis"),
    ("Y", "Y", "World Y axis"),
    ("Z", "Z", "World Z axis"),
    ("VIEW", "View", "Along the view direction (towards the viewer)"),
)


class ABD_OT_connect(Operator):
    """Connect the selected affine bodies with joint Empties: two, or many to the active one or in a chain"""

    bl_idname = "abd.connect"
    bl_label = "Connect"
    bl_options = {"REGISTER", "UNDO"}

    type: EnumProperty(name="Type", items=JOINT_TYPE_ITEMS, default="REVOLUTE",
                       description="The kind of joint each new joint Empty is")
    pivot_type: EnumProperty(name="Pivot", items=PIVOT_ITEMS, default="CENTER",
                             description="Where each joint's anchor (the Empty's origin) goes")
    axis: EnumProperty(name="Axis", items=AXIS_ITEMS, default="Z",
                       description="The joint axis (the Empty's local Z): the slide or hinge direction")
    connection_pattern: EnumProperty(name="Connection Pattern", items=CONNECTION_PATTERN_ITEMS,
                                     default="SELECTED_TO_ACTIVE",
                                     description="Which pairs of the selected bodies get a joint, with more than two")

    @classmethod
    def poll(cls, context):
        """Needs two or more selected objects."""
        if len(context.selected_objects) >= 2:
            return True
        cls.poll_message_set("Select two or more affine bodies, the parent last (it is then active)")
        return False

    def execute(self, context):
        """Create a joint Empty per pair of selected bodies: the two of them (parent = the active
        one), or with more, each to the active one or along a chain by distance from it. The new
        joints end selected, the last one active; nothing is made if any selected object is not an
        affine body or, with more than two, none of them is active."""
        selected = list(context.selected_objects)
        try:
            for ob in selected:
                rig.check_body(ob)
        except RigError as error:
            self.report({"ERROR"}, str(error))
            return {"CANCELLED"}
        active = context.active_object
        if active in selected:
            root = active
        elif len(selected) == 2:
            root = min(selected, key=lambda ob: ob.name)
        else:
            self.report({"ERROR"}, f"Make one of the {len(selected)} selected bodies active: it is where the "
                                   "joints start (their parent)")
            return {"CANCELLED"}
        if self.axis == "VIEW":
            region = getattr(context, "region_data", None)
            if region is None:
                self.report({"WARNING"}, "No 3D view: using the Z axis")
                axis = Vector((0.0, 0.0, 1.0))
            else:
                axis = region.view_rotation @ Vector((0.0, 0.0, 1.0))
        else:
            axis = Vector([1.0 if self.axis == name else 0.0 for name in "XYZ"])
        try:
            joints = rig.connect_objects(selected, root, self.connection_pattern, self.type, self.pivot_type, axis,
                                         cursor=context.scene.cursor.location,
                                         collection=rig.new_object_collection(context))
        except Exception as error:  # noqa: BLE001 - reported, never raised at the user
            return report_exception(self, error, "Connect failed")
        for ob in selected:
            ob.select_set(False)
        for empty in joints:
            empty.select_set(True)
        context.view_layer.objects.active = joints[-1]
        if len(joints) == 1:
            joint = joints[0].abd_joint
            self.report({"INFO"}, f"Joint '{joints[0].name}' connects '{joint.l_body.name}' (parent) and "
                                  f"'{joint.r_body.name}' (child)")
        else:
            pattern = {identifier: name for identifier, name, _ in CONNECTION_PATTERN_ITEMS}[self.connection_pattern]
            self.report({"INFO"}, f"{len(joints)} joints connect {len(selected)} bodies ({pattern.lower()}, "
                                  f"from '{root.name}')")
        return {"FINISHED"}


def write_keys(operator: Operator, job, require_converged: bool) -> set:
    """Finish a job whose trajectory is ready (simulated or loaded): its keys, unless
    convergence is required and some step missed it (:meth:`.bake.BakeJob.finish`); report on
    ``operator``."""
    try:
        job.finish(require_converged)
    except bake_module.BakeNotConverged as error:
        operator.report({"ERROR"}, f"Bake failed: {error}; nothing was changed (untick Require Convergence to "
                                   "keep such a bake)")
        return {"CANCELLED"}
    except Exception as error:  # noqa: BLE001
        return report_exception(operator, error, "Bake failed")
    export = job.export
    message = f"Baked {len(export.keyed_objects())} object(s), frames {export.frame_start}-{export.frame_end}"
    if job.freed:
        message += (f"; freed the earlier bake of {len(job.freed)} object(s) it no longer simulates "
                    f"({named(job.freed)})")
    strain = bake_module.strain_summary(job)
    if strain:
        message += f"; {strain}"
    notes = bake_module.bake_warnings(job)
    if notes:
        operator.report({"WARNING"}, "; ".join([message, *notes]))
    else:
        operator.report({"INFO"}, message)
    return {"FINISHED"}


def rig_poll(operator_class, context) -> bool:
    """Poll of the operators that need a rig: an affine body in the context's view layer (the
    reason is shown on the greyed-out button where not)."""
    if context.view_layer is not None and any(ob.abd_body.enabled for ob in context.view_layer.objects):
        return True
    operator_class.poll_message_set("No affine bodies in this view layer: select meshes and use Add Affine Body")
    return False


class ABD_OT_bake(Operator):
    """Simulate the affine bodies and bake their motion to keyframes (Esc cancels)"""

    bl_idname = "abd.bake"
    bl_label = "Bake"
    bl_options = {"REGISTER", "UNDO"}

    require_converged: BoolProperty(
        name="Require Convergence",
        description=("Fail, changing nothing, when a time step did not converge even split into 16 smaller steps; "
                     "untick to keep such a bake (a warning names the frames)"),
        default=True, options={"SKIP_SAVE"},
    )

    _job = None
    _thread = None
    _timer = None
    _error = None
    _done = 0
    _cancel = False

    @classmethod
    def poll(cls, context):
        """Needs an affine body in the view layer."""
        return rig_poll(cls, context)

    # -- synchronous (EXEC_DEFAULT: scripts, the bpy module, blender -b) ------------------
    def execute(self, context):
        """Bake synchronously (scripts, the bpy module, ``blender -b``); errors are reported, never raised."""
        wm = context.window_manager
        with preview.suspended(context.scene):  # the objects' own transforms, not the previewed poses
            job = bake_module.BakeJob(context.scene, context.evaluated_depsgraph_get())
            try:
                job.prepare()
                job.adopt(preview.take_run(context.scene, job.export))
                wm.progress_begin(0, max(job.frame_count, 1))
                try:
                    job.simulate(lambda done, total: wm.progress_update(done))
                finally:
                    wm.progress_end()
            except Exception as error:  # noqa: BLE001 - reported, never raised at the user
                return report_exception(self, error, "Bake failed")
            return write_keys(self, job, self.require_converged)

    # -- modal (INVOKE_DEFAULT from the UI): the solver runs in a worker thread ----------------
    def invoke(self, context, event):
        """From the UI: export, then run the solver in a worker thread (modal); headless: :meth:`execute`."""
        if bpy.app.background or context.window is None:
            return self.execute(context)
        return self._start(context)

    def _start(self, context) -> set:
        """Export, then start the solver thread, the timer and the progress display."""
        self._job = bake_module.BakeJob(context.scene, context.evaluated_depsgraph_get())
        preview.suspend(context.scene)  # until _finish or cancel: the objects' own transforms
        try:
            self._job.prepare()
            self._job.adopt(preview.take_run(context.scene, self._job.export))
        except Exception as error:  # noqa: BLE001
            preview.resume(context.scene)
            return report_exception(self, error, "Bake failed")
        self._done, self._cancel, self._error = 0, False, None
        self._thread = threading.Thread(target=self._run, name="abd-bake", daemon=True)
        wm = context.window_manager
        wm.progress_begin(0, max(self._job.frame_count, 1))
        self._timer = wm.event_timer_add(0.1, window=context.window)
        wm.modal_handler_add(self)
        self._thread.start()
        self._status(context)
        return {"RUNNING_MODAL"}

    def _run(self) -> None:
        """Worker thread: the solver only (no bpy access)."""
        def progress(done, total):
            self._done = done
            return not self._cancel

        try:
            self._job.simulate(progress)
        except BaseException as error:  # noqa: BLE001 - handed to the main thread
            self._error = error

    def _status(self, context) -> None:
        if self._job.compiling:
            text = "ABD bake: compiling the solver (first use only)   (Esc to cancel)"
        else:
            text = f"ABD bake: frame {self._done} / {self._job.frame_count}   (Esc to cancel)"
        context.workspace.status_text_set(text)

    def modal(self, context, event):
        """Timer ticks update the progress and finish when the worker is done; Esc cancels."""
        if event.type == "ESC" and event.value == "PRESS":
            self._cancel = True
        if event.type == "TIMER":
            context.window_manager.progress_update(self._done)
            self._status(context)
            if not self._thread.is_alive():
                return self._finish(context)
        if event.type in {"MIDDLEMOUSE", "WHEELUPMOUSE", "WHEELDOWNMOUSE", "MOUSEMOVE", "TRACKPADPAN", "TRACKPADZOOM"}:
            return {"PASS_THROUGH"}
        return {"RUNNING_MODAL"}

    def _finish(self, context) -> set:
        """Main thread, after the worker ended: write keys, or report the cancel / error."""
        wm = context.window_manager
        wm.event_timer_remove(self._timer)
        wm.progress_end()
        context.workspace.status_text_set(None)
        from ..solver.simulation import SimulationCancelled

        try:  # the keys are written while the preview is still suspended
            # Esc counts whenever it came before this point, also after the solver had finished (a
            # status bar that offers "Esc to cancel" until the next timer tick must honour it).
            if isinstance(self._error, SimulationCancelled) or self._cancel:
                self.report({"WARNING"}, "Bake cancelled: nothing was changed")
                return {"CANCELLED"}
            if self._error is not None:
                return report_exception(self, self._error, "Bake failed")
            return write_keys(self, self._job, self.require_converged)
        finally:
            preview.resume(self._job.scene)

    def cancel(self, context):
        """Blender is closing the operator (window closed): stop the worker."""
        self._cancel = True
        if self._thread is not None:
            self._thread.join()
        wm = context.window_manager
        if self._timer is not None:
            wm.event_timer_remove(self._timer)
        wm.progress_end()
        context.workspace.status_text_set(None)
        preview.resume(self._job.scene)


class ABD_OT_bake_free(Operator):
    """Remove the bake: put back the animation the objects had before it"""

    bl_idname = "abd.bake_free"
    bl_label = "Free Bake"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context):
        """Needs a scene."""
        return context.scene is not None

    def execute(self, context):
        """Free the bake of every baked object of the scene."""
        try:
            count = bake_module.free_bake(context.scene)
        except Exception as error:  # noqa: BLE001
            return report_exception(self, error, "Free Bake failed")
        if count == 0:
            self.report({"INFO"}, "Nothing is baked")
            return {"CANCELLED"}
        self.report({"INFO"}, f"Freed the bake of {count} object(s)")
        return {"FINISHED"}


class ABD_OT_export_scene(Operator, ExportHelper):
    """Write the solver's scene file (JSON) of this scene, for `python -m solver run`"""

    bl_idname = "abd.export_scene"
    bl_label = "Export Scene File"
    bl_options = {"REGISTER"}

    filename_ext = ".json"
    filter_glob: StringProperty(default="*.json", options={"HIDDEN"})

    @classmethod
    def poll(cls, context):
        """Needs an affine body in the view layer."""
        return rig_poll(cls, context)

    def execute(self, context):
        """Export the rig and write the solver's JSON scene file to ``filepath`` (meshes of more than
        1000 vertices to ``<stem>_meshes.npz`` beside it, :func:`solver.scene_io.save_scene`)."""
        from ..solver.scene_io import save_scene

        try:
            with preview.suspended(context.scene):
                export = bake_module.BakeJob(context.scene, context.evaluated_depsgraph_get()).prepare()
            arrays_path = save_scene(export.scene, self.filepath)
        except Exception as error:  # noqa: BLE001
            return report_exception(self, error, "Export failed")
        arrays_note = f" and its big meshes to {arrays_path}" if arrays_path else ""
        self.report({"INFO"}, f"Wrote {self.filepath}{arrays_note}")
        return {"FINISHED"}


class ABD_OT_apply_trajectory(Operator, ImportHelper):
    """The Apply Trajectory File operator: keys from a trajectory file instead of a simulation."""

    bl_idname = "abd.apply_trajectory"
    bl_label = "Apply Trajectory File"
    bl_description = ("Bake from a trajectory file computed elsewhere (python -m solver run on this rig's exported "
                      "scene file, on a render farm): keys as the Bake writes them")
    bl_options = {"REGISTER", "UNDO"}

    filename_ext = ".npz"
    filter_glob: StringProperty(default="*.npz", options={"HIDDEN"})
    require_converged: BoolProperty(
        name="Require Convergence",
        description="Refuse, changing nothing, a trajectory in which a time step did not converge",
        default=True, options={"SKIP_SAVE"},
    )

    @classmethod
    def poll(cls, context):
        """Needs an affine body in the view layer."""
        return rig_poll(cls, context)

    def execute(self, context):
        """Export the rig, check that the file was computed for it, write its keys (as Bake)."""
        with preview.suspended(context.scene):
            job = bake_module.BakeJob(context.scene, context.evaluated_depsgraph_get())
            try:
                job.prepare()
                job.load_trajectory(self.filepath)
            except Exception as error:  # noqa: BLE001 - reported, never raised at the user
                return report_exception(self, error, "Bake failed")
            return write_keys(self, job, self.require_converged)


class ABD_OT_compile_solver(Operator):
    """The Compile Solver operator: the solver's kernels into this machine's cache."""

    bl_idname = "abd.compile_solver"
    bl_label = "Compile Solver"
    bl_description = ("Compile the solver's kernels into this machine's cache now, so that every bake loads them "
                      "(for blender -b set-ups; an interactive session does it in the background)")
    bl_options = {"REGISTER"}

    def execute(self, context):
        """Wait for a background warm-up of this session, then compile (or load) every kernel
        in this process and write the warm-up marker (:func:`.warmup.warm_up_here`)."""
        start = time.perf_counter()
        try:
            warmup.wait()
            cache = warmup.warm_up_here(extension_package(), extension_root())
        except Exception as error:  # noqa: BLE001
            return report_exception(self, error, "Compiling the solver failed")
        self.report({"INFO"}, f"Solver ready in {time.perf_counter() - start:.1f} s (cache: {cache})")
        return {"FINISHED"}


CLASSES = (
    ABD_OT_body_add,
    ABD_OT_body_remove,
    ABD_OT_connect,
    ABD_OT_bake,
    ABD_OT_bake_free,
    ABD_OT_export_scene,
    ABD_OT_apply_trajectory,
    ABD_OT_compile_solver,
)
