"""`python -m optimize push`: every ready variant uploaded to the Hub, one repo each, with its card."""
from __future__ import annotations

import argparse
import sys

NAME = "push"
HELP = "upload every ready variant to the Hub, one repo each, with cards"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--repo-prefix", required=True, help="ORG/NAME: repos ORG/NAME-<task>-<variant>")
    parser.add_argument("--private", action="store_true", help="make the repos private (existing ones too)")
    parser.add_argument("--allow-unmeasured", action="store_true",
                        help="also push variants whose accuracy was never measured (built with --no-eval)")


def run(args: argparse.Namespace) -> int:
    from optimize.publish.push import push

    pushed = push(args.repo_prefix, private=args.private, allow_unmeasured=args.allow_unmeasured)
    for repo in pushed:
        print(repo)
    if not pushed:
        print("error: nothing was pushed (the lines above say why for each variant)", file=sys.stderr)
        return 1
    return 0
