"""Generates a benchmark store once: `python -m bench.generate --actions N [--due N]`."""

from __future__ import annotations

import argparse

from bench.server import bench_server
from testbed.generate import generate, is_generated
from testbed.store_profile import StoreProfile


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--actions", type=int, required=True)
    parser.add_argument("--due", type=int, default=StoreProfile.due)
    parser.add_argument(
        "--future-share",
        type=float,
        default=StoreProfile.future_share,
        help="share of actions pending in the future (scheduled renewals)",
    )
    parser.add_argument("--force", action="store_true", help="generate even if it exists")
    arguments = parser.parse_args()
    profile = StoreProfile(
        arguments.actions, due=arguments.due, future_share=arguments.future_share
    )
    with bench_server() as server, server.connect(local_infile=True) as connection:
        if is_generated(connection, profile) and not arguments.force:
            print(f"{profile.name}: already generated")
            return
        seconds = generate(connection, profile)
    print(f"{profile.name}: generated in {seconds:.1f} s")


if __name__ == "__main__":
    main()
