"""CompileIQ's published getting-started search (x² + y), unchanged except for the imports.

    python examples/compileiq_compat/getting_started.py

Source: https://nvidia.github.io/CompileIQ/v1.0/getting_started.html ("Create Your First
Search"). Only the three import lines differ; the search runs on Ray Tune with
CompileIQSearcher.
"""
# The code below is CompileIQ's, verbatim but for the imports: keep its layout.
# ruff: noqa: I001
# fmt: off

from ciq_tune import Search, SearchConfiguration
import ciq_tune.space as ss

# Define the objective function to minimize
def objective(config):
    score = config["x"] ** 2 + config["y"]
    return score

# Define the search space
search_space_config = {
    "x": ss.range(start=1.0, end=20.0, step=0.5),  # Continuous range
    "y": ss.choice([1, 2, 3]),  # Discrete choices
    "z": ss.literal(const_value="constant", knockout_prob=0.5),  # Binary parameter
}

# Configure the search
main_config = SearchConfiguration(
    pool_size=12,  # Size of population
    generations=3,  # Number of iterations
    mutate_rate=0.5,  # Mutation probability
    problem_type="min",  # Minimize objective
    num_objectives=1,  # Single objective
)

# Create and run the search
tuner = Search(
    objective_function=objective,
    search_space=search_space_config,
    search_config=main_config,
)
results = tuner.start()
print(f"Best Result: {results.get_best_result()}")
