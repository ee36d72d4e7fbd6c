"""ONNX Runtime's profiler on a QA graph at 384 tokens: each op type's share of kernel time.
Usage: python experiments/qa-pruned-optimized-profile/profile.py artifacts/qa-minilm-squad2/pruned-optimized/model.onnx"""
import json, sys, time, collections, numpy as np, onnxruntime as ort
path = sys.argv[1]
so = ort.SessionOptions(); so.intra_op_num_threads = 2
so.add_session_config_entry("optimization.disable_specified_optimizers", "SkipLayerNormFusion")
so.add_session_config_entry("session.intra_op.spin_duration_us", "100")
so.enable_profiling = True
s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
n = 384
feed = {"input_ids": np.random.randint(1000, 2000, (1, n)).astype(np.int64),
        "attention_mask": np.ones((1, n), np.int64), "token_type_ids": np.zeros((1, n), np.int64)}
feed = {k: v for k, v in feed.items() if k in [i.name for i in s.get_inputs()]}
for _ in range(20): s.run(None, feed)
t=[]
for _ in range(100):
    a=time.perf_counter(); s.run(None, feed); t.append((time.perf_counter()-a)*1e3)
print("p50", np.median(t))
prof = s.end_profiling()
ev = json.load(open(prof))
by = collections.Counter(); cnt = collections.Counter()
for e in ev:
    if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
        op = e["args"]["op_name"]; by[op] += e["dur"]; cnt[op] += 1
tot = sum(by.values())
for op, d in by.most_common(): print(f"{op:35s} {d/tot*100:5.1f}%  {d/120/1000:.3f} ms/run  calls/run {cnt[op]/120:.0f}")
