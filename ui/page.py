"""What the whole page gets at launch: a theme, a style sheet and a script in its head.

The theme: gradio's default with the contrast WCAG AA asks of text (4.5:1). An axe-core audit of the default found
hint texts ("Add yours: …", "Off: the best span …") and the footer at 1.9:1, and white on the orange primary buttons
and the selected tab's orange name at 2.8:1."""
from __future__ import annotations

import gradio as gr


def page_theme() -> gr.themes.Base:
    return gr.themes.Default().set(
        block_info_text_color="*neutral_600",  # the `info=` lines under inputs
        body_text_color_subdued="*neutral_600",  # the footer, a slider's limits, an upload's "- or -"
        button_primary_background_fill="*primary_700",  # white on it: 5.2:1
        button_primary_background_fill_hover="*primary_800",
        color_accent="*primary_700",  # the selected tab's name (2.8:1 in primary_500), checked boxes
        button_primary_background_fill_dark="*primary_700",  # dark mode's default: 3.55:1
        button_primary_background_fill_hover_dark="*primary_800",
        link_text_color_dark="*secondary_400",  # dark mode's links: 4.0:1 in secondary_500
        link_text_color_visited_dark="*secondary_400",
        link_text_color_hover_dark="*secondary_300",
        link_text_color_active_dark="*secondary_300",
    )


# gradio 6.17.3 keeps a hidden copy of the tab bar (it measures the tabs' widths) whose five buttons still take
# keyboard focus: a keyboard user's first five Tab presses landed on nothing visible. On a phone the tab bar's
# overflow menu is a button with an icon and no name. The script takes the hidden copies out of the Tab order and
# names the menu, again whenever gradio re-renders them (a MutationObserver: no animation frames, see
# tests/test_browser.py's idle-page test).
# gradio 6.17.3's page also takes one request that fails in transit for a lost server: it drops every click for two
# seconds, then reloads, and the visitor's answers, charts and runs are gone. The status line's refresh (app.py's
# timer) sends such a request all the time the page is open. The script sends a failed queue-free call (the refresh,
# the charts' and the button's follow-ups: each only reads or redraws) twice more before the page sees the failure;
# a queued run is not re-sent, since the server may have started it.
PAGE_HEAD = """<script>
(() => {
  const send = window.fetch.bind(window);
  window.fetch = async (input, init) => {
    const url = typeof input === "string" ? input : String(input?.url ?? input);
    if ((init?.method ?? "GET").toUpperCase() !== "POST" || !url.includes("/run/predict")) return send(input, init);
    for (let attempt = 1; ; attempt++) {
      try {
        return await send(input, init);
      } catch (error) {
        if (attempt === 3) throw error;
        await new Promise((resume) => setTimeout(resume, 300 * attempt));
      }
    }
  };
})();
(() => {
  const mend = () => {
    document.querySelectorAll(".tab-container.visually-hidden button").forEach((button) => {
      if (button.tabIndex !== -1) button.tabIndex = -1;
    });
    document.querySelectorAll(".overflow-menu > button:not([aria-label])").forEach((button) => {
      button.setAttribute("aria-label", "More tabs");
    });
  };
  new MutationObserver(mend).observe(document.documentElement, {childList: true, subtree: true});
})();
</script>"""


# WCAG 2.4.7: where the keyboard is must show. gradio's checkboxes showed no focus at all and its text boxes a faint
# ring; a keyboard user tabbing to "pruned" could not see it was there. The ring is 3:1 or more against each mode's
# page and fields (WCAG 1.4.11).
PAGE_CSS = """
:focus-visible { outline: 3px solid #1d4ed8 !important; outline-offset: 2px; }
.dark :focus-visible { outline-color: #60a5fa !important; }
/* the theme's color_accent has no dark twin: primary_700 on the dark page reads 3.7:1, primary_500 6.8:1 */
.dark { --color-accent: var(--primary-500) !important; }
"""
