"""What a fused Q4_1 kernel would buy over ONNX Runtime's MatMulNBits (issue 12), measured before
anyone writes a custom op: one decode row (M = 1) through real SmolLM2 weights from the GGUF.

The kernel (C, AVX-512, compiled here with gcc, called through ctypes) reads the GGUF's own codes
and computes y[n] = Σ_b d[n,b]·(x_b · q[n,b]) + Σ_b m[n,b]·Σ x_b in fp32: the minimum term inside
the same pass, where the `gguf-q4` graph spends four extra nodes per weight on it. It is compared
with the graph's own form (MatMulNBits, zero point 0, + minimum term, accuracy level 0), fp32
MatMul, and the fast but inexact int8-compute form. A probe, not a runtime path: serving it would
need an ONNX Runtime custom-op library, built against ONNX Runtime's C API headers, which neither
the onnxruntime wheel nor Debian bookworm carries, and a compiler on every user's machine.

Usage: python experiments/fused-q4-1-kernel/measure.py   (needs gcc and an AVX-512 CPU)
"""
from __future__ import annotations

import ctypes
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))  # run as a script: the project's packages come from the checkout

KERNEL = r"""
#include <immintrin.h>
#include <stdint.h>
/* codes: per row, per block of 32, 16 bytes: low nibble = element j, high nibble = element j + 16 */
void q4_1_gemv(const float* x, int K, const uint8_t* codes, const float* d, const float* m, int N, float* y, int threads) {
  int B = K / 32;
  float xsum[B];
  for (int b = 0; b < B; b++) { float s = 0; for (int j = 0; j < 32; j++) s += x[b * 32 + j]; xsum[b] = s; }
  #pragma omp parallel for num_threads(threads) schedule(static)
  for (int n = 0; n < N; n++) {
    const uint8_t* row = codes + (size_t)n * B * 16;
    const float* dn = d + (size_t)n * B;
    const float* mn = m + (size_t)n * B;
    const __m128i low4 = _mm_set1_epi8(0x0F);
    __m512 acc = _mm512_setzero_ps();
    for (int b = 0; b < B; b++) {
      __m128i q = _mm_loadu_si128((const __m128i*)(row + b * 16));
      __m512 lo = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_and_si128(q, low4)));
      __m512 hi = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_and_si128(_mm_srli_epi16(q, 4), low4)));
      __m512 dot = _mm512_fmadd_ps(hi, _mm512_loadu_ps(x + b * 32 + 16), _mm512_mul_ps(lo, _mm512_loadu_ps(x + b * 32)));
      acc = _mm512_fmadd_ps(dot, _mm512_set1_ps(dn[b]), acc);
    }
    float minimum_term = 0;
    for (int b = 0; b < B; b++) minimum_term += mn[b] * xsum[b];
    y[n] = _mm512_reduce_add_ps(acc) + minimum_term;
  }
}
"""
WEIGHTS = ("model.layers.0.mlp.up_proj.weight", "model.layers.0.mlp.down_proj.weight")
GRAPHS = ("fp32 MatMul", "zp 0 + min term, acc 0", "uint8 zp round(−m/d), acc 4")


def compile_kernel(directory: Path) -> ctypes.CDLL:
    source, library = directory / "q4_1_gemv.c", directory / "libq4_1_gemv.so"
    source.write_text(KERNEL)
    subprocess.run(["gcc", "-O3", "-march=native", "-fopenmp", "-shared", "-fPIC", str(source), "-o", str(library)], check=True)
    kernel = ctypes.CDLL(str(library))
    kernel.q4_1_gemv.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                                 ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
    return kernel


def median_us(call, calls: int = 300, warmup: int = 20) -> float:
    """One contender's calls back to back, not models.timing.timed_rounds' shuffled rounds: at tens of
    µs per call, interleaving four sessions lets each one's spinning worker threads and cold caches
    time the next (MatMulNBits at 2 threads read 236 µs interleaved, 27 µs back to back)."""
    for _ in range(warmup):
        call()
    seconds = []
    for _ in range(calls):
        started = time.perf_counter()
        call()
        seconds.append(time.perf_counter() - started)
    return 1e6 * statistics.median(seconds)


def main() -> None:
    from models.sources import smollm2_gguf
    from optimize.bench import gguf_grid as gguf_grid_bench
    from optimize.export import gguf_grid

    grid = gguf_grid.read_grid(smollm2_gguf())
    with tempfile.TemporaryDirectory() as scratch:
        kernel = compile_kernel(Path(scratch))
        print("| weight [N, K] | threads | " + " | ".join(GRAPHS) + " | fused C kernel | its max abs error |")
        print("|---" * (len(GRAPHS) + 4) + "|")
        for name in WEIGHTS:
            weight = grid[name]
            N, K = weight.shape
            blocks = weight.codes.reshape(N, K // 32, 32)
            codes = np.ascontiguousarray(blocks[..., :16] | (blocks[..., 16:] << 4), dtype=np.uint8)
            scales, minimums = np.ascontiguousarray(weight.scales), np.ascontiguousarray(weight.minimums)
            x = np.random.default_rng(0).standard_normal((1, K)).astype(np.float32)
            y = np.zeros(N, np.float32)
            exact = (x.astype(np.float64) @ weight.dequantize().astype(np.float64).T)[0]
            graphs = {key: graph for key, graph in gguf_grid_bench.variants(weight).items() if key in GRAPHS}
            for threads in (1, 2):
                def fused(threads=threads):
                    kernel.q4_1_gemv(x.ctypes.data, K, codes.ctypes.data, scales.ctypes.data, minimums.ctypes.data,
                                     N, y.ctypes.data, threads)
                sessions = {key: gguf_grid_bench.session(graph, threads) for key, graph in graphs.items()}
                timings = [median_us(lambda s=sessions[key]: s.run(None, {"x": x})) for key in GRAPHS]
                fused_us = median_us(fused)
                error = float(np.abs(y - exact).max())
                cells = " | ".join(f"{us:.1f}" for us in timings)
                print(f"| {name.split('layers.0.')[1]} [{N}, {K}] | {threads} | {cells} | **{fused_us:.1f}** | {error:.1e} |")


if __name__ == "__main__":
    main()
