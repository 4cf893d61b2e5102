"""CompileIQ's published multi-objective search, unchanged except for the imports.

    python examples/compileiq_compat/multi_objective.py

Source: CompileIQ's getting-started guide, "Multi-Objective Searches" (two scores, Pareto
front), in the v1.0 API style (`num_objectives` in `SearchConfiguration`, `Search(...)`,
`knockout_prob`). `Search.multi_objective(..., num_objectives=2)` of the older guide works too.
"""
# The code below is CompileIQ's, verbatim but for the imports: keep its layout.
# ruff: noqa: I001
# fmt: off

from ciq_tune import Search, SearchConfiguration
import ciq_tune.space as ss

def multiobjective(config):
    score_1 = config["x"] ** 2 + config["y"]
    score_2 = config["y"] ** 2 + config["x"]
    return score_1, score_2 # returning two scores


search_space_config = {
    "x": ss.range(start=1.0, end=20.0, step=0.5),  # Continuous range
    "y": ss.choice([1, 2, 3]),  # Discrete choices
    "z": ss.literal(const_value="constant", knockout_prob=0.5),  # Binary parameter
}

main_config = SearchConfiguration(
    pool_size=12,
    generations=3,
    mutate_rate=0.5,
    problem_type="min",
    num_objectives=2,
)

tuner = Search(
    objective_function=multiobjective,
    search_space=search_space_config,
    search_config=main_config,
)

results = tuner.start()
print(results.pareto_front())
