"""The UI in a real headless Chromium: type, click, read every column, read the charts' pixels."""
import shutil
import time

import pytest

from models.catalog import VARIANT_COLORS
from scripts.screenshot import HEADROOM

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="Debian chromium is not installed (apt-get install chromium)")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
# Each variant's rendered marks (gradio draws its plots with vega as SVG): bars with a height,
# points with a size, counted by the variant's colour; legend swatches are not marks.
COUNT_MARKS = """([selector, colors]) => {
  const svg = document.querySelector(`${selector} svg`);
  if (!svg) return null;
  const counts = Object.fromEntries(Object.keys(colors).map((name) => [name, 0]));
  for (const mark of svg.querySelectorAll("g.role-mark path")) {
    const box = mark.getBBox();
    const paint = [mark.getAttribute("fill"), mark.getAttribute("stroke")].map((c) => (c || "").toLowerCase());
    for (const [name, hex] of Object.entries(colors)) {
      if (paint.includes(hex.toLowerCase()) && box.width > 0.5 && box.height > 0.5) counts[name] += 1;
    }
  }
  return counts;
}"""


# A chart's y-axis tick values (vega labels its axis groups "Y-axis titled ...").
Y_TICKS = """(selector) => [...document.querySelectorAll(
  `${selector} svg g.role-axis[aria-label^="Y-axis"] g.role-axis-label text`)].map((label) => Number(label.textContent.replace(/,/g, "")))"""


def drawn(page, expression: str, arg=None):
    """`expression`'s value once the page holds what it reads (not null, not an empty list): vega redraws a chart as
    each of a run's updates lands (a CI run read one mid-redraw, its title not there yet), and a tab's tables mount
    after the tab is shown."""
    return page.wait_for_function(
        f"""(arg) => {{ const value = ({expression})(arg);
              return value === null || value === undefined || (Array.isArray(value) && !value.length) ? null : [value]; }}""",
        arg=arg, timeout=30_000).json_value()[0]


def marks(page, selector: str, variants: int) -> dict[str, int]:
    """The marks drawn once `variants` variants have one (vega draws after the data arrives, and a streamed run's
    chart can lag its columns by a redraw: a CI run saw the baseline's bar alone), read in the same poll that saw
    them: a second read could land inside a redraw and count none (a CI run on a slow machine did)."""
    drawn = page.wait_for_function(
        f"""([args, variants]) => {{ const c = ({COUNT_MARKS})(args);
              return c && Object.values(c).filter((n) => n > 0).length >= variants ? c : null; }}""",
        arg=[[selector, VARIANT_COLORS], variants], timeout=30_000)
    return drawn.json_value()


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:  # one per thread: every test of the module shares it
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield browser
        browser.close()


def keep_journal(page):
    """What the page did besides drawing, kept for the report of a test that fails on it (conftest prints it): a CI
    run waited 30 s for an error's message after two clicks on a shared page, and its output could not say whether
    the click reached the server, the page lost its connection and reloaded, or the script threw."""
    page.journal = []
    note = lambda line: page.journal.append(f"{time.strftime('%H:%M:%S')} {line}")  # noqa: E731
    page.on("console", lambda message: message.type in ("error", "warning") and not message.text.startswith("WARN ")
            and note(f"console {message.type}: {message.text}"))  # vega's "WARN" lines are about its specs
    page.on("pageerror", lambda error: note(f"page error: {error}"))
    page.on("request", lambda request: "/queue/" in request.url and note(f"{request.method} {request.url}"))
    page.on("requestfailed", lambda request: note(f"failed {request.url}: {request.failure}"))
    page.on("response", lambda response: response.status >= 400 and note(f"{response.status} {response.url}"))
    page.on("framenavigated", lambda frame: frame == page.main_frame and note(f"loaded {frame.url}"))
    return page


def journaled(request, page):
    """`page`, journaled for the test `request` serves: its failure prints each of its pages' journals (conftest)."""
    request.node.journaled_pages = [*getattr(request.node, "journaled_pages", []), keep_journal(page)]
    return page


@pytest.fixture()
def new_page(browser, request):
    """`browser.new_page` for one test, journaled."""
    return lambda **options: journaled(request, browser.new_page(**options))


@pytest.fixture(scope="module")
def page(browser, app_url):
    page = keep_journal(browser.new_page(viewport={"width": 1400, "height": 1000}))
    page.goto(app_url)
    yield page
    page.close()


# Whether the page ever showed a disabled button saying it works (set before a click, read after it).
WATCH_BUSY_BUTTON = """(label) => { window.busySeen = ''; new MutationObserver(() => {
  const busy = [...document.querySelectorAll('button')].find((b) => b.disabled && b.textContent.includes(label));
  if (busy) window.busySeen = busy.textContent.trim(); }).observe(document.body, {subtree: true, childList: true,
  attributes: true, characterData: true}); }"""


def test_qa_tab_fills_every_ready_column_and_the_charts(page, tmp_path):
    """The button says what runs and takes no second click meanwhile (a long context had shown nothing in view for
    minutes), then is back."""
    from playwright.sync_api import expect

    page.locator("#qa-runs-csv").wait_for()
    assert page.locator("#qa-runs-csv").is_disabled()  # no run yet: nothing to download
    page.evaluate(WATCH_BUSY_BUTTON, "Timing")
    page.get_by_role("button", name="Answer with every variant").click()
    stats = page.get_by_text("vs baseline")
    stats.first.wait_for(timeout=60_000)
    expect(page.get_by_role("button", name="Answer with every variant")).to_be_enabled(timeout=30_000)
    assert page.evaluate("() => window.busySeen") == "Timing 4 variants…"
    assert stats.count() == 2  # baseline and optimized are ready in the tiny presets
    assert page.get_by_text("not built yet").count() == 0
    assert page.get_by_text("Unknown variant 'pruned'").count() == 1  # not in the tiny preset: said in its column
    for chart in ("#qa-bars", "#qa-runs"):  # the slowest run's bar and marker drawn whole, below the top
        page.wait_for_function(f"(selector) => ({HEADROOM})(selector) > 2", arg=chart, timeout=30_000)
    bars = marks(page, "#qa-bars", variants=2)  # the latest run: one visible bar per variant that answered
    assert bars == {"baseline": 1, "optimized": 1, "pruned": 0, "pruned-optimized": 0}, bars
    points = marks(page, "#qa-runs", variants=2)  # the visitor's history: one marker each after the first run
    assert points == {"baseline": 1, "optimized": 1, "pruned": 0, "pruned-optimized": 0}, points
    for chart in ("#qa-bars", "#qa-runs"):  # latency from 0: an axis cut above zero would inflate the gaps
        ticks = drawn(page, Y_TICKS, chart)
        assert ticks and min(ticks) == 0, (chart, ticks)
    page.screenshot(path=str(tmp_path / "qa.png"), full_page=True)
    table = "() => document.querySelector('#qa-run-table textarea').value"  # the run to paste elsewhere
    page.wait_for_function(f"() => ({table})().includes('| optimized |')", timeout=30_000)
    assert "| variant | answer | total (ms) | model (ms) | speedup | runs on |" in page.evaluate(table)
    assert page.locator("#qa-runs-csv").is_enabled()  # greyed until the first run
    with page.expect_download() as download:  # and the session's runs as CSV
        page.locator("#qa-runs-csv").click()
    lines = open(download.value.path(), encoding="utf-8").read().splitlines()
    assert lines[0].startswith("run,preset,variant,input,output,total_ms") and len(lines) == 5, lines
    assert [line.endswith(",failed") for line in lines[1:]] == [False, False, True, True], lines  # asked, not in the preset


def test_a_column_left_out_of_a_click_says_so_instead_of_an_earlier_clicks_numbers(page):
    """The previous test filled every column; a click without `optimized` must not leave its old answer and speedup
    beside the new baseline's."""
    optimized = page.get_by_role("checkbox", name="optimized").first  # the QA tab's, first on the page
    optimized.uncheck()
    try:
        page.get_by_role("button", name="Answer with every variant").click()
        page.get_by_text("not selected for this run").first.wait_for(timeout=60_000)
        page.get_by_text("vs baseline").first.wait_for(timeout=60_000)  # the click's result, after its "timing…"
        assert page.get_by_text("vs baseline").count() == 1  # the baseline's own column, not optimized's old one
    finally:
        optimized.check()


def test_empty_question_shows_a_message_not_a_trace(page):
    from playwright.sync_api import expect

    question = page.get_by_label("Question")
    assert page.get_by_text("vs baseline").count() >= 1  # the earlier tests' runs stand in the columns
    question.fill("")
    page.get_by_role("button", name="Answer with every variant").click()
    page.get_by_text("Please enter a question").first.wait_for(timeout=30_000)
    assert page.get_by_text("Traceback").count() == 0
    # not the last click's answers and speedups under this input's error, read as its results
    expect(page.get_by_text("vs baseline")).to_have_count(0, timeout=30_000)


def test_a_refresh_lost_in_transit_neither_drops_a_click_nor_reloads_the_page(new_page, app_url):
    """gradio's page took one failed request for a lost server: an aborted status refresh, and the next click went
    nowhere, then the page reloaded and the visitor's answers were gone (ui/page.py sends such a call again)."""
    page = new_page(viewport={"width": 1400, "height": 1000})
    try:
        page.goto(app_url)
        page.get_by_label("Question").wait_for()
        page.evaluate("() => { window.sameDocument = true; }")  # gone if the page reloads
        refreshes = []
        def lose_the_first(route):  # noqa: E306 - the status line's refresh, every 3 s, is the first queue-free call
            refreshes.append(route.request.url)
            route.abort() if len(refreshes) == 1 else route.continue_()
        page.route("**/gradio_api/run/predict*", lose_the_first)
        after_the_lost_one = lambda request: "/run/predict" in request.url and len(refreshes) >= 2  # noqa: E731
        with page.expect_request_finished(after_the_lost_one, timeout=30_000):
            pass  # a call after the lost one answered: sent again, or the next refresh
        page.get_by_label("Question").fill("")
        page.get_by_role("button", name="Answer with every variant").click()
        page.get_by_text("Please enter a question").first.wait_for(timeout=30_000)
        assert len(refreshes) >= 2 and page.evaluate("() => window.sameDocument === true"), page.journal
        assert not [line for line in page.journal if " loaded " in line][1:], page.journal
    finally:
        page.close()


def test_each_task_s_button_is_in_view_of_a_small_embed_and_enter_in_the_question_answers(new_page, app_url):
    """In an 800x600 iframe the buttons sat under the options, past the fold: a visitor saw no way to run it."""
    small = new_page(viewport={"width": 800, "height": 600})
    try:
        small.goto(app_url)
        for tab, button in (("Question answering", "Answer with every variant"),
                            ("Text generation", "Generate with every variant")):
            small.get_by_role("tab", name=tab).click()
            box = small.get_by_role("button", name=button).bounding_box()
            assert box and box["y"] + box["height"] <= 600, (tab, box)
        small.get_by_role("tab", name="Question answering").click()
        small.get_by_label("Question").press("Enter")
        small.get_by_text("vs baseline").first.wait_for(timeout=60_000)
    finally:
        small.close()


# Whether the bars chart's variant names (x axis) overlap, as drawn: each name's box, turned as vega turns it, and
# two boxes apart when one of the box's own axes separates them (both names are turned alike).
X_LABELS_OVERLAP = """(selector) => {
  const boxes = [...document.querySelectorAll(
    `${selector} svg g.role-axis[aria-label^="X-axis"] g.role-axis-label text`)].map((label) => {
      const b = label.getBBox(), m = label.getScreenCTM();
      return {name: label.textContent, corners: [[b.x, b.y], [b.x + b.width, b.y], [b.x + b.width, b.y + b.height],
        [b.x, b.y + b.height]].map(([x, y]) => [m.a * x + m.c * y + m.e, m.b * x + m.d * y + m.f])};
  });
  if (!boxes.length) return null;  // not drawn yet
  const overlapping = [];
  for (let i = 0; i + 1 < boxes.length; i++) {
    const [a, b] = [boxes[i].corners, boxes[i + 1].corners];
    const axes = [[a[1][0] - a[0][0], a[1][1] - a[0][1]], [a[3][0] - a[0][0], a[3][1] - a[0][1]]];
    const apart = axes.some(([x, y]) => {
      const along = (c) => c.map(([px, py]) => px * x + py * y);
      const [pa, pb] = [along(a), along(b)];
      return Math.max(...pa) <= Math.min(...pb) + 0.5 || Math.max(...pb) <= Math.min(...pa) + 0.5;
    });
    if (!apart) overlapping.push([boxes[i].name, boxes[i + 1].name]);
  }
  return [boxes.length, overlapping];
}"""


def test_a_phone_reads_every_variant_s_name_under_the_bars(new_page, app_url):
    """At 390 px the level names ran into each other ("pruned" into "pruned-optimized")."""
    phone = new_page(viewport={"width": 390, "height": 844})
    try:
        phone.goto(app_url)
        phone.get_by_role("button", name="Answer with every variant").click()
        phone.get_by_text("vs baseline").first.wait_for(timeout=60_000)
        marks(phone, "#qa-bars", variants=2)
        assert drawn(phone, X_LABELS_OVERLAP, "#qa-bars") == [4, []]
    finally:
        phone.close()


def test_generation_tab_streams_text_in_each_column(page):
    from playwright.sync_api import expect

    page.get_by_role("tab", name="Text generation").click()
    page.get_by_label("number input for Max new tokens").fill("4")
    page.get_by_role("button", name="Generate with every variant").click()
    page.get_by_text("tokens/s").first.wait_for(timeout=60_000)
    page.get_by_text("tokens/s").nth(1).wait_for(timeout=60_000)
    # the run done, its columns' final text and the charts sent: counting while the columns re-render reads noise
    expect(page.get_by_role("button", name="Generate with every variant")).to_be_enabled(timeout=30_000)
    assert page.get_by_text("tokens/s").count() == 2
    # issue 49: the bars compare time per decoded token, as the columns' decoding speedup does, not total times
    assert marks(page, "#generation-bars", variants=2) == {"baseline": 1, "optimized": 1, "pruned": 0, "pruned-optimized": 0}
    axis = drawn(page, """() => document.querySelector('#generation-bars svg g.role-axis[aria-label^="Y-axis"]')?.getAttribute('aria-label')""")
    assert "ms per token (lower is better)" in axis, axis
    for chart in ("#generation-bars", "#generation-runs"):  # each title whole inside its chart (260 px had cut it)
        gap = drawn(page, """(selector) => { const svg = document.querySelector(`${selector} svg`);
          const title = svg?.querySelector('g.role-title text');
          return title ? title.getBoundingClientRect().top - svg.getBoundingClientRect().top : null; }""", chart)
        assert gap >= 0, (chart, gap)
    table = "() => document.querySelector('#generation-run-table textarea').value"
    page.wait_for_function(f"() => ({table})().includes('| optimized |')", timeout=30_000)
    assert "| decode tokens/s | decoding speedup |" in page.evaluate(table)


def test_examples_fill_their_inputs_in_the_browser_so_an_immediate_click_sends_them(page, app_url):
    """gr.Examples asked the server for an example's values: a task button clicked within that round trip sent the
    previous input while the box showed the example (seen here: the haiku in the box, France's answer below it).
    The status line's 3-second refresh is a round trip of its own, which a slow machine sends in between."""
    import json

    import httpx

    from app import GENERATION_EXAMPLES, QA_EXAMPLES

    ticks = {d["id"] for d in httpx.get(app_url + "config").json()["dependencies"]
             if any(event == "tick" for _, event in d["targets"])}
    assert ticks  # the refresh is still there to tell apart
    sent = []
    record = lambda request: sent.append((request.url, request.post_data or ""))  # noqa: E731
    page.on("request", record)
    try:
        page.get_by_role("tab", name="Text generation").click()
        example = GENERATION_EXAMPLES[1][0]
        page.get_by_role("button", name=example, exact=True).click()
        page.get_by_role("button", name="Generate with every variant").click()  # at once, as a quick visitor does
        table = "() => document.querySelector('#generation-run-table textarea').value"
        page.wait_for_function(f"(text) => ({table})().includes(text)", arg=example, timeout=60_000)
        calls = [(url.split("/gradio_api/")[1], body) for url, body in sent if "/gradio_api/" in url]
        first_join = next(i for i, (path, _) in enumerate(calls) if path.startswith("queue/join"))
        assert json.loads(calls[first_join][1])["data"][0] == example, calls
        # no round trip before the values are there (the charts' follow-up after the run is one)
        assert not [path for path, body in calls[:first_join]
                    if path.startswith("run/predict") and json.loads(body)["fn_index"] not in ticks], calls
        page.get_by_role("tab", name="Question answering").click()
        context, question, allow = QA_EXAMPLES[2]
        page.get_by_role("button", name=question, exact=True).click()
        assert page.get_by_label("Question").input_value() == question
        assert page.get_by_label("Context").input_value() == context
        assert page.get_by_label("Allow 'no answer' (SQuAD 2.0)").is_checked() is allow
    finally:
        page.remove_listener("request", record)


def test_benchmarks_tab_answers_each_question_in_its_own_section(page):
    """The reports, pruning and the comparison with other runtimes each in their own section, the QA report
    open and the others shut; the measuring button sits with the comparison it measures."""
    page.get_by_role("tab", name="Benchmarks").click()
    for label in ("QA report", "Generation report", "Pruning", "Against alternatives"):
        page.get_by_role("button", name=label).wait_for(timeout=10_000)
    # the open QA report's chart, drawn, and named in words for a screen reader (its alt text was empty)
    chart = page.locator('img[alt*="against latency"]:visible')
    chart.wait_for(timeout=10_000)
    assert chart.count() == 1  # the QA report's: the generation report is shut
    alt = chart.get_attribute("alt")
    assert "baseline: " in alt and "pruned-optimized: " in alt and " ms (" in alt, alt
    assert chart.evaluate("(img) => img.complete && img.naturalWidth > 0")
    button = page.get_by_role("button", name="Measure on this machine")
    assert not button.is_visible()
    page.get_by_role("button", name="Against alternatives").click()
    button.wait_for(timeout=10_000)
    page.get_by_role("heading", name="Committed").wait_for(timeout=10_000)
    page.get_by_role("button", name="Against alternatives").click()
    button.wait_for(state="hidden", timeout=10_000)


def test_your_data_tab_scores_an_upload_with_progress_table_chart_and_download(page, tmp_path):
    """Issue 52: upload a small SQuAD-style CSV, watch it score, read the table, the chart, the
    Markdown and download the per-question answers; a malformed file gets a message, not a trace."""
    import csv

    rows = ["context,question,answer"] + [
        '"The second little pig built his house out of sticks.",What did the second pig build his house out of?,sticks',
        '"The second little pig built his house out of sticks.",What did the wolf eat?,'] * 3
    upload = tmp_path / "mine.csv"
    upload.write_text("\n".join(rows) + "\n")
    page.get_by_role("tab", name="Your data").click()
    headers = drawn(page, "() => [...document.querySelectorAll('#your-data-summary th')].map((c) => c.textContent.trim())")
    assert any(h.startswith("variant") for h in headers) and "1" not in headers, headers  # it showed 1 | 2 | 3
    page.get_by_role("button", name="Score every variant on my data").click()  # nothing uploaded, nothing pasted
    page.get_by_text("Nothing to score yet").first.wait_for(timeout=30_000)  # it said "The file is empty"
    page.locator("#your-data-upload input[type=file]").set_input_files(str(upload))
    page.get_by_role("button", name="Score every variant on my data").click()
    markdown = "() => document.querySelector('#your-data-md')?.textContent || ''"
    page.wait_for_function(f"() => ({markdown})().includes('| optimized | 6 |')", timeout=60_000)
    text = page.evaluate(markdown)
    assert "| baseline | 6 |" in text and "| pruned | 0 | Unknown variant 'pruned'" in text, text  # not in the tiny preset
    assert "6 questions, tiny-qa, scored" in text, text  # which model scored them (the tab has no picker)
    cells = drawn(page, "() => [...document.querySelectorAll('#your-data-summary td')].map((c) => c.textContent.trim())")
    assert set(cells) & set(VARIANT_COLORS), cells  # the table is drawn (gradio renders its rows virtually)
    page.screenshot(path=str(tmp_path / "your-data.png"), full_page=True)
    labels = drawn(page, "() => [...document.querySelectorAll('#your-data-f1 svg text')].map((t) => t.textContent)")
    assert "baseline" in labels and "optimized" in labels, labels  # a bar per variant that answered (F1 may be 0)
    with page.expect_download() as download:
        page.locator("#your-data-csv a").first.click()
    saved = tmp_path / "answers.csv"
    download.value.save_as(saved)
    answers = list(csv.DictReader(saved.open()))
    assert len(answers) == 6 * 2 and {a["variant"] for a in answers} == {"baseline", "optimized"}  # the tiny presets' two

    broken = tmp_path / "broken.csv"
    broken.write_text("text,query\nc,q\n")
    page.locator("#your-data-upload button[aria-label='Clear']").click()  # the first file out, then the next in
    page.locator("#your-data-upload input[type=file]").set_input_files(str(broken))
    page.get_by_role("button", name="Score every variant on my data").click()
    page.get_by_text("needs the columns context, question and answer").first.wait_for(timeout=30_000)
    assert page.get_by_text("Traceback").count() == 0


def test_a_line_above_the_tabs_names_each_building_variant_and_goes_once_built(new_page, built_presets):
    """A first start shows the build's progress above the tabs (the Variant status panel stays shut, as it is
    never updated from the server: app.py says why); a visitor who comes once every variant is built sees no line."""
    from playwright.sync_api import expect

    from models.showdown import Showdown
    from tests.conftest import serve_app

    showdown = Showdown(presets=dict(built_presets))
    showdown.mark_building("qa", "optimized", "exporting baseline to ONNX")
    with serve_app(showdown) as url:
        page = new_page(viewport={"width": 1400, "height": 1000})
        page.goto(url)
        line = page.locator("#building")
        expect(line).to_contain_text("Building 1 variant on this machine", timeout=30_000)
        expect(line).to_contain_text("qa / optimized: exporting baseline to ONNX")
        expect(page.get_by_role("columnheader", name="detail")).to_be_hidden()  # the panel stays shut
        showdown.mark_build_done("qa", "optimized")
        expect(line).not_to_contain_text("Building", timeout=30_000)  # the timer's next refresh, on the open page
        page.close()


# requestAnimationFrame calls in 1 s of an idle page: gradio 6.17.3's tabs, once something updates while the page
# mounts (or an Accordion is updated, or a tab holds tabs), ask for ~1,800 a second for as long as the page is open.
ANIMATION_FRAMES = """() => new Promise((done) => {
  let calls = 0;
  const original = window.requestAnimationFrame;
  window.requestAnimationFrame = (callback) => { calls += 1; return original(callback); };
  setTimeout(() => { window.requestAnimationFrame = original; done(calls); }, 1000);
})"""


LOOPING_FRAMES = 30  # a second's animation frames that count as a loop: under one frame in two; the loop makes thousands


def frames_in(page) -> int:
    """A second's animation frames; a busy second is measured once more and the quieter one kept: a transition ends
    (a clean clone on a loaded machine read 45 and 30 in the QA tab's first second after load), a loop does not."""
    first = page.evaluate(ANIMATION_FRAMES)
    return first if first < LOOPING_FRAMES else min(first, page.evaluate(ANIMATION_FRAMES))


def test_an_idle_page_asks_for_no_animation_frames_on_any_tab(new_page, app_url):
    """An open page must not take the cores from the models it times (a visitor's browser often runs on them).
    Gradio 6.17.3 still starts the loop now and then on its own (1 of 36 page visits, measured); the page that
    started it on every visit fails here, at most one looping visit of three passes (it stops once the third visit
    cannot change that)."""
    import json
    import urllib.request

    from playwright.sync_api import expect

    config = json.loads(urllib.request.urlopen(app_url + "config", timeout=30).read())
    [refresh] = [index for index, event in enumerate(config["dependencies"]) if ["tick"] == [t[1] for t in event["targets"]]]

    def status_refresh(response) -> bool:  # the status line's timer, answered
        return "/run/predict" in response.url and json.loads(response.request.post_data or "{}").get("fn_index") == refresh

    looping, visits = [], 3
    for visit in range(1, visits + 1):
        page = new_page(viewport={"width": 1400, "height": 1000})
        with page.expect_response(status_refresh, timeout=30_000):  # the page's first update after it mounted
            page.goto(app_url)
            page.get_by_role("button", name="Answer with every variant").wait_for(timeout=30_000)
        frames = {"Question answering": frames_in(page)}
        for tab in ("Text generation", "Your data", "Benchmarks", "About"):
            page.get_by_role("tab", name=tab, exact=True).first.click()
            expect(page.get_by_role("tab", name=tab, exact=True).first).to_have_attribute("aria-selected", "true")
            frames[tab] = frames_in(page)
        page.close()
        if max(frames.values()) >= LOOPING_FRAMES:
            looping.append(frames)
        if len(looping) > 1 or len(looping) + visits - visit <= 1:  # decided either way
            break
    assert len(looping) <= 1, looping


# What axe-core finds in gradio 6.17.3's own widgets, by rule and a piece of the node's markup: the page's own
# content (headings, hint texts, buttons' colours, charts, tables) must add nothing beside them.
GRADIO_OWN = {
    "image-redundant-alt": 'alt="Settings"',  # the footer
    "svg-img-alt": 'aria-roledescription="symbol mark container"',  # vega's empty marks before a first run
    "aria-allowed-role": 'role="listbox"',  # a dropdown's input
    "aria-required-children": 'role="grid"',  # the dataframe
    "nested-interactive": 'aria-dropeffect="copy"',  # the dataframe's and the upload's drop target
    "label-content-name-mismatch": 'aria-dropeffect="copy"',
    "aria-prohibited-attr": 'aria-label="Empty value"',  # an empty file output
}


# WCAG's contrast of `color` against the first painted background behind `element` (its own, else an ancestor's).
CONTRAST = """const rgb = (c) => c.match(/[\\d.]+/g).map(Number);
const luminance = (c) => 0.05 + rgb(c).slice(0, 3).map((v) => v / 255)
  .map((v) => (v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4))
  .reduce((sum, v, i) => sum + v * [0.2126, 0.7152, 0.0722][i], 0);
const contrast = (color, element) => {
  let back = element;
  while (back && rgb(getComputedStyle(back).backgroundColor)[3] === 0) back = back.parentElement;
  const [a, b] = [luminance(color), luminance(getComputedStyle(back || document.body).backgroundColor)];
  return Math.max(a, b) / Math.min(a, b);
};"""
# axe-core leaves the tabs' contrast "incomplete" (their underline is a pseudo-element), so it is measured here.
SELECTED_TAB_CONTRAST = """() => { """ + CONTRAST + """
  const tab = [...document.querySelectorAll('button[role="tab"][aria-selected="true"]')].find((t) => t.offsetParent);
  return tab ? contrast(getComputedStyle(tab).color, tab) : null;  // null: a phone keeps it in the overflow menu
}"""
# Where the keyboard is: the focused control's name, its outline's style, width and contrast (WCAG 1.4.11: 3:1 with
# what is behind it: the outline sits outside the control, against its parent), and whether it can be seen at all.
FOCUSED = """() => { """ + CONTRAST + """
  const e = document.activeElement;
  e.getAnimations().forEach((a) => a.finish());  // a button's outline fades in from its text colour (a transition)
  const s = getComputedStyle(e), box = e.getBoundingClientRect();
  const label = e.labels && e.labels[0] ? e.labels[0].textContent.trim() : "";
  return [e.getAttribute("aria-label") || label || e.textContent.trim() || e.type, s.outlineStyle,
          parseFloat(s.outlineWidth), contrast(s.outlineColor, e.parentElement), box.width > 2 && box.height > 2];
}"""


def axe_violations(page) -> list[str]:
    """axe-core's violations on the page as it stands, less gradio's own (GRADIO_OWN): "rule: markup" each."""
    from pathlib import Path

    import axe_playwright_python

    if not page.evaluate("typeof window.axe !== 'undefined'"):
        page.add_script_tag(path=str(Path(axe_playwright_python.__file__).parent / "axe.min.js"))
    found = page.evaluate("""async () => (await axe.run(document, {resultTypes: ['violations']})).violations
        .flatMap((v) => v.nodes.map((n) => [v.id, n.html.slice(0, 160)]))""")
    return [f"{rule}: {html}" for rule, html in found if GRADIO_OWN.get(rule, "\0") not in html]


@pytest.mark.parametrize("width,height,scheme", [(1400, 1000, "light"), (390, 844, "light"), (1400, 1000, "dark")])
def test_axe_core_finds_nothing_in_the_page_s_own_content_on_any_tab(new_page, app_url, width, height, scheme):
    """An audit found headings that skipped a level, hint texts, tab names and button labels under 4.5:1
    contrast (dark mode's buttons and links too), a chart without alt text and a wide table a keyboard could not
    scroll on a phone."""
    page = new_page(viewport={"width": width, "height": height}, color_scheme=scheme)
    try:
        page.goto(app_url + f"?__theme={scheme}")
        page.get_by_role("tab", name="Question answering").wait_for()  # the selected one: a phone shows it alone
        found = {}
        for tab in ("Question answering", "Text generation", "Your data", "Benchmarks", "About"):
            if page.get_by_role("tab", name=tab).is_visible():
                page.get_by_role("tab", name=tab).click()
            else:  # a phone's tab bar keeps the tabs that do not fit in a menu
                page.locator(".overflow-menu > button").first.click()
                page.locator(".overflow-dropdown button", has_text=tab).first.click()
            if tab == "Benchmarks":
                for section in ("Generation report", "Pruning", "Against alternatives"):  # the QA report is open
                    page.get_by_role("button", name=section).click()
                page.get_by_role("heading", name="Committed").wait_for(timeout=10_000)
            found[tab] = axe_violations(page)
            if (contrast := page.evaluate(SELECTED_TAB_CONTRAST)) is not None and contrast < 4.5:
                found[tab].append(f"selected tab's name at {contrast:.2f}:1")
        assert not any(found.values()), {tab: lines for tab, lines in found.items() if lines}
    finally:
        page.close()


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_keyboard_s_place_shows_on_every_control(new_page, app_url, scheme):
    """WCAG 2.4.7: a checkbox reached by Tab showed no ring at all, a text box a faint one; and the first Tab
    presses landed on gradio's hidden copy of the tab bar. The ring must stand out in dark mode too."""
    wanted = ("Question", "baseline", "Answer with every variant")
    page = new_page(viewport={"width": 1400, "height": 1000}, color_scheme=scheme)
    try:
        page.goto(app_url + f"?__theme={scheme}")
        # On busy cores gradio mounts the tab's controls after its tab bar: Tab presses then skip those not yet
        # there (a CI run saw no "baseline" in 20 stops; 7 of 16 loads of the app under load did the same here).
        page.get_by_role("checkbox", name="baseline").first.wait_for()
        stops = []  # Tab until each wanted control is reached
        while len(stops) < 60 and not all(any(stop[0] == name for stop in stops) for name in wanted):
            page.keyboard.press("Tab")
            stops.append(page.evaluate(FOCUSED))
        names = [stop[0][:40] for stop in stops]
        print("Tab stops:", " > ".join(names))  # shown in full beside a failure: pytest cuts a long message short
        assert all(visible for *_, visible in stops), [stop for stop in stops if not stop[-1]]  # a hidden stop
        for name in wanted:
            stop = next((s for s in stops if s[0] == name), None)
            assert stop and stop[1] != "none" and stop[2] >= 2 and stop[3] >= 3, (name, stop, names)
    finally:
        page.close()
