"""Names that several of the add-on's modules share, kept apart so that none imports another for them."""

#: The custom property on a joint Empty that holds its baked readout, per joint type: the
#: reported distance (m) of a prismatic joint, the reported angle (rad) of a revolute one.
READOUT_PROPERTIES = {"prismatic": "abd_distance", "revolute": "abd_angle"}
