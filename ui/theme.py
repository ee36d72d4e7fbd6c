"""The page's theme: gradio's default with the contrast WCAG AA asks of text (4.5:1). An axe-core audit of the
default found hint texts ("Add yours: …", "Off: the best span …") and the footer at 1.9:1, and white on the orange
primary buttons and the selected tab's orange name at 2.8:1."""
from __future__ import annotations

import gradio as gr


def page_theme() -> gr.themes.Base:
    return gr.themes.Default().set(
        block_info_text_color="*neutral_600",  # the `info=` lines under inputs
        body_text_color_subdued="*neutral_600",  # the footer, a slider's limits, an upload's "- or -"
        button_primary_background_fill="*primary_700",  # white on it: 5.2:1
        button_primary_background_fill_hover="*primary_800",
        color_accent="*primary_700",  # the selected tab's name (2.8:1 in primary_500), checked boxes
    )
