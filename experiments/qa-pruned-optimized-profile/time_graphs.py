"""Graphs timed side by side at N tokens in rotating rounds (ROUNDS, default 40), their outputs against the first.
Usage: ROUNDS=60 python experiments/qa-pruned-optimized-profile/time_graphs.py 384 GRAPH.onnx ..."""
import sys, time, numpy as np, onnxruntime as ort
paths = sys.argv[2:]; n = int(sys.argv[1])
def sess(p):
    so = ort.SessionOptions(); so.intra_op_num_threads = 2
    so.add_session_config_entry("optimization.disable_specified_optimizers", "SkipLayerNormFusion")
    so.add_session_config_entry("session.intra_op.spin_duration_us", "100")
    return ort.InferenceSession(p, so, providers=["CPUExecutionProvider"])
ss = [sess(p) for p in paths]
rng = np.random.default_rng(0)
feed = {"input_ids": rng.integers(1000, 8000, (1, n)).astype(np.int64),
        "attention_mask": np.ones((1, n), np.int64), "token_type_ids": np.zeros((1, n), np.int64)}
feed["token_type_ids"][0, 20:] = 1
ref = ss[0].run(None, feed)
for p, s in zip(paths, ss):
    out = s.run(None, feed)
    print(p, "max|diff| start/end", [float(np.abs(a - b).max()) for a, b in zip(out, ref)])
times = {p: [] for p in paths}
for r in range(int(__import__('os').environ.get('ROUNDS','40'))):
    order = list(zip(paths, ss)); order = order[r % len(order):] + order[:r % len(order)]
    for p, s in order:
        for _ in range(5):
            a = time.perf_counter(); s.run(None, feed); times[p].append((time.perf_counter() - a) * 1e3)
for p in paths: print(f"{p:70s} p50 {np.median(times[p]):.2f} ms")
