"""`python -m optimize deploy-space`: the app uploaded to a Space that serves the pushed repos."""
from __future__ import annotations

import argparse

NAME = "deploy-space"
HELP = "upload the app to a Space that serves the pushed repos"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--space", help="ORG/NAME of the Space (default: $HF_SPACE)")
    parser.add_argument("--hub-prefix", help="the --repo-prefix given to push (default: $SHOWDOWN_HUB_PREFIX)")
    parser.add_argument("--device", choices=("cpu", "gpu"), default="cpu",
                        help="the Space's hardware: gpu installs requirements-gpu.txt (CUDA builds of ONNX Runtime)")
    parser.add_argument("--private", action="store_true", help="make the Space private")
    parser.add_argument("--token-secret", action="store_true",
                        help="store this token (it can write) as the Space's secret HF_TOKEN, which private variant "
                             "repos need; a read token set in the Space's settings is safer")


def run(args: argparse.Namespace) -> int:
    from optimize.publish.space import run as deploy

    return deploy(args.space, args.hub_prefix, args.device, args.private, args.token_secret)  # a bad token or name: one line (__main__)
