"""reports/qa-cuda.md and reports/generation-cuda.md from a `bench-cuda` record (optimize/bench/cuda.py)."""
from __future__ import annotations

EAGER = "PyTorch fp32 eager (baseline weights)"  # the row every CUDA row is compared with
NO_GRAPH = ", no CUDA graph"  # an ONNX QA variant on its dynamic session, beside the same one replayed as a graph

QA_PROMISE = ("FP16 promises the same model as its fp32 CPU source: the same answer on at least 98 % of "
              "validation questions (interval shown) and SQuAD 2.0 F1 within 1 point")
GENERATION_PROMISE = ("FP16, like INT8, promises its fp32 CPU source's quality: perplexity on the validation paragraphs "
                      "within 1.03x of the source's (the paired ratio, paragraphs resampled for its interval); greedy "
                      "tokens equal at the same position are shown beside it (a divergence early in a text counts every "
                      "token after it). A record without perplexity is judged as it was measured: at least 98 % of "
                      "greedy tokens equal")
PERPLEXITY_BUDGET = 1.03


def _machine(record: dict) -> list[str]:
    machine = record["machine"]
    return [f"Measured on **{machine['gpu']}** (driver {machine['driver']}), PyTorch {machine['torch']} "
            f"(CUDA {machine['torch_cuda']}, cuDNN {machine['cudnn']}), ONNX Runtime {machine['onnxruntime']} "
            f"({', '.join(machine['providers'])}), Python {machine['python']}; one run of "
            "`python -m optimize bench-cuda` in `experiments/gpu/cuda_showdown.sh`.", ""]


def _problems(record: dict) -> list[str]:
    lines = [f"- `{variant}` did not build: {why}" for variant, why in record["builds"].items() if why != "ready"]
    lines += [f"- `{variant}` did not load: {why}" for variant, why in record["load_failures"].items()]
    return (["## What did not work", "", *lines, ""]) if lines else []


def _promise_kept(name: str, agreement: dict, task: str) -> str:
    if name == EAGER or name not in agreement:
        return "—"
    measured = agreement[name]
    if task == "qa":
        kept = measured["same_answer"] >= 0.98 and abs(measured["f1"] - measured["source_f1"]) <= 1.0
    elif "perplexity_ratio" in measured:
        kept = measured["perplexity_ratio"] <= PERPLEXITY_BUDGET
    else:
        kept = measured["token_agreement"] >= 0.98
    return "kept" if kept else "**missed**"


def _perplexity(measured: dict) -> str:
    if "perplexity_ratio" not in measured:
        return "not measured | —"
    low, high = measured["perplexity_ratio_ci95"]
    return (f"{measured['perplexity']:.2f} ({measured['source_perplexity']:.2f}) | "
            f"{measured['perplexity_ratio']:.3f}x ({low:.3f}-{high:.3f}x)")


def markdown(record: dict) -> str:
    task, rows, agreement = record["task"], record["timings"], record["agreement"]
    title = "QA on a GPU" if task == "qa" else "Generation on a GPU"
    lines = [f"# {title}", "", *_machine(record)]
    if task == "qa":
        lines += ["Batch 1, the seed question over contexts of ~128 / 384 / 550 tokens; each call through the app's own "
                  "pre/post-processing (`models/qa.py`). *Model* is the runner's forward with its host↔GPU copies; "
                  "*total* adds tokenisation (cached per context) and span selection. Speedups are against the first "
                  f"row at the same length, p50 of {record['config']['qa_rounds']} rounds after {record['config']['warmup']} "
                  "warm-ups, in a shuffled order.", "",
                  "| tokens | variant | runs on | model p50 (ms) | model p95 (ms) | total p50 (ms) | speedup (model) | speedup (total) |",
                  "|---|---|---|---|---|---|---|---|"]
        graphs = record.get("cuda_graphs", {})
        if graphs:
            lines[-3:-3] = ["The ONNX variants run as CUDA graphs where ONNX Runtime accepts one (`models/static_encoder.py`: "
                            "the axes fixed to one 384-token window, each window padded to it and replayed); the rows marked "
                            f"*{NO_GRAPH.strip(', ')}* are the same graphs on their dynamic sessions. "
                            + "; ".join(f"`{name}`: {how}" for name, how in graphs.items() if NO_GRAPH not in name) + ".", ""]
        lines += [f"| ~{r['tokens']} | {r['variant']} | {r['device']} | {r['model_p50_ms']:.2f} | {r['model_p95_ms']:.2f} | "
                  f"{r['total_p50_ms']:.2f} | {r['speedup_model']:.2f}x | {r['speedup_total']:.2f}x |" for r in rows]
        lines += ["", "## Accuracy against the CPU source", "", QA_PROMISE + ".", "",
                  "| variant | source | questions | same answer | 95 % interval | SQuAD 2.0 F1 | source F1 | promise |",
                  "|---|---|---|---|---|---|---|---|"]
        lines += [f"| {name} | {a['source']} | {a['questions']} | {100 * a['same_answer']:.1f} % | "
                  f"{100 * a['same_answer_interval'][0]:.1f}-{100 * a['same_answer_interval'][1]:.1f} % | {a['f1']:.2f} | "
                  f"{a['source_f1']:.2f} | {_promise_kept(name, agreement, task)} |" for name, a in agreement.items()]
    else:
        lines += ["Batch 1, a ~128-token prompt, exactly 64 new tokens greedy (end-of-sequence ignored), through the "
                  "app's decoding (`models/generation.py`): transformers' `generate` with its KV cache for PyTorch, "
                  "the IO-bound loop of `models/decoding.py` for ONNX Runtime (key/value buffers on the GPU). "
                  f"p50 of {record['config']['generation_rounds']} rounds.", "",
                  "| variant | runs on | new tokens | total p50 (ms) | first token (ms) | decode tok/s | speedup (decode) | speedup (total) |",
                  "|---|---|---|---|---|---|---|---|"]
        lines += [f"| {r['variant']} | {r['device']} | {r['new_tokens']} | {r['total_p50_ms']:.1f} | {r['ttft_ms']:.1f} | "
                  f"{r['decode_tokens_per_s']:.1f} | {r['speedup_decode']:.2f}x | {r['speedup_total']:.2f}x |" for r in rows]
        lines += ["", "## Accuracy against the CPU source", "", GENERATION_PROMISE + ".", "",
                  "| variant | source | perplexity (source) | ratio (95 % interval) | prompts | greedy tokens equal | identical texts | promise |",
                  "|---|---|---|---|---|---|---|---|"]
        lines += [f"| {name} | {a['source']} | {_perplexity(a)} | {a['prompts']} | {100 * a['token_agreement']:.1f} % | "
                  f"{a['identical_texts']}/{a['prompts']} | {_promise_kept(name, agreement, task)} |"
                  for name, a in agreement.items()]
    return "\n".join([*lines, "", *_problems(record)]) + "\n"
