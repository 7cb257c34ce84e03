"""ABD Joints: the Blender extension entry point.

The repository root is the extension; Blender imports it as ``bl_ext.<repo>.abd_joints``. This
file only forwards :func:`register` and :func:`unregister` to :mod:`.abd_addon` (relative imports
only, as extensions require). The solver lives next to it in :mod:`.solver`.
"""


def register():
    """Register the add-on's classes, properties and handlers with Blender."""
    from . import abd_addon

    abd_addon.register()


def unregister():
    """Remove everything :func:`register` added, in reverse order."""
    from . import abd_addon

    abd_addon.unregister()
