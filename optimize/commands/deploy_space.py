"""`python -m optimize deploy-space`: the app uploaded to a Space that serves the pushed repos."""
from __future__ import annotations

import argparse
import sys

NAME = "deploy-space"
HELP = "upload the app to a Space that serves the pushed repos"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--space", help="ORG/NAME of the Space (default: $HF_SPACE)")
    parser.add_argument("--hub-prefix", help="the --repo-prefix given to push (default: $SHOWDOWN_HUB_PREFIX)")
    parser.add_argument("--device", choices=("cpu", "gpu"), default="cpu",
                        help="the Space's hardware: gpu installs requirements-gpu.txt (CUDA builds of ONNX Runtime)")
    parser.add_argument("--private", action="store_true")


def run(args: argparse.Namespace) -> int:
    from huggingface_hub.errors import HfHubHTTPError

    from models.errors import ConfigError
    from optimize.publish.space import run as deploy

    try:
        return deploy(args.space, args.hub_prefix, args.device, args.private)
    except (ConfigError, HfHubHTTPError) as error:  # a bad token or name: the Hub's message, no trace
        print(f"error: {error}", file=sys.stderr)
        return 2
