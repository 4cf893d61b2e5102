"""A campaign run (`ciq-tune tune A.yaml B.yaml … [--shapes …]`): one search per description
(× shape) at once on the Ray cluster (`searchers.campaign`), and its table of searches."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ciq_tune.errors import CiqTuneError
from searchers.run.interrupt import graceful_interrupt
from searchers.run.interrupt import report_kept
from searchers.run.setup import ray_session

if TYPE_CHECKING:
    from searchers.run.options import TuneOptions


def tune_campaign(options: TuneOptions) -> int:
    """Run one search per description (× shape) at once on the Ray cluster; print and write
    the table of searches (OUT/campaign.csv). Exit status 1 when a search did not finish, 130
    when a Ctrl+C stopped the campaign (every search's finished evaluations written)."""
    from pydantic import ValidationError

    from searchers.campaign import run_campaign
    from searchers.campaign_specs import CampaignConfig
    from searchers.campaign_specs import expand_searches

    try:
        searches = expand_searches(
            list(options.descriptions),
            shapes=options.shapes,
            budget=options.evaluations,
            seed=options.seed,
        )
        config = CampaignConfig(
            out=options.out,
            benchmark=options.benchmark,
            tracking=options.tracking,
            search_timeout_s=options.search_timeout,
        )
    except (ValueError, ValidationError) as exc:
        raise CiqTuneError(str(exc)) from exc
    if options.validate_top:
        print("campaign: --validate-top is not applied per search; run `ciq-tune validate`")
    print(f"campaign: {len(searches)} searches of {options.evaluations} evaluations", flush=True)
    # No Tune run in this process: the searches' own drivers poll the campaign's stop.
    with (
        ray_session(options.address, options.num_cpus, options.verbose),
        graceful_interrupt() as interrupt,
    ):
        rows = run_campaign(searches, config, proceed=lambda: not interrupt.received)
    for row in rows:
        print(
            f"{row['name']}: {row['status']}, {row.get('evaluations')} evaluations, "
            f"{row.get('metric', '')} baseline {row.get('baseline')} best {row.get('best')}"
            + (f" ({row['error']})" if row.get("error") else "")
        )
    print(f"wrote {options.out / 'campaign.csv'}")
    if interrupt.received:
        # The rows of searches that returned (a crashed one wrote no evaluations).
        written = [row for row in rows if "ok" in row]
        return report_kept(
            sum(row["evaluations"] for row in written),
            sum(row["ok"] for row in written),
            f"{options.out / '<search>/evaluations.csv'} and {options.out / 'campaign.csv'}",
            "a campaign does not resume: run `ciq-tune tune` again",
        )
    return 0 if all(row["status"] == "done" for row in rows) else 1
