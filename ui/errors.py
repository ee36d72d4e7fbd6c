"""A user's mistake as the message they see, and nothing more: gradio prints the traceback of every error raised
in a handler to the server's log unless told not to, so each mistake a visitor made filled it with two traces."""
from __future__ import annotations

import gradio as gr

from models.errors import InputError, VariantUnavailable

USER_ERRORS = (InputError, VariantUnavailable)  # what a visitor's input can cause: a message, never a trace


def user_error(message: str) -> gr.Error:
    return gr.Error(message, print_exception=False)
