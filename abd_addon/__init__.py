"""The Blender half of ABD Joints: properties, operators, panels, export, bake, preview, overlay, batch.

This package is imported as ``bl_ext.<repo>.abd_joints.abd_addon`` (the repository root is the
extension) and reaches the solver by relative import (``from .. import solver``).

:func:`register` is the one place that registers every module's ``CLASSES`` tuple, in order
(PropertyGroups first), then the ``PointerProperty`` slots on ``Object``/``Scene``, then the
File > Import and Object > Rigid Body menu entries and the viewport overlay handler, and (in an
interactive session) the playback preview's handlers (:mod:`.preview`) and the background
compilation of the solver (:mod:`.warmup`); :func:`unregister` undoes all of it in reverse.

Submodules are imported inside :func:`register`, not at import time, so that
``python -m abd_addon.batch`` can start from this package without the extension around it.
"""

from __future__ import annotations

from .extension import configure_numba_cache, extension_package, extension_root

__all__ = ["configure_numba_cache", "extension_package", "extension_root", "register", "unregister"]

_registered: list = []


def register() -> None:
    """Register properties, operators, panels and the overlay handler."""
    import bpy

    configure_numba_cache()
    from . import convert, mjcf_import, operators, overlay, preview, properties, ui, urdf_import, warmup

    if not bpy.app.background:  # an artist's session: compile the solver before the first Bake
        warmup.start(extension_package(), extension_root())

    for module in (properties, operators, urdf_import, mjcf_import, convert, ui):
        for cls in module.CLASSES:
            bpy.utils.register_class(cls)
            _registered.append(cls)
    for owner, name, group in properties.POINTERS:
        setattr(owner, name, bpy.props.PointerProperty(type=group, override=properties.OVERRIDABLE))
    urdf_import.register_menu()
    mjcf_import.register_menu()
    convert.register_menu()
    overlay.register()
    if not bpy.app.background:  # no playback without an event loop; tests install it themselves
        preview.register()


def unregister() -> None:
    """Undo :func:`register`, in reverse order."""
    import bpy

    from . import convert, mjcf_import, overlay, preview, properties, urdf_import

    preview.unregister()
    overlay.unregister()
    convert.unregister_menu()
    mjcf_import.unregister_menu()
    urdf_import.unregister_menu()
    for owner, name, _group in reversed(properties.POINTERS):
        if hasattr(owner, name):
            delattr(owner, name)
    while _registered:
        bpy.utils.unregister_class(_registered.pop())
