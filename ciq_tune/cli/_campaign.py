"""`ciq-tune tune A.yaml B.yaml … [--shapes …]`: a campaign of searches at once."""

from __future__ import annotations

import argparse

from ciq_tune.cli.tune import ray_init
from ciq_tune.errors import CiqTuneError


def tune_campaign_command(args: argparse.Namespace) -> int:
    """Run one search per description (× shape) at once on the Ray cluster; print and write
    the table of searches (OUT/campaign.csv). Exit status 1 when a search did not finish."""
    import ray
    from pydantic import ValidationError

    from searchers.campaign import CampaignConfig
    from searchers.campaign import expand_searches
    from searchers.campaign import run_campaign

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
    ray_init(args.address, args.num_cpus, args.verbose)
    try:
        rows = run_campaign(searches, config)
    finally:
        ray.shutdown()
    for row in rows:
        print(
            f"{row['name']}: {row['status']}, {row.get('evaluations')} evaluations, "
            f"{row.get('metric', '')} baseline {row.get('baseline')} best {row.get('best')}"
            + (f" ({row['error']})" if row.get("error") else "")
        )
    print(f"wrote {args.out / 'campaign.csv'}")
    return 0 if all(row["status"] == "done" for row in rows) else 1
