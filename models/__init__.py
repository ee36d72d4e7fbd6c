"""The runtime: catalog, weight sources, runners, task pre/post-processing, reports.

Importing it bounds PyTorch's OpenMP spin-waiting (libgomp reads GOMP_SPINCOUNT once, when torch
loads it, so this must run first; a value the user set wins). By default PyTorch's idle threads
spin after each op and take the cores from the ONNX Runtime model that runs next in the same
process; a bounded spin count gives that model its cores back (figures: docs/measurements.md).
"""
import os
import sys

if "torch" not in sys.modules:
    os.environ.setdefault("GOMP_SPINCOUNT", "100000")
