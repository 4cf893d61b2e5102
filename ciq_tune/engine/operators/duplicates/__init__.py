"""Duplicate elimination against the archive (pymoo `DuplicateElimination` subclasses)."""
