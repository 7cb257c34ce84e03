"""The bake pipeline: the rig read from the scene, the scene description, the solver run, the keys.

Modules, in the order data flows through them: ``rig_rules`` (the rig and the bake's refusal rules),
``sampling`` (per-frame values), ``export`` (bpy -> Scene), ``bake`` (``BakeJob``), ``keys`` (trajectory
-> key values), ``fcurves`` (Actions and F-curves), ``snapshot`` (object state around a bake).
"""
