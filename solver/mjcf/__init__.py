"""MJCF (MuJoCo) import: :func:`import_mjcf` reads a model through MuJoCo's own compiler (docs/mjcf.md)."""

from .importer import DEFAULT_STRENGTH_RATIO, MjcfError, MjcfImport, MjcfWarning, import_mjcf

__all__ = ["DEFAULT_STRENGTH_RATIO", "MjcfError", "MjcfImport", "MjcfWarning", "import_mjcf"]
