"""`python -m optimize build`: baseline → ONNX (optimum for encoders; the ONNX Runtime GenAI builder or the
GGUF's own weights for decoders) → ORT graph optimization → INT8 on CPU (FP16 on CUDA), then accuracy
against the source, written atomically with a manifest.

A build whose manifest records the same inputs (source weights' sha256 and this config), whose files still
match it and (for a strict build) which missed no gate is skipped; `--force` rebuilds. Each build resolves its `BuildTarget` once (the preset, the variant,
the source it is built from, where it goes, what it is built from); every step below reads it.
"""
from __future__ import annotations

import json
import logging
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from models.catalog import Preset, Variant
from models.decoding import DecodingConfig
from models.errors import VariantUnavailable
from models.machine import cpu_name
from models.manifest import atomic_dir, read_manifest, sha256, size_bytes, source_fingerprint, verify, write_manifest
from models.runners import ONNX_FILE, SESSION_FILE, providers
from models.sources import resolve
from optimize.evaluate import pruned_promise
from optimize.evaluate.gates import GateFailed, check, failures, gate_inputs, serves
from optimize.export import layer_norm
from optimize.export.gguf_graft import source_gguf
from optimize.export.onnx import EXPORT_TASKS, KEEP_FILES, add_logits_to_keep, export, faster_graph, genai_build, graph_optimize
from optimize.progress import stage
from optimize.prune.encoder_layout import UnsupportedArchitecture
from optimize.quantize import ladder_record
from optimize.quantize.ort import quantize_dynamic, quantize_weight_only
from optimize.quantize.recipes import OnnxRecipe, cuda_ladder, recipe_ladder

log = logging.getLogger(__name__)
Progress = Callable[[str], None]


@dataclass(frozen=True)
class BuildTarget:
    """One variant to build, resolved once."""

    preset: Preset
    variant: Variant
    source: Path  # the weights it is built from, resolved (fetched, converted) once
    directory: Path  # where it is published
    inputs: dict = field(default_factory=dict)  # what it is built from, as its manifest records it

    @classmethod
    def resolve(cls, preset: Preset, variant_name: str) -> BuildTarget:
        variant = preset.variant(variant_name)
        return cls(preset, variant, resolve(preset, preset.variant(variant.built_from)), preset.built_dir(variant_name))

    @property
    def name(self) -> str:
        return f"{self.preset.name}/{self.variant.name}"

    def with_inputs(self, **inputs) -> BuildTarget:
        """The source's fingerprint and `inputs`, as the manifest stores them (JSON round trip)."""
        recorded = {"source": str(self.source), "source_sha256": source_fingerprint(self.source), **inputs}
        return replace(self, inputs=json.loads(json.dumps(recorded)))

    def up_to_date(self, force: bool, progress: Progress, strict: bool = True) -> bool:
        """Built from the same inputs, every file still as the manifest recorded it (a corrupt artifact: truncated,
        edited, a file missing, is rebuilt), and, for a strict build, with no gate missed: a build published with
        `--allow-missed-gates` does not pass for a strict one, which measures again and fails."""
        manifest = {} if force or verify(self.directory) else read_manifest(self.directory) or {}
        if (strict and (manifest.get("metrics") or {}).get("gates_missed")) or not serves(manifest.get("inputs"), self.inputs):
            return False
        progress(f"{self.name}: up to date, skipped")
        return True


def build_onnx(preset: Preset, variant_name: str, recipe: OnnxRecipe | None = None, force: bool = False,
               progress: Progress = log.info, evaluate: bool = True, strict: bool = True,
               full_ladder: bool = False, directory: Path | None = None) -> Path:
    """`directory`: publish somewhere other than the variant's own folder (a rung the bench shows
    beside the one that ships, gated on its own promise)."""
    target = BuildTarget.resolve(preset, variant_name)
    target = replace(target, directory=directory) if directory else target
    built = _build_onnx(target, recipe, force, progress, evaluate, strict, full_ladder)
    if evaluate and not directory and target.variant.built_from in pruned_promise.trained_pruned(preset):
        try:  # the trained source's own promise, for the app; the variant just built stands either way
            pruned_promise.ensure(preset, target.variant.built_from)
        except (OSError, ValueError, VariantUnavailable) as error:
            progress(f"{preset.name}/{target.variant.built_from}: its promise against the baseline was not measured: {error}")
    return built


def decoding_inputs(target: BuildTarget, cuda: bool) -> dict:
    """Prompt lookup as the variant's default decoding, where it runs: on the CPU only (models/decoding.py), so a
    CUDA build neither saves it nor says it decodes that way."""
    wanted = target.variant.prompt_lookup and target.preset.task == "generation"
    return {"prompt_lookup": True} if wanted and not cuda else {}


def _build_onnx(target: BuildTarget, recipe: OnnxRecipe | None, force: bool, progress: Progress, evaluate: bool,
                strict: bool, full_ladder: bool) -> Path:
    """Build an ONNX Runtime variant of `preset` from the variant it is built from.

    A missed accuracy gate fails the build (nothing is published). With no explicit recipe, the
    task's recipes are tried fastest first (`recipe_ladder`) and the first that passes its gates is
    published, with the rejected ones and their misses in its manifest (a strict build measures a
    recipe only until its agreement gate is out of reach). `strict=False` publishes the first recipe
    even when it misses a gate, recording the miss (the app shows it), measured in full. A built-in
    preset's rungs already rejected for the same source on this CPU class are not measured again
    (optimize/quantize/ladder_record.py) unless `full_ladder`, which measures all and records them; a rung
    with no record that is measured and rejected is added to the record."""
    preset, variant_name = target.preset, target.variant.name
    cuda = providers()[0] == "CUDAExecutionProvider"
    ladder = [recipe] if recipe else cuda_ladder(preset.task) if cuda else recipe_ladder(
        preset.task, from_gguf=preset.task == "generation" and source_gguf(preset, variant_name) is not None)
    if not strict:
        ladder = ladder[:1]
    target = target.with_inputs(recipes=[asdict(r) for r in ladder], cuda=cuda, **decoding_inputs(target, cuda),
                                **gate_inputs(target.preset.task, evaluate, target.preset.reading_questions))
    if target.up_to_date(force, progress, strict):
        return target.directory
    inputs = target.inputs
    rejected: list[dict] = []
    # only a gated CPU build of the default ladder has rejections worth recording (one explicit recipe is no ladder)
    measured = evaluate and strict and not cuda and recipe is None
    known = ladder_record.known_rejections(preset.name, variant_name, inputs["source_sha256"], inputs.get("gated_on")) if measured else {}
    with tempfile.TemporaryDirectory(prefix="ladder-") as shared:  # graphs the rungs have in common, made once
        for index, candidate in enumerate(ladder):
            recorded = None if full_ladder else known.get(ladder_record.canonical(inputs["recipes"][index]))
            if recorded and index < len(ladder) - 1:
                rejected.append({**recorded, "missed": f"{recorded['missed']} (measured {recorded['recorded']}; "
                                                       "not measured again: `build --full-ladder`)"})
                progress(f"{target.name}: skipping a recipe recorded as rejected for this source "
                         f"({recorded['recorded']}): {recorded['missed']}")
                continue
            try:
                built = _build_onnx_once(target, candidate, cuda, progress, evaluate, strict, rejected, Path(shared))
                if measured and full_ladder:
                    ladder_record.record(preset.name, variant_name, inputs["source_sha256"], rejected, cpu_name(), inputs.get("gated_on"))
                elif measured and any("recorded" not in r for r in rejected):  # a rung new to the ladder, measured
                    ladder_record.add(preset.name, variant_name, inputs["source_sha256"], rejected, cpu_name(), inputs.get("gated_on"))
                return built
            except (GateFailed, UnsupportedArchitecture) as error:  # missed its gates, or cannot apply here
                if index == len(ladder) - 1:
                    raise
                rejected.append({"recipe": asdict(candidate), "missed": str(error),
                                 "gates_missed": getattr(error, "missed", [])})
                progress(f"{target.name}: {error} Trying the next recipe.")
    raise AssertionError("unreachable")


def _build_onnx_once(target: BuildTarget, recipe: OnnxRecipe, cuda: bool, progress: Progress, evaluate: bool,
                     strict: bool, rejected: list[dict], shared: Path) -> Path:
    steps = []
    with atomic_dir(target.directory) as staging:
        work = staging / "work"
        exact = False  # the graph carries its source's weights bit for bit and computes in fp32
        session = {}  # the sessions' settings measured for this graph on this CPU (models/runners.py session_settings)
        if recipe.exporter == "gguf-grid":
            current, exact = _gguf_grid_steps(target, work, recipe, cuda, steps, progress)
        elif recipe.exporter == "genai-builder":
            with stage(progress, f"{target.name}: ONNX Runtime GenAI model builder (fused graph, "
                                 f"{'fp16' if cuda else 'INT8 weights' if recipe.quantize else 'fp32'})"):
                current, fp32_layers = genai_build(target.source, work / "genai", recipe, cuda)
            weights = "fp16" if cuda else (f"MatMulNBits int{recipe.weight_only_bits} block {recipe.block_size}"
                       + (f", fp32 {' + '.join(recipe.keep_fp32)}" if recipe.keep_fp32 else "")
                       + (f", fp32 attention in the most INT8-sensitive layers {fp32_layers}" if fp32_layers else "")
                       + (f", {'MLPs + attention' if recipe.smooth_attention else 'MLPs'} SmoothQuant α={recipe.smooth_alpha}"
                          if recipe.smooth_alpha else "") if recipe.quantize else "fp32")
            steps.append(f"export+fuse+quantize (onnxruntime-genai model builder: GroupQueryAttention, {weights})")
        else:
            current, session = _optimum_steps(target, work, shared, recipe, cuda, steps, progress)
        if recipe.exporter != "optimum":
            add_logits_to_keep(current)
            steps.append("logits_to_keep input: the LM head runs on the last position only when decoding")
        for path in current.parent.iterdir():
            if path.name.startswith(ONNX_FILE):  # copied out of the rungs' shared graphs, moved out of this one's
                (shutil.copy if shared in path.parents else shutil.move)(path, staging / path.name)
        for name in KEEP_FILES:
            if (target.source / name).exists():
                shutil.copy(target.source / name, staging / name)
        if session:
            (staging / SESSION_FILE).write_text(json.dumps(session) + "\n")
        if target.inputs.get("prompt_lookup"):  # measured and shipped decoding this way (models/decoding.py)
            DecodingConfig(prompt_lookup=True).save(staging)
            steps.append("decodes with exact prompt lookup by default (every pass on the filled graph)")
        shutil.rmtree(work, ignore_errors=True)
        metrics = {}
        if evaluate:
            promise = promise_of(recipe, cuda, exact)
            metrics = _evaluate(target, staging, strict, progress, promise, weights_exact=exact)
        if rejected:
            metrics["rejected_recipes"] = rejected
            steps.append(f"(chosen after {len(rejected)} faster recipe(s) missed an accuracy gate)")
        _write_manifest(target, staging, steps, metrics)
    return _ready(target, metrics, progress)


def promise_of(recipe: OnnxRecipe, cuda: bool, weights_exact: bool) -> str:
    """"exact" only for the source's weights and arithmetic; INT8, the GGUF grid's int8 compute and FP16 (CUDA) are lossy."""
    return "lossy" if cuda or recipe.quantize or (recipe.exporter == "gguf-grid" and not weights_exact) else "exact"


def _gguf_grid_steps(target: BuildTarget, work: Path, recipe: OnnxRecipe, cuda: bool, steps: list[str],
                     progress: Progress) -> tuple[Path, bool]:
    """The builder's fp32 graph, then every weight back on the source GGUF's grid (optimize/export/gguf_graft.py).
    Returns the model and whether it computes the source's model exactly (fp32 compute, level 0)."""
    from optimize.export import gguf_graft
    from optimize.export.gguf_grid import read_grid

    if cuda:
        raise ValueError("the gguf-grid recipe is CPU-only (MatMulNBits with a minimum term)")
    gguf = gguf_graft.gguf_file(target.preset, target.variant.name)
    progress(f"{target.name}: ONNX Runtime GenAI model builder (fp32), then {gguf.name}'s own weights")
    current, _ = genai_build(target.source, work / "genai", OnnxRecipe(quantize=False, exporter="genai-builder"), cuda)
    level = 4 if recipe.quantize else 0
    counts = gguf_graft.graft(current, read_grid(gguf), accuracy_level=level, minimum_bits=recipe.minimum_bits,
                              fold_minimums=recipe.fold_minimums)
    requantized = counts.pop("re-quantized Q4_1")
    steps.append(f"export+fuse (onnxruntime-genai model builder, fp32: GroupQueryAttention), then the weights of {gguf.name} "
                 f"as they are, bit-exact: {', '.join(f'{n} {kind}' for kind, n in counts.items() if n)}"
                 + (f"; {requantized} weights moved by training re-quantized to Q4_1" if requantized else "")
                 + ("; the Q4_1 minimums folded into each weight's one MatMulNBits (its 4-bit zero points, the residual as "
                    "8-bit codes)" if recipe.fold_minimums
                    else "; the Q4_1 minimums read as 8-bit (blocks of 16)" if recipe.minimum_bits == 8 else "")
                 + f"; accuracy level {level} ({'int8' if level else 'fp32'} compute)")
    return current, level == 0 and not requantized and recipe.minimum_bits == 32


def _optimum_steps(target: BuildTarget, work: Path, shared: Path, recipe: OnnxRecipe, cuda: bool, steps: list[str],
                   progress: Progress) -> tuple[Path, dict]:
    """optimum export → ORT graph optimization → INT8 (CPU); returns the final model path and its session settings."""
    name = target.name
    current, graph_steps, session = _optimum_graph(target, shared / f"opset{recipe.opset}-level{recipe.optimization_level}",
                                                   recipe, cuda, progress)
    steps.extend(graph_steps)
    if recipe.quantize and not cuda and recipe.weight_only_bits:
        with stage(progress, f"{name}: weight-only INT{recipe.weight_only_bits} quantization"):
            current = quantize_weight_only(current.parent, work / "quantized", recipe.weight_only_bits, recipe.block_size)
        steps.append(f"quantize-weight-only-int{recipe.weight_only_bits} (MatMulNBits, block {recipe.block_size}, "
                     "accuracy level 4)")
    elif recipe.quantize and not cuda:
        with stage(progress, f"{name}: dynamic INT8 quantization"):
            current = quantize_dynamic(current.parent, work / "quantized", recipe)
        steps.append(f"quantize-dynamic-int8 (per_channel={recipe.per_channel}, reduce_range={recipe.reduce_range}"
                     + (f", fp32: {', '.join(recipe.keep_fp32)}" if recipe.keep_fp32 else "") + ")")
    return current, session


def _optimum_graph(target: BuildTarget, work: Path, recipe: OnnxRecipe, cuda: bool,
                   progress: Progress) -> tuple[Path, list[str], dict]:
    """Export and graph optimization, and the faster of the two graphs: the same for every rung that
    differs only in what it quantizes, so a ladder makes it once (kept in `work` with its steps). Also the
    session settings it is timed and served with (optimize/export/layer_norm.py)."""
    record = work / "graph.json"
    if record.exists():
        made = json.loads(record.read_text())
        return Path(made["graph"]), made["steps"], made["session"]
    steps, name, task, session = [], target.name, target.preset.task, {}
    timed = task == "qa" and not cuda  # an encoder on the CPU: its kernels and graphs are timed here
    with stage(progress, f"{name}: exporting {target.variant.built_from} to ONNX"):
        current = export(target.source, work / "export", task, recipe.opset)
    steps.append(f"export-onnx (optimum, task {EXPORT_TASKS[task]})")
    if recipe.optimization_level:
        exported = current
        if timed:
            with stage(progress, f"{name}: timing ONNX Runtime's SkipLayerNormalization against Add + LayerNormalization"):
                session, line = layer_norm.choose(target.source)
        with stage(progress, f"{name}: ORT graph optimization level {recipe.optimization_level}"):
            current = graph_optimize(current.parent, work / "optimized", recipe.optimization_level, cuda, not session)
        steps.append(f"graph-optimize (level {recipe.optimization_level}{', fp16' if cuda else ''})")
        if timed:
            with stage(progress, f"{name}: timing the fused graph against ONNX Runtime's own load-time fusions"):
                current, kept_line = faster_graph(current, exported, session)
            steps.extend([kept_line, line])
    record.write_text(json.dumps({"graph": str(current), "steps": steps, "session": session}))
    return current, steps, session


def build_assembled(preset: Preset, variant_name: str, force: bool = False, progress: Progress = log.info,
                    evaluate: bool = True, strict: bool = True) -> Path:
    return _build_assembled(BuildTarget.resolve(preset, variant_name), force, progress, evaluate, strict)


def _build_assembled(target: BuildTarget, force: bool, progress: Progress, evaluate: bool, strict: bool) -> Path:
    """A pruned decoder assembled from its baseline and a committed plan + recovery delta
    (optimize/prune/decoder.py): the recovered weights are data-dependent, but committing them
    whole would break the 150 MB cap, so only what training produced is committed."""
    from models.catalog import REPO_ROOT
    from optimize.prune.decoder import DELTA_FILE, PLAN_FILE, assemble

    variant = target.variant
    recipe_dir = REPO_ROOT / variant.recipe_dir
    if not (recipe_dir / DELTA_FILE).exists():
        raise FileNotFoundError(f"No pruning plan at {variant.recipe_dir}; run `python -m optimize prune --task {target.preset.task}`.")
    target = target.with_inputs(recipe_sha256=source_fingerprint(recipe_dir), **gate_inputs(target.preset.task, evaluate, target.preset.reading_questions))
    if target.up_to_date(force, progress, strict):
        return target.directory
    plan = json.loads((recipe_dir / PLAN_FILE).read_text())
    with atomic_dir(target.directory) as staging:
        with stage(progress, f"{target.name}: assembling from {variant.built_from} + {variant.recipe_dir}"):
            assemble(target.source, recipe_dir, staging)
        metrics = _evaluate(target, staging, strict, progress, "pruned") if evaluate else {}
        _write_manifest(target, staging, [f"drop layers {plan['dropped_layers']}", f"keep FFN neurons per layer: {plan['ffn_kept']}",
                                          "apply LoRA + norm recovery delta"], metrics,
                        source=f"{target.preset.name}/{variant.built_from} + {variant.recipe_dir}")
    return _ready(target, metrics, progress)


def _build_pruned(target: BuildTarget, force: bool, progress: Progress, evaluate: bool, strict: bool) -> Path:
    """A user's model pruned and recovered by the build itself (`Variant.prune`: shares kept, recovery
    steps), then measured and gated as a `pruned` variant against its source."""
    from optimize.train import distil_decoder, recover_qa

    variant = target.variant
    data = Path(variant.prune.data) if variant.prune.data else None  # its bytes too: an edited file is new recovery data
    target = target.with_inputs(prune=asdict(variant.prune), **({"data_sha256": sha256(data)} if data and data.is_file() else {}),
                                **gate_inputs(target.preset.task, evaluate, target.preset.reading_questions))
    if target.up_to_date(force, progress, strict):
        return target.directory
    with atomic_dir(target.directory) as staging:
        with stage(progress, f"{target.name}: structured pruning of {variant.built_from}, then distillation"):
            recovery = recover_qa if target.preset.task == "qa" else distil_decoder
            cut = recovery.prune_and_recover(target.source, staging, variant.prune, progress)
        metrics = _evaluate(target, staging, strict, progress, "pruned") if evaluate else {}
        heads = f"{cut['heads_kept']}/{cut['heads']} heads and " if "heads" in cut else ""
        steps = [f"structured-prune: {heads}{cut['ffn_kept']}/{cut['ffn']} FFN neurons per layer, {cut['layers']} layers"
                 + (f" (dropped {cut['dropped_layers']})" if cut.get("dropped_layers") else ""),
                 f"distill from {variant.built_from} ({cut['recovery_steps']} steps)"]
        _write_manifest(target, staging, steps, metrics)
    return _ready(target, metrics, progress)


def _write_manifest(target: BuildTarget, staging: Path, steps: list[str], metrics: dict, source: str = "") -> None:
    write_manifest(staging, source=source or f"{target.preset.name}/{target.variant.built_from}", steps=steps,
                   metrics=metrics, inputs=target.inputs, size_bytes=size_bytes(staging), preset=target.preset.name,
                   variant=target.variant.name)


def _ready(target: BuildTarget, metrics: dict, progress: Progress) -> Path:
    progress(f"{target.name}: ready ({size_bytes(target.directory) / 1e6:.1f} MB) {json.dumps(metrics)}")
    return target.directory


def build_variant(preset: Preset, variant_name: str, recipe: OnnxRecipe | None = None, force: bool = False,
                  progress: Progress = log.info, evaluate: bool = True, strict: bool = True,
                  full_ladder: bool = False) -> Path:
    """Whatever building `variant_name` means: assemble a committed plan, prune a user's model, run
    the ONNX recipe ladder, or fetch/convert a source that is not built (resolve)."""
    variant = preset.variant(variant_name)
    if not (variant.recipe_dir or variant.prune or variant.runtime == "onnxruntime"):
        return resolve(preset, variant)
    target = BuildTarget.resolve(preset, variant_name)
    if variant.recipe_dir:
        return _build_assembled(target, force, progress, evaluate, strict)
    if variant.prune:
        return _build_pruned(target, force, progress, evaluate, strict)
    return build_onnx(preset, variant_name, recipe, force, progress, evaluate, strict, full_ladder)


def build_preset(preset: Preset, force: bool = False, progress: Progress = log.info, evaluate: bool = True,
                 strict: bool = True) -> dict[str, str]:
    """Every variant in order (each after the one it is built from). One that cannot be built gets
    its reason and the others still build; returns variant -> "ready" or the reason."""
    outcome: dict[str, str] = {}
    for variant in preset.variants:
        if variant.built_from and outcome.get(variant.built_from, "ready") != "ready":
            outcome[variant.name] = f"not built: {variant.built_from} is missing"
            continue
        try:
            build_variant(preset, variant.name, force=force, progress=progress, evaluate=evaluate, strict=strict)
            outcome[variant.name] = "ready"
        except Exception as error:  # noqa: BLE001 - one variant's failure is reported; the others still build
            said = isinstance(error, (GateFailed, UnsupportedArchitecture, VariantUnavailable))  # its message is the reason
            outcome[variant.name] = str(error) if said else f"{type(error).__name__}: {error}"
            log.warning("%s/%s not built", preset.name, variant.name, exc_info=not said)  # a trace only for a fault of ours
            progress(f"{preset.name}/{variant.name}: {outcome[variant.name]}")
    return outcome


def _evaluate(target: BuildTarget, staging: Path, strict: bool, progress: Progress, promise: str,
              weights_exact: bool = False) -> dict:
    """`promise` (exact, lossy, pruned: optimize/evaluate/gates.py) decides which gate applies; it and a
    one-line summary of the gated measures go into the manifest for /variants and the app."""
    from optimize.evaluate.accuracy import measure
    from optimize.evaluate.gates import promise_line

    preset, variant = target.preset, target.variant
    with stage(progress, f"{target.name}: measuring accuracy against {variant.built_from} ({promise})"):
        metrics = measure(preset, staging, variant.name, reference=target.source, promise=promise, stop_below_gate=strict)
    metrics["promise"] = promise
    if weights_exact:
        metrics["weights_exact"] = True
    metrics["summary"] = promise_line(preset.task, variant.runtime, metrics)
    _gate(target, metrics, strict, progress)
    return metrics


def _gate(target: BuildTarget, metrics: dict, strict: bool, progress: Progress) -> None:
    """Strict (the default): a missed gate fails the build and nothing is published. Lenient
    (`--allow-missed-gates`): the miss is recorded in the manifest and shown by the app."""
    task, runtime = target.preset.task, target.variant.runtime
    missed = failures(task, runtime, metrics)
    if not missed:
        return
    metrics["gates_missed"] = missed
    if strict:
        check(target.name, task, runtime, metrics)
    progress(f"{target.name}: WARNING missed accuracy gate: {'; '.join(missed)}")
