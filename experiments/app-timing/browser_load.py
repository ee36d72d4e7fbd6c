"""What a browser on the same 2 cores does to the timings the page shows (twenty-fourth session).

Against a running app (`python app.py`, http://localhost:7860), in Debian's headless Chromium:
    python experiments/app-timing/browser_load.py generation 4   # "Generate with every variant" 4 times
    python experiments/app-timing/browser_load.py qa 8           # "Answer with every variant" 8 times
    python experiments/app-timing/browser_load.py idle           # the browser's CPU over 15 s of an idle page
    python experiments/app-timing/browser_load.py loops 12       # page visits whose tabs loop on animation frames
Each prints the rates or model times the page's own Markdown table reports (median, range) and the CPU seconds
all Chromium processes used meanwhile (/proc). The generation prompt is the third of the tab's examples.
"""
from __future__ import annotations

import asyncio
import os
import random
import statistics
import sys
import time

URL = os.environ.get("SHOWDOWN_URL", "http://localhost:7860")
PROMPT = "Give three tips for writing clear documentation."
TABS = ["Text generation", "Your data", "Benchmarks", "About", "Question answering"]
ANIMATION_FRAMES = """() => new Promise((done) => { let calls = 0; const original = window.requestAnimationFrame;
  window.requestAnimationFrame = (callback) => { calls += 1; return original(callback); };
  setTimeout(() => { window.requestAnimationFrame = original; done(calls); }, 1500); })"""


def chromium_cpu_s() -> float:
    total = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if "chromium" in open(f"/proc/{pid}/comm").read():
                fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
                total += int(fields[11]) + int(fields[12])
        except OSError:
            pass
    return total / os.sysconf("SC_CLK_TCK")


async def clicks(page, button: str, runs: int, column: int) -> dict[str, list[float]]:
    """Click `runs` times; from each run's Markdown table, the `column`th cell per variant."""
    values: dict[str, list[float]] = {}
    for run in range(1, runs + 1):
        await page.get_by_role("button", name=button).click()
        await page.wait_for_function(f"() => [...document.querySelectorAll('textarea')].some(t => t.value.startsWith('Run {run} '))",
                                     timeout=120_000, polling=1000)  # not every animation frame: that would load the page
        table = [t for t in await page.evaluate("() => [...document.querySelectorAll('textarea')].map(t => t.value)")
                 if t.startswith(f"Run {run} ")][0]
        for row in [r.split("|") for r in table.splitlines() if r.startswith("| ") and "---" not in r][1:]:
            values.setdefault(row[1].strip(), []).append(float(row[column]))
    return values


async def main(what: str, runs: int) -> None:
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path="/usr/bin/chromium")
        if what == "loops":
            looping = 0
            for visit in range(runs):
                page = await browser.new_page(viewport={"width": 1400, "height": 1000})
                await page.goto(URL, wait_until="load")
                await page.wait_for_timeout(4500)
                counts = [await page.evaluate(ANIMATION_FRAMES)]
                for tab in random.Random(visit).sample(TABS, len(TABS)):
                    await page.get_by_role("tab", name=tab, exact=True).first.click()
                    await page.wait_for_timeout(700)
                    counts.append(await page.evaluate(ANIMATION_FRAMES))
                looping += max(counts) > 100
                print(visit, counts, flush=True)
                await page.close()
            print(f"the tabs looped on {looping} of {runs} page visits")
            return
        page = await browser.new_page(viewport={"width": 1400, "height": 1800})
        await page.goto(URL, wait_until="load")
        await page.wait_for_timeout(2000)
        if what == "generation":
            await page.get_by_role("tab", name="Text generation").click()
            await page.get_by_label("Prompt").fill(PROMPT)
        started_cpu, started = chromium_cpu_s(), time.time()
        if what == "idle":
            await page.wait_for_timeout(15_000)
            values = {}
        else:
            button, column = (("Generate with every variant", 5) if what == "generation" else ("Answer with every variant", 4))
            values = await clicks(page, button, runs, column)
        unit = "decode tokens/s" if what == "generation" else "model ms"
        print({variant: f"{statistics.median(v):.2f} ({min(v):.2f}-{max(v):.2f})" for variant, v in values.items()}, unit if values else "",
              f"browser {chromium_cpu_s() - started_cpu:.1f} CPU s over {time.time() - started:.0f} s")
        await browser.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 4))
