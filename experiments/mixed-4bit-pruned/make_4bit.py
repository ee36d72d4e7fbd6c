"""Issue 49 probe: `pruned-optimized` with chosen layers' MatMulNBits re-quantized from 8-bit (blocks of 64) to 4-bit
(symmetric round-to-nearest, blocks of 32, int8 compute; the LM head stays 8-bit). A speed and perplexity probe,
not a build: the codes come from the shipped 8-bit weights.

    PYTHONPATH=. python experiments/mixed-4bit-pruned/make_4bit.py /tmp/mixed/all all   # all | mlp | half (even layers)
"""
import shutil, sys
from pathlib import Path
import numpy as np, onnx
from onnx import helper, numpy_helper

SRC = Path("artifacts/generation-smollm2/pruned-optimized")
def main(out: Path, select):
    out.mkdir(parents=True, exist_ok=True)
    for f in SRC.iterdir():
        if f.name not in ("model.onnx", "model.onnx.data"):
            shutil.copy(f, out / f.name)
    m = onnx.load(str(SRC / "model.onnx"))
    inits = {i.name: i for i in m.graph.initializer}
    new_nodes, drop = [], set()
    for n in m.graph.node:
        if n.op_type != "MatMulNBits" or not select(n.name):
            new_nodes.append(n); continue
        at = {a.name: a.i for a in n.attribute}
        K, N, bs = at["K"], at["N"], at["block_size"]
        q = numpy_helper.to_array(inits[n.input[1]]).astype(np.float32)  # N, nblk, bs
        s = numpy_helper.to_array(inits[n.input[2]]).reshape(N, -1, 1)
        zp = 128.0
        w = ((q - zp) * s).reshape(N, -1)[:, :K]  # N x K
        name = n.input[1] + "_fp32"
        m.graph.initializer.append(numpy_helper.from_array(np.ascontiguousarray(w.T), name))
        drop |= {n.input[1], n.input[2]}
        new_nodes.append(helper.make_node("MatMul", [n.input[0], name], list(n.output), name=n.name.replace("_Q8", "")))
    del m.graph.node[:]; m.graph.node.extend(new_nodes)
    keep = [i for i in m.graph.initializer if i.name not in drop]
    del m.graph.initializer[:]; m.graph.initializer.extend(keep)
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer
    qz = MatMulNBitsQuantizer(m, bits=4, block_size=int(sys.argv[3]) if len(sys.argv) > 3 else 32, is_symmetric=True, accuracy_level=4)
    qz.process()
    qz.model.save_model_to_file(str(out / "model.onnx"), use_external_data_format=True)
    print("saved", out, sum(1 for n in qz.model.model.graph.node if n.op_type == "MatMulNBits"))

if __name__ == "__main__":
    which = sys.argv[2]
    sel = {"all": lambda name: "/layers." in name,
           "mlp": lambda name: "/mlp/" in name,
           "half": lambda name: "/layers." in name and int(name.split("/layers.")[1].split("/")[0]) % 2 == 0}[which]
    main(Path(sys.argv[1]), sel)
