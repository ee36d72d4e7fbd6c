"""`python -m optimize push --repo-prefix ORG/NAME`: one Hub model repo per variant,
`ORG/NAME-<task>-<variant>` (a repo per variant keeps each loadable on its own with
`from_pretrained` / `ORTModelFor*.from_pretrained`), with the artifacts, a model card and the report.

The token comes from HF_TOKEN or the login cache (huggingface_hub's own lookup); it is never
printed or written anywhere.
"""
from __future__ import annotations

import json
import logging
from pathlib import Path

from huggingface_hub import CommitOperationAdd, CommitOperationDelete, HfApi, ModelCard, ModelCardData

from models.catalog import Preset, Variant
from models.catalog import pushed_repo as repo_id
from models.errors import InputError
from models.manifest import read_manifest, stale_source
from models.reports import REPORTS_DIR, Report
from models.runners import session_settings
from models.showdown import Showdown

log = logging.getLogger("optimize.publish.push")


MARKER = "showdown.json"  # which preset's variant a repo holds: a second preset pushed to the same prefix is refused


def pushed_preset_name(api: HfApi, repo: str) -> str | None:
    """The preset an earlier push put in `repo`, or None (no such repo, or pushed before the marker)."""
    from huggingface_hub.errors import RepositoryNotFoundError

    try:  # one request, as the rest of push makes them: a Hub that cannot be reached fails here, at once
        info = api.model_info(repo)
    except RepositoryNotFoundError:
        return None
    if MARKER not in {sibling.rfilename for sibling in info.siblings or []}:
        return None
    return json.loads(Path(api.hf_hub_download(repo, MARKER)).read_text()).get("preset")


def variant_card(preset: Preset, variant: Variant, path: Path, report: Report | None, prefix: str,
                 gates_missed: tuple[str, ...] = (), shown: dict | None = None) -> ModelCard:
    """`gates_missed` and `shown`: what the app shows beside the variant (a committed trained model's promise record,
    a generation baseline's measures as its variants' builds recorded them), stated on the card too: a card never
    reads better, or thinner, than the showcase."""
    manifest = read_manifest(path) or {}
    training = json.loads((path / "training.json").read_text()) if (path / "training.json").exists() else {}
    # a committed model's own card header (license, base model, datasets) kept, with this project's fields over it
    committed = ModelCard.load(path / "README.md").data.to_dict() if (path / "README.md").exists() else {}
    data = ModelCardData(**{**committed, "library_name": "onnxruntime" if variant.runtime == "onnxruntime" else "transformers",
                            "pipeline_tag": "question-answering" if preset.task == "qa" else "text-generation",
                            "tags": sorted({*committed.get("tags", []), "inference-showdown", variant.name, preset.task})})
    stages = [stage["base_model"] for stage in training.get("stages", []) if "pruned" in str(stage.get("base_model", ""))]
    steps = manifest.get("steps") or ([f"pruned and distilled from {stages[0]}"] if stages else
                                      [f"fine-tuned: {training.get('base_model', '')}"] if training else [variant.source.kind])
    source = manifest.get("source") or training.get("base_model") or f"{variant.source.kind} {variant.source.location}"
    table = report_text(report, manifest)
    missed = "".join(f"- **Missed its accuracy gate:** {miss}\n" for miss in gates_missed)
    # a committed trained model has no manifest: the card states what the app shows (its promise, forced-span and
    # everyday scores), not only its training's test scores
    measures = {k: v for k, v in (manifest.get('metrics') or {**(training.get('test') or {}), **(shown or {})}).items()
                if k not in ('summary', 'verifier', 'gates_missed')}
    promise = (manifest.get('metrics') or {}).get('summary') or (shown or {}).get('summary') or 'see the accuracy below'
    content = f"""---
{data.to_yaml()}
---
# {preset.title} — `{variant.name}`

Part of Inference Showdown: the same model as baseline, optimized, pruned and pruned-optimized,
measured side by side. This repo holds the **{variant.name}** variant ({variant.runtime}).

- Source: {source}
- Steps: {' → '.join(steps)}
- Promise and its gated measures: {promise}
{missed}- Accuracy (held-out): {measures_text(measures)}
- Data: {training.get('data', 'see the source variant')} {('(split by article; test articles: ' + ', '.join(training['articles']['test']) + ')') if training else ''}
- Library versions: `{json.dumps(manifest.get('versions', {}))}`

## Load
{load_text(preset, variant, path, repo_id(prefix, preset.task, variant.name), prefix)}

## Commands that built it
```
{variant.how_to_build or f"python -m optimize build --task {preset.task} --preset {preset.name} --variant {variant.name}"}
python -m optimize report --task {preset.task}
```

## Report ({preset.task})
{table}
"""
    return ModelCard(content)


def report_text(report: Report | None, manifest: dict) -> str:
    """The report's table, saying so when it was measured before this variant was built (its row is another build's)."""
    if report is None:
        return "No report yet: run `python -m optimize report`."
    built = manifest.get("created", "")[:16].replace("T", " ")  # "2026-11-29T07:30:16Z" -> the report's "2026-11-29 07:30"
    if built and report.created and built > report.created[:16]:
        return (f"Measured {report.created}, before this variant was built ({built}): its row is an earlier build's. "
                f"Run `python -m optimize report` and push again for this build's.\n\n{report.markdown()}")
    return report.markdown()


def measures_text(measures: dict) -> str:
    """The scalar measures as a line a reader scans; every field, nested ones included, in a folded JSON block."""
    if not measures:
        return "not measured"
    shown = [f"{key.replace('_', ' ')} {value}" for key, value in measures.items()
             if isinstance(value, (int, float, str)) and not isinstance(value, bool) and len(str(value)) <= 60]
    return ("; ".join(shown) + "\n\n<details><summary>Every measure (JSON)</summary>\n\n```json\n"
            + json.dumps(measures, indent=1) + "\n```\n</details>\n")


def load_text(preset: Preset, variant: Variant, path: Path, repo: str, prefix: str) -> str:
    """How to run this variant: as the app does (every variant), and with optimum or transformers alone where that
    loads it. ONNX Runtime GenAI's fused decoder (GroupQueryAttention, a `logits_to_keep` input) is not one that
    optimum's ORTModelForCausalLM drives."""
    call = ("print(qa.answer(runner, 'Who worked harder?', 'The second pig worked harder.'))" if preset.task == "qa"
            else "print(generation.generate(runner, 'What is the capital of France?', 32)['text'])")
    project = (f"As the app runs it (this project's runner; `git clone` the project and `pip install -r "
               f"requirements.txt`), or every pushed variant at once with `SHOWDOWN_HUB_PREFIX={prefix} python app.py`:\n"
               f"```python\nfrom huggingface_hub import snapshot_download\nfrom models import generation, qa\n"
               f"from models.runners import load_runner\n\nrunner = load_runner('{preset.task}', '{variant.name}', "
               f"'{variant.runtime}', snapshot_download('{repo}'))\n{call}\n```\n")
    head = "QuestionAnswering" if preset.task == "qa" else "CausalLM"
    if variant.runtime != "onnxruntime":
        alone = f"from transformers import AutoModelFor{head}\nmodel = AutoModelFor{head}.from_pretrained('{repo}')"
    elif preset.task == "qa" or "logits_to_keep" not in onnx_inputs(path / "model.onnx"):
        entries = session_settings(path).get("config_entries", {})  # its build measured and gated it with these
        lines = [f"from optimum.onnxruntime import ORTModelFor{head}"]
        load = f"ORTModelFor{head}.from_pretrained('{repo}', file_name='model.onnx'"
        if entries:
            lines = ["import onnxruntime", *lines, "options = onnxruntime.SessionOptions()  # as its build measured and gated it",
                     *(f"options.add_session_config_entry('{key}', '{value}')" for key, value in entries.items())]
            load += ", session_options=options"
        alone = "\n".join([*lines, f"model = {load})"])
    else:
        return project + "\nOptimum's ORTModelForCausalLM does not drive this graph (ONNX Runtime GenAI's fused decoder).\n"
    return project + f"\nWith {'transformers' if variant.runtime != 'onnxruntime' else 'optimum'} alone:\n```python\n{alone}\n```\n"


def onnx_inputs(model: Path) -> set[str]:
    import onnx

    return {i.name for i in onnx.load(str(model), load_external_data=False).graph.input} if model.exists() else set()


def published_manifest(path: Path) -> dict:
    """The manifest as uploaded: `inputs.source` (a local absolute path: a home folder, a user name) relative to the
    checkout when it is inside it, else its folder name. Nothing read on a Space uses it."""
    from models.catalog import REPO_ROOT

    manifest = read_manifest(path) or {}
    inputs = manifest.get("inputs") or {}
    if source := inputs.get("source"):
        source = Path(source)
        inputs["source"] = (source.relative_to(REPO_ROOT).as_posix() if source.is_relative_to(REPO_ROOT)
                            else source.name)
    return manifest


def push(prefix: str, showdown: Showdown | None = None, private: bool = False, token: str | None = None,
         allow_unmeasured: bool = False) -> list[str]:
    """Upload every ready variant of the app's presets (never the Hub's own, SHOWDOWN_HUB_PREFIX); returns the repo
    ids written. Every repo name is checked before the first request, so that a bad prefix uploads nothing. A variant
    whose accuracy was never measured (`build --no-eval`) is left out unless `allow_unmeasured`."""
    from models.catalog import presets_from_environment
    from models.recorded import PROMISE_RECORD, promise_record
    from optimize.publish.space import refused_repo_id

    if "/" not in prefix:
        raise InputError(f"--repo-prefix must look like ORG/NAME, not {prefix!r}")
    showdown = showdown or Showdown(presets=presets_from_environment(hub=False))
    for target in [repo_id(prefix, task, v.name) for task, preset in showdown.presets.items() for v in preset.variants]:
        if why := refused_repo_id(target):
            raise InputError(f"--repo-prefix {prefix!r} makes the repo name {target!r}, which the Hub refuses "
                             f"({why}): use ORG/NAME, letters, digits, '-', '_' or '.'")
    api = HfApi(token=token)
    pushed = []
    for task, preset in showdown.presets.items():
        report_path = REPORTS_DIR / f"{task}.json"
        report = Report.load(report_path) if report_path.exists() else None
        report = report if report and report.preset == preset.name else None  # never another preset's table
        for variant in preset.variants:
            status = showdown.variant_status(task, variant.name)
            if status["status"] != "ready":
                log.info("%s/%s not pushed: %s", task, variant.name, status["detail"])
                continue
            path = Path(status["folder"])
            source = showdown.variant_status(task, variant.built_from).get("folder") if variant.built_from else None
            if stale := stale_source(path, Path(source) if source else None):
                log.warning("%s/%s not pushed: %s: rebuild it (python -m optimize build) and push again", task,
                            variant.name, stale)
                continue
            shown = showdown.accuracy(task, variant.name, path)
            # a build without the SQuAD data measured nothing either, though its manifest holds a note
            gated_on = ((read_manifest(path) or {}).get("inputs") or {}).get("gated_on", "")
            if (not shown or gated_on.startswith("nothing")) and not allow_unmeasured:
                log.warning("%s/%s not pushed: its accuracy was never measured (%s): build it with accuracy on, or push "
                            "with --allow-unmeasured", task, variant.name, gated_on or "built with --no-eval?")
                continue
            target = repo_id(prefix, task, variant.name)
            if (holder := pushed_preset_name(api, target)) not in (None, preset.name):  # the name has no preset in it
                log.warning("%s/%s not pushed: %s holds preset %s's %s; push %s to another --repo-prefix", task,
                            variant.name, target, holder, variant.name, preset.name)
                continue
            api.create_repo(target, exist_ok=True, private=private)
            if private:  # create_repo leaves an existing public repo public
                api.update_repo_settings(target, private=True)
            files = {str(f.relative_to(path)): f for f in sorted(path.rglob("*"))
                     if f.is_file() and f.name != "README.md" and ".partial" not in f.relative_to(path).as_posix()}
            if "manifest.json" in files:  # its source as this checkout names it, never a local absolute path
                files["manifest.json"] = json.dumps(published_manifest(path), indent=2).encode()
            locate = showdown.variant_status(task, "baseline").get("folder") if variant.name != "baseline" else None
            if locate and (record := promise_record(preset, variant.name, path, Path(locate))):
                # a trained `pruned`'s promise travels with it, in the same commit as the weights it was paired for
                files[PROMISE_RECORD] = json.dumps(record, indent=1).encode()
            missed = tuple(shown.get("gates_missed", []))
            if missed:
                log.warning("%s/%s missed its accuracy gate (pushed as the app shows it, the miss on its card): %s",
                            task, variant.name, "; ".join(missed))
            files[MARKER] = json.dumps({"preset": preset.name, "task": task, "variant": variant.name}).encode()
            files["README.md"] = str(variant_card(preset, variant, path, report, prefix, missed, shown)).encode()
            if report:
                files[f"report/{task}.json"] = report_path.read_bytes()
                files[f"report/{task}.md"] = report.markdown().encode()
            operations = [CommitOperationAdd(path_in_repo=name, path_or_fileobj=content if isinstance(content, bytes) else str(content))
                          for name, content in files.items()]
            # files an earlier push left that this variant no longer has (a decoding.json after lookup was turned off)
            # would still be read by a Space that fetches the repo
            left = {sibling.rfilename for sibling in api.model_info(target).siblings or []} - set(files) - {".gitattributes"}
            operations += [CommitOperationDelete(path_in_repo=name) for name in sorted(left)]
            api.create_commit(target, operations, commit_message=f"Inference Showdown: {task} {variant.name}")
            log.info("pushed %s/%s to %s", task, variant.name, target)
            pushed.append(target)
    return pushed
