"""Parent selection (pymoo's `TournamentSelection` with our comparison)."""
