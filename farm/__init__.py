"""Baking many .blend files on a farm: each farm manager's own job format, all running the batch bake.

- ``dask_bake.py``: one Dask task per file on a ``distributed`` cluster (``python -m
  abd_addon.batch ... --scheduler ADDRESS``, or :func:`farm.dask_bake.bake_on_cluster`);
- ``openjd/abd_bake.template.yaml``: an Open Job Description job template (AWS Deadline Cloud,
  ``openjd run`` locally), and ``openjd/abd_solve.template.yaml``, which solves exported scene
  files with the solver alone (``abd-solver run``);
- ``flamenco/abd_bake.js``: a Flamenco 3 job type.

None of them imports ``bpy`` in the process that submits the work: every bake runs
``python -m abd_addon.batch`` (every solve ``abd-solver run``) in a fresh process on a worker.
README.md, "Baking on a farm", says which to pick and how to prepare the workers.
"""
