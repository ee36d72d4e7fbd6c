"""Timing-only probe: the bench's one-call shuffled rounds against blocks of five consecutive calls per contender
(the first of each block apart), QA at 384 tokens, every call on the showdown's model thread.
Usage: PYTHONPATH=. python experiments/qa-pruned-optimized-profile/blocks.py"""
import random, time, sys, numpy as np, torch
from models.runners import cpu_threads
from models.showdown import Showdown
from models.timing import timed_rounds
from models import qa
from optimize.bench.contenders import qa_pipelines
from optimize.publish.report import QA_QUESTION, qa_context

def blocks(contenders, rounds, block):
    out = {n: [] for n in contenders}; firsts = {n: [] for n in contenders}
    rng = random.Random(1)
    for _ in range(rounds):
        for name in rng.sample(list(contenders), len(contenders)):
            for i in range(block):
                a = time.perf_counter(); contenders[name](); dt = (time.perf_counter() - a) * 1e3
                (firsts if i == 0 else out)[name].append(dt)
    return out, firsts

torch.set_num_threads(cpu_threads())
sd = Showdown.from_environment()
outside = sd.on_model_thread(qa_pipelines, sd.runner("qa", "baseline").path)
runners = {v: sd.runner("qa", v) for v in ("baseline", "pruned", "pruned-optimized", "optimized")}
ctx = qa_context(runners["baseline"].tokenizer, 384)
cont = {n: (lambda f: lambda: f(QA_QUESTION, ctx))(f) for n, f in outside.items()}
cont.update({v: (lambda r: lambda: qa.answer(r, QA_QUESTION, ctx))(r) for v, r in runners.items()})
for rep in range(2):
    single = sd.on_model_thread(timed_rounds, cont, 60, 3)
    warm, first = sd.on_model_thread(blocks, cont, 15, 5)
    p = lambda xs: float(np.median(xs))
    s = {n: p([1e3 * t for t, _ in v]) for n, v in single.items()}
    w = {n: p(v) for n, v in warm.items()}; f = {n: p(v) for n, v in first.items()}
    for n in cont:
        print(f"{n:20s} single {s[n]:6.2f}  block-first {f[n]:6.2f}  block-warm {w[n]:6.2f}")
    for m, d in (("single", s), ("first", f), ("warm", w)):
        print(m, "p-o vs pipeline %.2fx" % (d["pipeline-fp32"] / d["pruned-optimized"]),
              "p-o vs int8 %.2fx" % (d["optimum-int8"] / d["pruned-optimized"]),
              "pruned vs baseline %.2fx" % (d["baseline"] / d["pruned"]))
