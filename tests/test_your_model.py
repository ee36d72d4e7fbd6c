"""`python -m optimize build --model`: a user's model of each supported architecture goes through
the one command (user catalog, pruning with recovery, ONNX export, the recipe ladder) and answers
through the real app. Tiny random-weight models stand in for Hub ones (no network here): their
answers are noise, so these tests check that each variant is built, structured as promised and
served, not what it answers."""
from __future__ import annotations

import json

import pytest
from gradio_client import Client
from gradio_client.exceptions import AppError

from models.catalog import preset
from models.showdown import Showdown
from models.user_presets import catalog_path
from optimize.__main__ import main
from tests.conftest import requires_squad, serve_app
from tests.tiny import DECODERS, ENCODERS, tiny_decoder, tiny_encoder

CONTEXT = "The second little pig built his house out of sticks. The wolf blew it down in one breath."
pytestmark = requires_squad()  # recovery distils on the shared SQuAD training articles


def build_model(model_dir, name: str, *extra: str) -> int:
    return main(["build", "--model", str(model_dir), "--task", "qa", "--name", name, "--recovery-steps", "2", *extra])


@pytest.mark.parametrize("architecture", ENCODERS)
def test_your_encoder_gets_four_variants_that_answer_through_the_app(architecture, tmp_path, built_presets):
    from transformers import AutoConfig

    name = f"tiny-{architecture}"
    assert build_model(tiny_encoder(tmp_path / architecture, architecture), name, "--no-eval") == 0
    assert any(entry["name"] == name for entry in __import__("yaml").safe_load(catalog_path().read_text())["presets"])
    yours = preset(name)
    baseline, pruned = (AutoConfig.from_pretrained(yours.built_dir("pruned")) if v == "pruned" else
                        AutoConfig.from_pretrained(tmp_path / architecture) for v in ("baseline", "pruned"))
    ffn = "hidden_dim" if architecture == "distilbert" else "intermediate_size"
    assert getattr(pruned, ffn) == round(0.67 * getattr(baseline, ffn)) < getattr(baseline, ffn)
    steps = json.loads((yours.built_dir("pruned") / "manifest.json").read_text())["steps"]
    assert steps[0].startswith("structured-prune: " + ("4/4 heads" if architecture == "deberta-v2" else "3/4 heads")), steps

    with serve_app(Showdown(presets={"qa": yours, "generation": built_presets["generation"]})) as url:
        client = Client(url, verbose=False)
        for variant in ("baseline", "optimized", "pruned", "pruned-optimized"):
            result = client.predict(CONTEXT, "Who built a house of sticks?", variant, api_name="/qa")
            assert result["answer"] and CONTEXT[result["start"]:result["end"]] == result["answer"], result


def test_an_architecture_it_cannot_prune_says_so_and_the_rest_still_build(tmp_path, capsys):
    from transformers import AutoModelForQuestionAnswering, AutoTokenizer, MPNetConfig

    from models.sources import minilm_path

    tokenizer = AutoTokenizer.from_pretrained(minilm_path())
    config = MPNetConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, max_position_embeddings=520, pad_token_id=tokenizer.pad_token_id)
    AutoModelForQuestionAnswering.from_config(config).save_pretrained(tmp_path / "mpnet")
    tokenizer.save_pretrained(tmp_path / "mpnet")

    assert build_model(tmp_path / "mpnet", "tiny-mpnet", "--no-eval") == 2
    printed = capsys.readouterr().out
    assert "optimized: ready" in printed
    assert "pruned: structured pruning does not know the 'mpnet' architecture" in printed
    assert "pruned-optimized: not built: pruned is missing" in printed
    assert (preset("tiny-mpnet").built_dir("optimized") / "manifest.json").exists()


def test_your_model_is_measured_and_gated_like_the_defaults(tmp_path):
    """With accuracy on: every variant's manifest carries its promise and the held-out measures."""
    assert build_model(tiny_encoder(tmp_path / "bert", "bert", seed=1), "tiny-bert-gated", "--allow-missed-gates") == 0
    yours = preset("tiny-bert-gated")
    for variant, promise in (("optimized", "lossy"), ("pruned", "pruned"), ("pruned-optimized", "lossy")):
        metrics = json.loads((yours.built_dir(variant) / "manifest.json").read_text())["metrics"]
        assert metrics["promise"] == promise and "forced_f1_delta" in metrics and metrics["summary"].startswith(promise), metrics


def test_the_app_offers_every_built_preset_and_answers_with_the_one_picked(tmp_path, built_presets):
    assert build_model(tiny_encoder(tmp_path / "electra", "electra", seed=2), "tiny-picked", "--no-eval") == 0
    showdown = Showdown(presets=dict(built_presets))
    assert showdown.choices("qa")[0] == built_presets["qa"].name and "tiny-picked" in showdown.choices("qa")
    with serve_app(showdown) as url:
        client = Client(url, verbose=False)
        picked = client.predict(CONTEXT, "Who built a house of sticks?", "pruned", False, "tiny-picked",
                                api_name="/qa_preset")
        assert picked["answer"] and CONTEXT[picked["start"]:picked["end"]] == picked["answer"]
        # the shown preset has no pruned variant: the pick, not the default, answered
        with pytest.raises(AppError, match="Unknown variant 'pruned' for tiny qa"):
            client.predict(CONTEXT, "Who built a house of sticks?", "pruned", api_name="/qa")
        with pytest.raises(AppError, match="Unknown or unbuilt qa preset 'no-such-model'"):
            client.predict(CONTEXT, "Who?", "optimized", False, "no-such-model", api_name="/qa_preset")


@pytest.mark.parametrize("architecture", DECODERS)
def test_your_decoder_gets_four_variants_that_generate_through_the_app(architecture, tmp_path, built_presets):
    from transformers import AutoConfig

    name = f"tiny-{architecture}"
    model_dir = tiny_decoder(tmp_path / architecture, architecture)
    assert main(["build", "--model", str(model_dir), "--task", "generation", "--name", name, "--recovery-steps", "2",
                 "--no-eval"]) == 0
    yours = preset(name)
    ffn = "n_inner" if architecture == "gpt2" else "intermediate_size"
    pruned = AutoConfig.from_pretrained(yours.built_dir("pruned"))
    assert getattr(pruned, ffn) == 96  # 67 % of 128, in groups of 32
    assert pruned.num_attention_heads == (4 if architecture == "gpt2" else 2)  # one of each GQA group's two queries
    steps = " ".join(json.loads((yours.built_dir("optimized") / "manifest.json").read_text())["steps"])
    assert ("optimum" if architecture == "gpt2" else "onnxruntime-genai model builder") in steps, steps

    with serve_app(Showdown(presets={"qa": built_presets["qa"], "generation": yours})) as url:
        client = Client(url, verbose=False)
        for variant in ("baseline", "optimized", "pruned", "pruned-optimized"):
            result = client.predict("Tell me about pigs.", variant, 4, api_name="/generate")
            assert result["new_tokens"] >= 1 and isinstance(result["text"], str), result


def test_a_pruned_model_recovers_on_no_article_that_then_validates_it(tmp_path):
    """The build gates your pruned model (and fits its verifier and threshold) on the validation articles of its
    baseline's split: recovery may train on that split's training articles only (it trained on articles 0-11,
    three of the four validation articles among them)."""
    from models.catalog import PruneSpec
    from optimize.evaluate import squad
    from optimize.evaluate.accuracy import threshold_split
    from optimize.train.finetune_qa import training_examples
    from optimize.train.recover_qa import recovery_train_config

    baseline = tiny_encoder(tmp_path / "bert", "bert", seed=1)
    config = recovery_train_config(baseline, tmp_path / "out", PruneSpec())
    gated = threshold_split(baseline)
    articles = squad.load_articles(config.data)
    validating = {articles[i]["title"] for i in gated.validation + gated.test}
    taught = {example.article for example in training_examples(config, articles)}
    assert validating and not taught & validating


def test_a_hub_model_the_hub_cannot_serve_is_said_in_one_line_per_variant(tmp_path):
    """Offline, `build --model ORG/NAME` logged a forty-line trace of urllib3 and huggingface_hub before its summary and
    still printed "serve it". The reason is one line per variant now, and the command ends with an error line."""
    import subprocess
    import sys

    from models.catalog import REPO_ROOT

    env = {"HF_ENDPOINT": "http://127.0.0.1:9", "HF_HOME": str(tmp_path / "hf"), "HF_HUB_DISABLE_TELEMETRY": "1",
           "PATH": "/usr/bin:/bin", "SHOWDOWN_ARTIFACTS": str(tmp_path / "artifacts")}  # port 9: nothing listens
    done = subprocess.run([sys.executable, "-m", "optimize", "build", "--model", "someorg/somemodel", "--task", "qa"],
                          env=env, capture_output=True, text=True, timeout=300, cwd=REPO_ROOT)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "baseline: Could not fetch 'someorg/somemodel' from the Hub" in done.stdout, done.stdout
    assert "optimized: not built: baseline is missing" in done.stdout and "serve it" not in done.stdout
    assert "Traceback" not in done.stderr and "error: not every variant was built" in done.stderr, done.stderr[-2000:]
