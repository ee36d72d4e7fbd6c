"""The UI in a real headless Chromium: type, click, read every column, read the charts' pixels."""
import shutil

import pytest

from app import VARIANT_COLORS


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="Debian chromium is not installed (apt-get install chromium)")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
# Pixels of each variant's color on a plot's canvas (gradio draws plots with vega on a canvas).
COUNT_COLORED_PIXELS = """([selector, colors]) => {
  const canvas = document.querySelector(`${selector} canvas`);
  if (!canvas) return null;
  const { data } = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height);
  const counts = {};
  for (const [name, hex] of Object.entries(colors)) {
    const rgb = [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16));
    counts[name] = 0;
    for (let i = 0; i < data.length; i += 4) {
      if (data[i + 3] > 200 && rgb.every((c, k) => Math.abs(data[i + k] - c) <= 24)) counts[name] += 1;
    }
  }
  return counts;
}"""
BAR_PIXELS = 400  # a bar; a legend swatch is ~100


def colored_pixels(page, selector: str) -> dict[str, int]:
    page.wait_for_selector(f"{selector} canvas", timeout=30_000)
    return page.evaluate(COUNT_COLORED_PIXELS, [selector, VARIANT_COLORS])


def drawn_since(page, selector: str, before: dict[str, int], at_least: int) -> dict[str, int]:
    """Pixels each variant gained since `before` (the legend is drawn from the start), once some
    variant gained `at_least` (vega draws after the data arrives)."""
    gained = (f"(args) => {{ const c = ({COUNT_COLORED_PIXELS})(args); const before = {before!r}; "
              f"return c && Object.keys(c).some((name) => c[name] - before[name] >= {at_least}); }}")
    page.wait_for_function(gained, arg=[selector, VARIANT_COLORS], timeout=30_000)
    now = colored_pixels(page, selector)
    return {name: now[name] - before[name] for name in now}


@pytest.fixture(scope="module")
def page(app_url, tmp_path_factory):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(app_url)
        yield page
        browser.close()


def test_qa_tab_fills_every_ready_column_and_the_charts(page, tmp_path):
    bars_before, markers_before = colored_pixels(page, "#qa-bars"), colored_pixels(page, "#qa-runs")
    page.get_by_role("button", name="Answer with every variant").click()
    stats = page.get_by_text("vs baseline")
    stats.first.wait_for(timeout=60_000)
    assert stats.count() == 2  # baseline and optimized are ready in the tiny presets
    assert page.get_by_text("not built yet").count() == 0
    assert page.get_by_text("Unknown variant 'pruned'").count() == 1  # not in the tiny preset: said in its column
    bars = drawn_since(page, "#qa-bars", bars_before, BAR_PIXELS)
    assert bars["baseline"] >= BAR_PIXELS and bars["optimized"] >= BAR_PIXELS  # a bar per variant that answered
    assert abs(bars["pruned"]) < 100 and abs(bars["pruned-optimized"]) < 100  # not in the tiny presets: no bar
    markers = drawn_since(page, "#qa-runs", markers_before, 1)
    assert markers["baseline"] > 0 and markers["optimized"] > 0  # one marker each after the first run
    assert abs(markers["pruned"]) < 20 and abs(markers["pruned-optimized"]) < 20
    page.screenshot(path=str(tmp_path / "qa.png"), full_page=True)


def test_empty_question_shows_a_message_not_a_trace(page):
    question = page.get_by_label("Question")
    question.fill("")
    page.get_by_role("button", name="Answer with every variant").click()
    page.get_by_text("Please enter a question").first.wait_for(timeout=30_000)
    assert page.get_by_text("Traceback").count() == 0


def test_generation_tab_streams_text_in_each_column(page):
    page.get_by_role("tab", name="Text generation").click()
    page.get_by_label("number input for Max new tokens").fill("4")
    page.get_by_role("button", name="Generate with every variant").click()
    page.get_by_text("tokens/s").first.wait_for(timeout=60_000)
    page.get_by_text("tokens/s").nth(1).wait_for(timeout=60_000)
    assert page.get_by_text("tokens/s").count() == 2
