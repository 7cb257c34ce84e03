"""Names that several of the add-on's modules share, kept apart so that none imports another for them."""

#: The custom property on a joint Empty that holds its baked readout, per solver joint type: the
#: reported distance (m) of a prismatic joint, the reported angle (rad) of a revolute one, and
#: the rotation vector (3 numbers: axis times angle, rad) of a spherical (Ball) joint's child
#: relative to its parent since the first frame, in the parent's axes as they were then.
READOUT_PROPERTIES = {"prismatic": "abd_distance", "revolute": "abd_angle", "spherical": "abd_rotation"}
