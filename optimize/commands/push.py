"""`python -m optimize push`: every ready variant uploaded to the Hub, one repo each, with its card."""
from __future__ import annotations

import argparse

NAME = "push"
HELP = "upload every ready variant to the Hub, one repo each, with cards"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--repo-prefix", required=True, help="ORG/NAME: repos ORG/NAME-<task>-<variant>")
    parser.add_argument("--private", action="store_true")


def run(args: argparse.Namespace) -> int:
    from optimize.publish.push import push

    for repo in push(args.repo_prefix, private=args.private):
        print(repo)
    return 0
