"""Names that several of the add-on's modules share, kept apart so that none imports another for them."""

#: The custom property on a joint Empty that holds its baked readout, per solver joint type: the
#: reported distance (m) of a prismatic joint, the reported angle (rad) of a revolute one, and
#: the rotation vector (3 numbers: axis times angle, rad) of a spherical (Ball) joint's child
#: relative to its parent since the first frame, in the parent's axes as they were then; and
#: whether a breakable Generic joint has broken (0 before the frame it broke in, 1 from it on;
#: an unbreakable one has none).
READOUT_PROPERTIES = {"prismatic": "abd_distance", "revolute": "abd_angle", "spherical": "abd_rotation",
                      "generic": "abd_broken"}

#: An object's transform properties: what a bake keys (and saves before, for Free Bake).
TRANSFORM_PROPERTIES = ("location", "rotation_euler", "rotation_quaternion", "rotation_axis_angle", "scale")

#: Properties whose drivers would override a bake's keys: the transform and its deltas (which
#: the bake leaves as they are).
TRANSFORM_PATHS = TRANSFORM_PROPERTIES + ("delta_location", "delta_rotation_euler", "delta_rotation_quaternion",
                                          "delta_scale")
