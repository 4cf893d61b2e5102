"""`SpaceProblem`: the pymoo view of a `SearchSpace` that every operator receives."""

from __future__ import annotations

from pymoo.core.problem import Problem

from ciq_tune.space import SearchSpace


class SpaceProblem(Problem):
    """`n_var` genes of object type (index, float or None for knocked out), evaluated outside
    pymoo: the engine asks and tells, pymoo only varies and selects."""

    def __init__(self, space: SearchSpace, n_obj: int) -> None:
        super().__init__(n_var=len(space), n_obj=n_obj, n_ieq_constr=0, vtype=object)
        self.space = space
