"""File > Import > MJCF as ABD Rig: a MuJoCo model as affine bodies and ABD joints.

The model is read and compiled by MuJoCo (:func:`solver.mjcf.import_mjcf`, docs/mjcf.md); the
Blender objects are made as the URDF import makes them (:func:`.urdf_import.build_rig`). What the
scene cannot represent is reported as warnings.
"""

from __future__ import annotations

import traceback
import warnings
from pathlib import Path

import bpy
from bpy.props import FloatProperty, StringProperty
from bpy.types import Operator
from bpy_extras.io_utils import ImportHelper

from ..solver.mjcf import DEFAULT_STRENGTH_RATIO, MjcfError, MjcfWarning, import_mjcf
from .rig import new_object_collection
from .urdf_import import build_rig


class IMPORT_SCENE_OT_abd_mjcf(Operator, ImportHelper):
    """Import a MuJoCo (MJCF) model as affine bodies joined by ABD joints (bodies, inertias, joints, actuators)"""

    bl_idname = "import_scene.abd_mjcf"
    bl_label = "Import MJCF as ABD Rig"
    bl_options = {"REGISTER", "UNDO"}

    filename_ext = ".xml"
    filter_glob: StringProperty(default="*.xml;*.mjcf", options={"HIDDEN"})

    strength_ratio: FloatProperty(
        name="Joint Strength Ratio", description="γ of every joint: K = γ (m_parent + m_child)",
        default=DEFAULT_STRENGTH_RATIO, min=0.0, soft_max=1000.0,
    )

    def execute(self, context):
        """Read the file, then build the rig; errors are reported and leave the scene unchanged."""
        path = Path(self.filepath)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", MjcfWarning)
                result = import_mjcf(path, strength_ratio=self.strength_ratio)
        except MjcfError as error:
            self.report({"ERROR"}, f"MJCF import failed: {error}")
            return {"CANCELLED"}
        except ImportError as error:
            self.report({"ERROR"}, f"MJCF import needs the Python package mujoco, which is missing here ({error}); "
                                   "pip install it into Blender's Python")
            return {"CANCELLED"}
        except Exception as error:  # noqa: BLE001 - reported, never raised at the user
            traceback.print_exception(type(error), error, error.__traceback__)
            self.report({"ERROR"}, f"MJCF import failed: unexpected {type(error).__name__}: {error} "
                                   "(details in the console)")
            return {"CANCELLED"}
        try:
            rig = build_rig(result, new_object_collection(context), result.model_name or path.stem)
        except Exception as error:  # noqa: BLE001
            traceback.print_exception(type(error), error, error.__traceback__)
            self.report({"ERROR"}, f"MJCF import failed while creating objects: {type(error).__name__}: {error}")
            return {"CANCELLED"}
        for ob in context.selected_objects:
            ob.select_set(False)
        visible = [ob for ob in rig.objects() if context.view_layer.objects.get(ob.name) == ob]
        for ob in visible:
            ob.select_set(True)
        if visible:
            context.view_layer.objects.active = visible[0]
        for message in result.unsupported:
            self.report({"WARNING"}, message)
        self.report({"INFO"}, f"Imported '{rig.collection.name}': {len(rig.bodies)} bodies, {len(rig.joints)} joints"
                              + (f", {len(result.unsupported)} not represented" if result.unsupported else ""))
        return {"FINISHED"}


def menu_import(self, context) -> None:
    """File > Import entry."""
    self.layout.operator(IMPORT_SCENE_OT_abd_mjcf.bl_idname, text="MJCF as ABD Rig (.xml)")


def register_menu() -> None:
    """Add the File > Import entry (call after the operator class is registered)."""
    bpy.types.TOPBAR_MT_file_import.append(menu_import)


def unregister_menu() -> None:
    """Remove the File > Import entry."""
    bpy.types.TOPBAR_MT_file_import.remove(menu_import)


CLASSES = (IMPORT_SCENE_OT_abd_mjcf,)
