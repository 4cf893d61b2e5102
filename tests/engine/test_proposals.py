"""The archive of proposed configurations: unique ids, duplicates refused, JSON round trip."""

from __future__ import annotations

import json

import ciq_tune.space as ss
from ciq_tune.engine.proposals import Candidate
from ciq_tune.engine.proposals import ProposalArchive
from ciq_tune.space import SearchSpace

SPACE = SearchSpace(
    {"a": ss.range(0, 9), "f": ss.literal("-f", knockout_prob=0.5)}, constraints=["a <= 5"]
)


def _genes(a: int, f: bool) -> tuple:
    return SPACE.encode({"a": a, "f": "-f"} if f else {"a": a})


def test_a_configuration_is_proposed_once_with_consecutive_ids() -> None:
    archive = ProposalArchive(SPACE)
    first = archive.candidate(_genes(3, True), "random", generation=0)
    second = archive.candidate(_genes(3, False), "offspring", generation=2)
    assert first is not None and second is not None
    assert (first.id, second.id) == (0, 1)
    assert second.generation == 2 and second.origin == "offspring"
    assert archive.candidate(_genes(3, True), "offspring", generation=1) is None
    assert archive.next_id == 2


def test_new_genes_drops_infeasible_repeated_and_archived_rows() -> None:
    archive = ProposalArchive(SPACE)
    archive.candidate(_genes(1, False), "random", generation=0)
    rows = [_genes(1, False), _genes(2, False), _genes(2, False), _genes(8, False)]
    assert archive.new_genes(rows) == [_genes(2, False)]
    assert archive.next_id == 1  # nothing was proposed


def test_restore_and_candidate_json_round_trip() -> None:
    archive = ProposalArchive(SPACE)
    candidate = archive.candidate(_genes(4, True), "initial", generation=0)
    assert candidate is not None
    data = json.loads(json.dumps(candidate.to_json()))
    assert Candidate.from_json(data) == candidate
    restored = ProposalArchive(SPACE)
    restored.restore([(candidate.genes, candidate.key)], next_id=archive.next_id)
    assert restored.candidate(_genes(4, True), "random", generation=1) is None
    assert restored.candidate(_genes(5, True), "random", generation=1).id == 1  # type: ignore[union-attr]
