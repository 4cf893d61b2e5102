"""`ciq-tune tune A.yaml B.yaml … [--shapes …]`: a campaign of searches at once."""

from __future__ import annotations

import argparse

from ciq_tune.cli._interrupt import graceful_interrupt
from ciq_tune.cli._interrupt import report_kept
from ciq_tune.cli._run import ray_init
from ciq_tune.errors import CiqTuneError


def tune_campaign_command(args: argparse.Namespace) -> int:
    """Run one search per description (× shape) at once on the Ray cluster; print and write
    the table of searches (OUT/campaign.csv). Exit status 1 when a search did not finish, 130
    when a Ctrl+C stopped the campaign (every search's finished evaluations written)."""
    import ray
    from pydantic import ValidationError

    from searchers.campaign import run_campaign
    from searchers.campaign_specs import CampaignConfig
    from searchers.campaign_specs import expand_searches

    try:
        searches = expand_searches(
            args.description, shapes=args.shapes, budget=args.budget, seed=args.seed
        )
        config = CampaignConfig(
            out=args.out,
            benchmark=args.benchmark,
            tracking=args.tracking,
            search_timeout_s=args.search_timeout,
        )
    except (ValueError, ValidationError) as exc:
        raise CiqTuneError(str(exc)) from exc
    if args.validate_top:
        print("campaign: --validate-top is not applied per search; run `ciq-tune validate`")
    print(f"campaign: {len(searches)} searches of {args.budget} evaluations", flush=True)
    started_ray = ray_init(args.address, args.num_cpus, args.verbose)
    try:
        # No Tune run in this process: the searches' own drivers poll the campaign's stop.
        with graceful_interrupt() as interrupt:
            rows = run_campaign(searches, config, proceed=lambda: not interrupt.received)
    finally:
        if started_ray:
            ray.shutdown()
    for row in rows:
        print(
            f"{row['name']}: {row['status']}, {row.get('evaluations')} evaluations, "
            f"{row.get('metric', '')} baseline {row.get('baseline')} best {row.get('best')}"
            + (f" ({row['error']})" if row.get("error") else "")
        )
    print(f"wrote {args.out / 'campaign.csv'}")
    if interrupt.received:
        # The rows of searches that returned (a crashed one wrote no evaluations).
        written = [row for row in rows if "ok" in row]
        return report_kept(
            sum(row["evaluations"] for row in written),
            sum(row["ok"] for row in written),
            f"{args.out / '<search>/evaluations.csv'} and {args.out / 'campaign.csv'}",
            "a campaign does not resume: run `ciq-tune tune` again",
        )
    return 0 if all(row["status"] == "done" for row in rows) else 1
