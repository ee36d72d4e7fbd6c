"""A visitor's own QA data (issue 52): every format read, every bad file named with its problem and
row, and the scoring through the running app's `/score_qa` on tiny built presets."""
import json

import pytest
from gradio_client import Client, handle_file

from models.errors import InputError, UnknownVariant
from models.your_data import SUMMARY_COLUMNS, Limits, read_rows, summary_markdown

CONTEXT = "The second little pig worked a little bit harder and built his house out of sticks."
SQUAD = {"data": [{"title": "pigs", "paragraphs": [{"context": CONTEXT, "qas": [
    {"id": "1", "question": "What did he build his house out of?", "answers": [{"text": "sticks", "answer_start": 77}]},
    {"id": "2", "question": "What did the wolf eat?", "answers": [], "is_impossible": True}]}]}]}


def test_squad_json_csv_and_jsonl_give_the_same_questions():
    from_squad = read_rows("mine.json", json.dumps(SQUAD).encode())
    from_csv = read_rows("mine.csv", (f'context,question,answer\n"{CONTEXT}",What did he build his house out of?,sticks\n'
                                      f'"{CONTEXT}",What did the wolf eat?,\n').encode())
    lines = [{"context": CONTEXT, "question": "What did he build his house out of?", "answers": ["sticks"]},
             {"context": CONTEXT, "question": "What did the wolf eat?", "answer": ""}]
    from_jsonl = read_rows("mine.jsonl", "\n".join(json.dumps(line) for line in lines).encode())
    for items in (from_squad, from_csv, from_jsonl):
        assert [(i.question, i.answers) for i in items] == [("What did he build his house out of?", ("sticks",)),
                                                             ("What did the wolf eat?", ())]
    assert [i.row for i in from_csv] == [2, 3]  # as a spreadsheet numbers them, the header being row 1
    several = read_rows("x.csv", f'context,question,answers\n"{CONTEXT}",Who?,"[""the pig"", ""pig""]"\n'.encode())
    assert several[0].answers == ("the pig", "pig")


@pytest.mark.parametrize("name,content,message", [
    ("empty.csv", b"", "The file is empty"),
    ("latin.csv", "context,question,answer\ncaf\xe9,q,a\n".encode("latin-1"), r"not UTF-8 text \(byte 0xe9 on line 2, at byte 27\)"),
    ("bad.json", b'{"data": [', "Malformed JSON at line 1, column 11"),
    ("flat.json", b'{"rows": []}', 'top-level "data" list'),
    ("bad.jsonl", b'{"context": "c", "question": "q", "answer": "a"}\n{"context": ', "Line 2 is not valid JSON"),
    ("columns.csv", b"text,query\nc,q\n", "needs the columns context, question and answer.*it has: query, text"),
    ("blank.csv", b"context,question,answer\n,q,a\n", "Row 2: the context is empty"),
    ("noq.csv", b"context,question,answer\nc,q,a\nc,,a\n", "Row 3: the question is empty"),
    ("wide.csv", b"context,question,answer\nc,q,a,extra\n", "Row 2 has more fields than the header"),
    ("short.csv", b"context,question,answer\nc,q,a\nc,q\n", "Row 3 has fewer fields than the header"),
    # rows as a spreadsheet numbers them: a blank line is a row (it was not counted), a quoted line break is not
    ("gap.csv", b"context,question,answer\nc,q,a\n\nc,,a\n", "Row 4: the question is empty"),
    ("cell.csv", b'context,question,answer\n"one\ntwo",q,a\nc,q,a,extra\n', "Row 3 has more fields than the header"),
    ("notes.pdf", b"%PDF-1.4", "not a format this Space reads"),
    ("count.json", b'{"data": [{"paragraphs": 3}]}', '"paragraphs" must be a list; it is int'),
    ("nullqas.json", b'{"data": [{"paragraphs": [{"context": "c", "qas": null}]}]}', '"qas" must be a list; it is NoneType'),
    ("deep.json", b'{"data": ' + b"[" * 200_000 + b"]" * 200_000 + b"}", "nested too deeply"),
    ("deep.jsonl", b"[" * 200_000 + b"]" * 200_000, "Line 1 is JSON nested too deeply"),
    ("header.csv", b"context,question,answer," + b"x" * 140_000 + b"\nc,q,a\n", "header could not be read"),
    # a missing or misnamed answer field had made every question "no answer", which abstaining scores perfectly
    ("gold.jsonl", b'{"context": "c", "question": "q", "gold": "a"}', "Line 1 has no answer field"),
    ("unlabelled.json", b'{"data": [{"paragraphs": [{"context": "c", "qas": [{"question": "q"}]}]}]}',
     'Question 1 has no "answers"'),
    ("start.jsonl", b'{"context": "c", "question": "q", "answers": [{"answer_start": 0}]}', 'answer object needs a "text"'),
    ("listctx.jsonl", b'{"context": ["a b"], "question": "q", "answer": "a"}', "Line 1: the context must be text, not list"),
])
def test_a_bad_file_gets_a_message_naming_the_problem_and_the_row(name, content, message):
    with pytest.raises(InputError, match=message):
        read_rows(name, content)


def test_files_as_people_write_them_are_read_as_meant():
    # JSON Lines saved as .json: one object per line had read "Malformed JSON at line 2, column 1: Extra data"
    lines = b'{"context": "The wolf ran.", "question": "Who ran?", "answer": "The wolf"}\n' * 2
    assert [item.answers for item in read_rows("lines.json", lines)] == [("The wolf",), ("The wolf",)]
    """Found by probing (each had been rejected, or read as something else)."""
    def read(name: str, text: str) -> list[tuple[str, str, tuple[str, ...]]]:
        return [(item.context, item.question, item.answers) for item in read_rows(name, text.encode())]

    # one `answer` is one answer, `|` and all; only an `answers` cell separates several with it
    assert read("x.csv", "context,question,answer\nAC|DC rocks.,Who rocks?,AC|DC\n")[0][2] == ("AC|DC",)
    assert read("x.csv", "context,question,answers\nAC rocks.,Who?,AC|the AC\n")[0][2] == ("AC", "the AC")
    # of an `answer` and an `answers` column, the filled one; JSONL keys as CSV headers, any case
    assert read("x.csv", "context,question,answer,answers\nThe pig.,What?,pig,\n")[0][2] == ("pig",)
    assert read("x.jsonl", '{"Context": "The pig.", "Question": "What?", "Answer": "pig"}')[0][2] == ("pig",)
    # a quote character inside a quoted field: the sniffer had taken ' for the quote character
    assert read("x.csv", "context,question,answer\n\"He said, 'no', and left.\",What did he say?,no\n")[0][2] == ("no",)
    # old Excel's CR-only line ends; a U+2028 inside a JSONL string (json.dumps with ensure_ascii=False writes it raw)
    assert len(read("x.csv", "context,question,answer\rc,q,a\rc,q2,b\r")) == 2
    assert read("x.jsonl", '{"context": "Line one\u2028two.", "question": "q", "answer": "two"}')[0][0] == "Line one\u2028two."
    # the datasets library's shape, numbers, null, a bracketed answer that is no JSON list
    assert read("x.jsonl", '{"context": "c 4", "question": "q", "answers": {"text": ["4"], "answer_start": [2]}}')[0][2] == ("4",)
    assert read("x.jsonl", '{"context": "In 1990.", "question": "When?", "answer": 1990}')[0][2] == ("1990",)
    assert read("x.jsonl", '{"context": "c", "question": "q", "answer": null}')[0][2] == ()
    assert read("x.csv", "context,question,answer\nc [citation needed],q,[citation needed]\n")[0][2] == ("[citation needed]",)
    # an `answer` cell that happens to be a JSON list is still one answer (it had become the golds "0" and "1")
    assert read("x.csv", 'context,question,answer\n"It lies in [0, 1].",What range?,"[0, 1]"\n')[0][2] == ("[0, 1]",)
    # a quoted phrase between semicolons in a comma-separated file (Python's csv writer): the sniffer had chosen ;
    assert read("x.csv", 'context,question,answer\r\n"The guard shouted; ""Stop!""; then ran.",What did he shout?,Stop!\r\n'
                )[0] == ('The guard shouted; "Stop!"; then ran.', "What did he shout?", ("Stop!",))
    assert read("x.csv", "context;question;answer\nThe pig, the wolf.;Who?;pig\n")[0][2] == ("pig",)  # ; still read
    # pasted JSONL whose text mentions "data" is JSONL, not a SQuAD file
    assert read("pasted", '{"context": "Facts are data.", "question": "What are facts?", "answer": "data"}')[0][2] == ("data",)
    squad = {"data": [{"paragraphs": [{"context": "c", "qas": [{"question": "q", "is_impossible": "false",
                                                                  "answers": [{"text": "c"}]}]}]}]}
    assert read("x.json", json.dumps(squad))[0][2] == ("c",)  # a string "false" is not True


def test_gold_answers_are_looked_for_in_their_context_as_the_metric_compares_them():
    from models.your_data import Item, gold_not_in_context

    items = [Item(1, "Barack Obama was president.", "Who?", ("the President",)),  # the metric's EM is 1 here
             Item(2, "Sticks and stones.", "What?", ("sticks",)),
             Item(3, "The pig.", "What?", ("wolf",))]
    assert gold_not_in_context(items) == [3]


def test_the_caps_are_stated_and_enforced():
    limits = Limits(max_rows=2, max_bytes=10_000, max_context_chars=50)
    three = "context,question,answer\n" + "c,q,a\n" * 3
    with pytest.raises(InputError, match="holds 3 questions; this Space scores at most 2"):
        read_rows("x.csv", three.encode(), limits)
    with pytest.raises(InputError, match="Row 2: the context has 60 characters; this Space takes at most 50"):
        read_rows("x.csv", f"context,question,answer\n{'c' * 60},q,a\n".encode(), limits)
    with pytest.raises(InputError, match=f"The data is {len(three)} bytes; this Space takes at most 10"):  # was "0.0 MB"
        read_rows("x.csv", three.encode(), Limits(max_bytes=10))
    assert "at most 2 questions" in limits.text()


@pytest.fixture(scope="module")
def client(app_url):
    return Client(app_url, verbose=False)


def test_score_qa_scores_every_variant_on_an_uploaded_file(client, tmp_path):
    path = tmp_path / "mine.json"
    path.write_text(json.dumps(SQUAD))
    result = client.predict(handle_file(str(path)), ["baseline", "optimized"], True, api_name="/score_qa")
    summary = {line["variant"]: line for line in result["summary"]}
    assert set(summary) == {"baseline", "optimized"} and all(s["questions"] == 2 for s in summary.values())
    assert all(tuple(line) == SUMMARY_COLUMNS for line in summary.values())  # the tab's empty table shows these
    for line in summary.values():
        assert 0 <= line["F1"] <= 100 and line["p95 (ms)"] >= line["p50 (ms)"] > 0 and line["no-answer accuracy"] is not None
    assert summary["baseline"]["same answer as baseline"] is None and 0 <= summary["optimized"]["same answer as baseline"] <= 100
    assert len(result["rows"]) == 4 and {r["variant"] for r in result["rows"]} == {"baseline", "optimized"}
    assert "| baseline | 2 |" in summary_markdown(result["summary"])


def test_score_qa_says_what_is_wrong_and_the_server_keeps_serving(client, app_url, tmp_path, capfd):
    import httpx

    from optimize.bench.app_timing import http_api_call

    path = tmp_path / "broken.jsonl"
    path.write_text('{"context": "c", "question": "q", "answer": "a"}\nnot json\n')
    with pytest.raises(Exception, match="Line 2 is not valid JSON"):
        client.predict(handle_file(str(path)), ["baseline"], True, api_name="/score_qa")
    path.write_text('{"context": "c", "question": "q", "answer": "a"}\n')
    with pytest.raises(Exception, match="Unknown variant 'turbo'"):  # it read "Select at least one variant"
        client.predict(handle_file(str(path)), ["baseline", "turbo"], True, api_name="/score_qa")
    assert "Traceback" not in capfd.readouterr().err  # gradio printed two traces for each visitor's mistake
    # a raw HTTP call naming a server file, not an upload (gradio_client would upload the client's own copy)
    with httpx.Client(base_url=app_url, timeout=60) as http, pytest.raises(RuntimeError, match="answered with an error"):
        http_api_call(http, "score_qa", [{"path": "/etc/passwd", "meta": {"_type": "gradio.FileData"}}, ["baseline"], True])
    assert client.predict(CONTEXT, "What did he build?", "baseline", api_name="/qa")["latency_ms"]["total"] > 0


def test_a_question_one_variant_refuses_is_skipped_for_it_and_said_not_the_rest_of_the_file():
    """A question longer than the model reads is that row's problem: the variant answers every other row, and the
    summary says how many it skipped and why (before, the variant silently stopped at that row)."""
    from models.your_data import Item, score

    items = [Item(row, CONTEXT, question, ("sticks",)) for row, question in
             enumerate(["What did he build?", "LONG", "What was it built of?"], 2)]

    def answer(context, question, variant, allow_no_answer):
        if question == "LONG":
            raise InputError("The question is too long (80 tokens; at most 64).")
        return {"answer": "sticks", "latency_ms": {"total": 1.0}}

    result = score(answer, items, ["baseline", "optimized"], True)
    assert score(lambda *args: (_ for _ in ()).throw(UnknownVariant("Unknown variant 'pruned'")), items, ["pruned"],
                 True)["summary"] == [{"variant": "pruned", "questions": 0, "error": "Unknown variant 'pruned'"}]
    for line in result["summary"]:
        assert line["questions"] == 2 and line["skipped"] == "1: row 3: The question is too long (80 tokens; at most 64)."
    assert summary_markdown(result["summary"]).splitlines()[0].endswith("| skipped |")
    # a gold answer the context does not hold is said (an extractive model cannot find it): the rows, in the result
    edited = [*items, Item(5, CONTEXT, "What was it?", ("bricks",))]
    assert score(answer, edited, ["baseline"], True)["gold_not_in_context"] == [5] and result["gold_not_in_context"] == []
    # the baseline skipping every row another variant answered: no share to give (it was NaN, which JSON refuses)
    only_baseline_refuses = lambda context, question, variant, allow: (  # noqa: E731
        answer(context, "LONG" if variant == "baseline" else question, variant, allow))
    disjoint = score(only_baseline_refuses, items[:1], ["baseline", "optimized"], True)
    assert disjoint["summary"][1]["same answer as baseline"] is None
    json.dumps(disjoint, allow_nan=False)
    header, _, row = summary_markdown([{**result["summary"][0], "skipped": "1: row 2: a | b\nc"}]).splitlines()[:3]
    assert row.count("|") == header.count("|"), row  # a reason's pipe or newline no longer breaks the table


def test_a_fault_in_one_variant_leaves_the_others_scored():
    """A fault of ours in one variant (not the visitor's file) had ended the whole scoring with an opaque error."""
    from models.your_data import Item, score

    items = [Item(row, CONTEXT, "What did he build?", ("sticks",)) for row in (2, 3)]

    def answer(context, question, variant, allow_no_answer):
        if variant == "optimized":
            raise RuntimeError("kernel")
        return {"answer": "sticks", "latency_ms": {"total": 1.0}}

    summary = {line["variant"]: line for line in score(answer, items, ["baseline", "optimized"], True)["summary"]}
    assert summary["baseline"]["questions"] == 2
    assert summary["optimized"]["error"] == "this variant failed (RuntimeError; the server's log has the details)"
