"""Building a rig from Python: make objects affine bodies and join them with joint Empties.

The operators Add / Remove Affine Body and Connect call these functions; scripts, the importers
and the tests call them too. Nothing here reports or draws: bad input raises
:class:`~.rig_rules.RigError` naming the object, and changes nothing.

A joint Empty has its origin at the joint's anchor (the pivot) and its local Z along the joint
axis; its ``abd_joint`` names the parent (``l_body``) and the child (``r_body``).
"""

from __future__ import annotations

from typing import Optional, Sequence

import bpy
from mathutils import Matrix, Vector
from mathutils.kdtree import KDTree

from .properties import JOINT_TYPE_ITEMS, MOTION_ITEMS, store_groups
from .rig_rules import RigError

#: How a new joint Empty of each type is drawn: an arrow along a prismatic or revolute joint's axis.
EMPTY_DISPLAY = {"PRISMATIC": "SINGLE_ARROW", "REVOLUTE": "SINGLE_ARROW", "FIXED": "PLAIN_AXES", "BALL": "SPHERE",
                 "GENERIC": "ARROWS"}

#: Where :func:`connect_objects` puts each joint's pivot (as Connect's Pivot offers it).
PIVOT_TYPES = ("ACTIVE", "CENTER", "CURSOR")

#: Which pairs :func:`connect_objects` joins (as Blender's Connect Rigid Bodies offers them).
CONNECTION_PATTERNS = ("SELECTED_TO_ACTIVE", "CHAIN_DISTANCE")


def new_object_collection(context=None) -> bpy.types.Collection:
    """The collection a new object goes to, as with Blender's Add menu: the active collection, or
    the scene's own (Scene Collection) where the active one takes no new objects, being linked
    from a library or a library override."""
    context = context or bpy.context
    collection = context.collection
    if collection.library is not None or collection.override_library is not None:
        return context.scene.collection
    return collection


def joint_matrix(pivot: Vector, axis: Vector) -> Matrix:
    """World matrix of a joint Empty at ``pivot`` whose local Z is ``axis`` (normalised)."""
    rotation = Vector(axis).normalized().to_track_quat("Z", "Y").to_matrix().to_4x4()
    return Matrix.Translation(Vector(pivot)) @ rotation


def chain_by_distance(root, others: list) -> list:
    """``root``, then again and again the object of ``others`` nearest (by world origin) to the
    last one that is not yet in the chain, as Blender's Connect Rigid Bodies (Chain by Distance)
    orders them; nearest-neighbour queries on a KD-tree (``mathutils.kdtree``)."""
    tree = KDTree(len(others))
    for index, ob in enumerate(others):
        tree.insert(ob.matrix_world.translation, index)
    tree.balance()
    remaining = set(range(len(others)))
    order = [root]
    while remaining:
        last, count = order[-1].matrix_world.translation, 1
        while True:  # the nearest not yet taken: among the 1, 2, 4 ... nearest
            nearest = [index for _, index, _ in tree.find_n(last, count) if index in remaining]
            if nearest or count >= len(others):
                break
            count *= 2
        remaining.discard(nearest[0])
        order.append(others[nearest[0]])
    return order


def _check_editable(ob) -> None:
    if not ob.is_editable:
        raise RigError(f"Object '{ob.name}' is linked from a library: make it local or give it a library override")


def add_body(ob, motion: Optional[str] = None) -> None:
    """Make the mesh object ``ob`` an affine body (``abd_body.enabled``), its property groups
    stored (:func:`.properties.store_groups`); ``motion`` ('DYNAMIC' or 'FIXED'), when given,
    sets ``abd_body.motion``.

    Raises :class:`RigError` naming ``ob`` when it is not a mesh, is linked from a library, or
    ``motion`` is unknown.
    """
    if ob.type != "MESH":
        raise RigError(f"Object '{ob.name}' is not a mesh ({ob.type.title()}): only meshes can be affine bodies")
    _check_editable(ob)
    motions = [identifier for identifier, *_ in MOTION_ITEMS]
    if motion is not None and motion not in motions:
        raise RigError(f"Object '{ob.name}': unknown motion {motion!r} (one of {', '.join(motions)})")
    ob.abd_body.enabled = True
    if motion is not None:
        ob.abd_body.motion = motion
    store_groups(ob)


def remove_body(ob) -> None:
    """Stop simulating ``ob`` as an affine body (``abd_body.enabled`` off; its settings stay).

    Raises :class:`RigError` naming ``ob`` when it is linked from a library.
    """
    _check_editable(ob)
    ob.abd_body.enabled = False


def check_body(ob) -> None:
    """Raise :class:`RigError` naming ``ob`` unless it is an affine body (a mesh with ``abd_body`` on)."""
    if ob is None:
        raise RigError("A joint needs two affine bodies: got None")
    if ob.type != "MESH" or not ob.abd_body.enabled:
        raise RigError(f"Object '{ob.name}' is not an affine body: use Add Affine Body first")


def connect(l_obj, r_obj, joint_type: str = "REVOLUTE", pivot=None, axis=(0.0, 0.0, 1.0), *,
            name: Optional[str] = None, collection: Optional[bpy.types.Collection] = None):
    """A new joint Empty of ``joint_type`` ('REVOLUTE', 'PRISMATIC', 'BALL', 'FIXED', 'GENERIC') from the
    parent ``l_obj`` to the child ``r_obj``: origin at ``pivot`` (world, m; default halfway
    between the two origins), local Z along ``axis`` (world direction), named ``name`` (default
    ``Joint_<parent>_<child>``), linked into ``collection`` (default :func:`new_object_collection`).

    Returns the Empty. Raises :class:`RigError` naming the object when either is not an affine
    body, or on an unknown ``joint_type`` or a zero ``axis``; nothing is created then.
    """
    check_body(l_obj)
    check_body(r_obj)
    if l_obj == r_obj:
        raise RigError(f"Object '{l_obj.name}' cannot be joined to itself")
    types = [identifier for identifier, *_ in JOINT_TYPE_ITEMS]
    if joint_type not in types:
        raise RigError(f"Joint '{l_obj.name}'-'{r_obj.name}': unknown type {joint_type!r} (one of {', '.join(types)})")
    axis = Vector(axis)
    if axis.length == 0.0:
        raise RigError(f"Joint '{l_obj.name}'-'{r_obj.name}': the axis is zero")
    if pivot is None:
        pivot = (l_obj.matrix_world.translation + r_obj.matrix_world.translation) / 2.0
    empty = bpy.data.objects.new(name or f"Joint_{l_obj.name}_{r_obj.name}", None)
    try:
        empty.empty_display_type = EMPTY_DISPLAY[joint_type]
        empty.empty_display_size = 0.5
        empty.matrix_world = joint_matrix(Vector(pivot), axis)
        (collection or new_object_collection()).objects.link(empty)
        joint = empty.abd_joint
        joint.enabled = True
        joint.type = joint_type
        joint.l_body = l_obj
        joint.r_body = r_obj
        store_groups(empty)
    except BaseException:
        bpy.data.objects.remove(empty)
        raise
    return empty


def connect_objects(objects: Sequence, root, pattern: str = "SELECTED_TO_ACTIVE", joint_type: str = "REVOLUTE",
                    pivot_type: str = "CENTER", axis=(0.0, 0.0, 1.0), *, cursor=None,
                    collection: Optional[bpy.types.Collection] = None) -> list:
    """Join ``objects`` with joint Empties as Connect's Connection Pattern says: each to ``root``
    ('SELECTED_TO_ACTIVE'), or in a chain from ``root``, each to the nearest not yet in it
    ('CHAIN_DISTANCE', :func:`chain_by_distance`); in each joint the body nearer ``root`` is the
    parent. Pivot per joint (``pivot_type``): the parent's origin ('ACTIVE'), the midpoint
    ('CENTER') or ``cursor`` ('CURSOR', world, m; default the scene's 3D cursor).

    Returns the new Empties in order. Raises :class:`RigError` naming the object when one is not
    an affine body, ``root`` is not among ``objects``, or a choice is unknown; all or nothing:
    no Empty is left after a failure.
    """
    objects = list(objects)
    for ob in objects:
        check_body(ob)
    if root not in objects:
        raise RigError(f"Object '{getattr(root, 'name', root)}' (the root) is not among the objects to connect")
    if pattern not in CONNECTION_PATTERNS:
        raise RigError(f"Unknown connection pattern {pattern!r} (one of {', '.join(CONNECTION_PATTERNS)})")
    if pivot_type not in PIVOT_TYPES:
        raise RigError(f"Unknown pivot type {pivot_type!r} (one of {', '.join(PIVOT_TYPES)})")
    others = [ob for ob in objects if ob != root]
    if pattern == "CHAIN_DISTANCE":
        chain = chain_by_distance(root, others)
        pairs = list(zip(chain[:-1], chain[1:]))
    else:
        pairs = [(root, ob) for ob in others]
    if pivot_type == "CURSOR" and cursor is None:
        cursor = bpy.context.scene.cursor.location
    joints = []
    try:
        for parent, child in pairs:
            if pivot_type == "ACTIVE":
                pivot = parent.matrix_world.translation.copy()
            elif pivot_type == "CURSOR":
                pivot = Vector(cursor)
            else:
                pivot = None
            joints.append(connect(parent, child, joint_type, pivot, axis, collection=collection))
    except BaseException:
        for empty in joints:
            bpy.data.objects.remove(empty)
        raise
    return joints
