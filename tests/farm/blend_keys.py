"""Print the keyframes of .blend files as one JSON line (a helper of the farm tests, run in its own process).

``python tests/farm/blend_keys.py A.blend B.blend`` prints ``{file: {object: {"data_path[index]":
[frame, value, frame, value, ...]}}}`` for every F-curve of every object's action (the baked
transforms and the joints' ``abd_distance`` / ``abd_angle``), read with the calls that work on
Blender 4.4 and later. Ends with ``os._exit`` (bpy 4.5 can hang at interpreter exit).
"""

import json
import os
import sys

import bpy
from bpy_extras import anim_utils

keys = {}
for path in sys.argv[1:]:
    bpy.ops.wm.open_mainfile(filepath=path, load_ui=False)
    curves = keys[path] = {}
    for ob in bpy.data.objects:
        data = ob.animation_data
        if data is None or data.action is None:
            continue
        for fcurve in anim_utils.action_get_channelbag_for_slot(data.action, data.action_slot).fcurves:
            co = [0.0] * (2 * len(fcurve.keyframe_points))
            fcurve.keyframe_points.foreach_get("co", co)
            curves.setdefault(ob.name, {})[f"{fcurve.data_path}[{fcurve.array_index}]"] = co
print(json.dumps(keys))
sys.stdout.flush()
os._exit(0)
