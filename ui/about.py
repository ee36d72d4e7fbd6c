"""The About tab: what the visitor sees, the two QA modes, long contexts, and the promise each
variant keeps, its gates generated from optimize/evaluate/gates.py so the text cannot drift."""
from __future__ import annotations


ABOUT_TEMPLATE = """
**What you see.** Each variant is a real model running here: `baseline` is PyTorch fp32 (eager; fp16 on a CUDA machine);
`optimized` is the baseline exported to ONNX, graph-optimized by ONNX Runtime and quantized to
INT8 where its accuracy gates allow (its build steps say what it got; FP16 on a CUDA machine). The
generation baseline comes from a 4-bit GGUF, so its `optimized` carries that GGUF's own 4-bit
codes multiplied with 8-bit activations as llama.cpp does, each weight one kernel call with its Q4_1
minimums in its zero points plus an 8-bit residual: a lossy step, gated on perplexity and reading
comprehension (the exact rung, fp32 compute, is further down its ladder). `pruned`
and `pruned-optimized` are the structurally pruned model and its optimized export. All variants share one tokenisation and
post-processing path, so only the model differs. On every QA click each variant answers three times
in rounds whose order rotates, the first call right after one untimed call on the same input (after
idle time, a lone call measures how long the variant slept, not the variant); its column shows the
median call and the range. Generation is timed on one call after a short untimed one.

**Two QA modes.** By default every variant returns its best span (at most 15 tokens), as
transformers' `question-answering` pipeline does (`handle_impossible_answer=False`,
`max_answer_len=15`); when the model rates the question unanswerable, the span is still shown
with a note "the model rates this unanswerable (answerability …)". Tick "Allow 'no answer' (SQuAD 2.0)"
(API: `handle_impossible_answer=True`) and a variant answers "no answer" whenever its answerability
score is not above its threshold. The score comes from a small verifier each variant fits on four
held-out validation articles (1,563 questions), with its threshold: a logistic regression over the
null margin (the best span's score minus the null score, in logit units), the null score, and
what the question names that the context never mentions (a name, a number, its content words), and
whether it is negated.

**Long contexts.** A context longer than one 384-token window is read as overlapping windows (128
tokens shared), each run at its own length, and the best span over all of them wins. Model time
grows with the windows; the Benchmarks tab gives every variant's latency and speedup at one, two
and four windows, measured side by side.

**Accuracy is measured, not assumed.** QA, two ways, on SQuAD 2.0 articles never used in
training: SQuAD 2.0 EM/F1 (overall, answerable, unanswerable) with each variant's own fitted
verifier and threshold (and, beside it, F1 with the null margin alone deciding), and SQuAD
1.1-style forced-span EM/F1 on the answerable questions; plus F1 on 42 hand-written questions about
everyday texts, 4 of them unanswerable (`optimize/evaluate/everyday_qa.json`). Generation:
perplexity on 48 Wikipedia paragraphs of the reading set's articles (validation: no generation model
was trained or chosen on them), reading-comprehension F1 (held-out SQuAD questions asked
about their paragraph, with a 95 % interval), the score on a public 60-prompt instruction set
(`optimize/evaluate/instruction_set.json`), and greedy agreement with the source. Each variant
keeps one promise, and the build publishes nothing that misses its gate (a trained model the project
committed, QA `pruned`, is checked against its promise too, and shown with any gate it misses):

{gates}

**Try it on your data.** The "Your data" tab scores every variant on your own questions (SQuAD
JSON, CSV or JSONL): F1, EM, no-answer accuracy, latency and agreement with the baseline, with
the per-question answers to download.

**API.** `/variants`, `/qa`, `/compare_qa` (every variant, as a click), `/generate`, `/score_qa` (your
file), `/qa_preset` and `/generate_preset` (another built model, by name) and `/measure_here` (the quick
bench, as the Benchmarks tab's button) are callable with `gradio_client` (see the README).
"""


def about_text() -> str:
    """The About tab, its gate paragraph generated from the gates the build checks."""
    from optimize.evaluate.gates import PROMISES, gate_descriptions

    gates = "\n".join(f"- **{promise}** ({PROMISES[promise].split(':')[0]}): {text}."
                       for promise, text in gate_descriptions().items())
    return ABOUT_TEMPLATE.replace("{gates}", gates)
