"""Mutation operators (pymoo `Mutation` subclasses)."""
