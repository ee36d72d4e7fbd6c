"""The training recipe's pieces: labels, the curriculum, the margin loss."""
import random
from types import SimpleNamespace

import pytest
import torch
from transformers import AutoTokenizer

from models.errors import ConfigError
from models.qa import QAConfig
from models.sources import minilm_path
from optimize.evaluate.squad import Example
from optimize.train.finetune_qa import TrainConfig, answerability_loss, epoch_features, training_features
from tests.conftest import requires_squad


def test_labels_point_at_the_answer_tokens_and_cls_for_no_answer():
    tokenizer = AutoTokenizer.from_pretrained(minilm_path())
    context = "The first little pig was lazy. The second little pig worked a little bit harder."
    data = [Example("a", "t", context, "Who worked harder?", ("The second little pig",), (context.index("The second"),)),
            Example("b", "t", context, "Who is the wolf?", (), ())]
    answerable, unanswerable = training_features(tokenizer, data, QAConfig())
    span = answerable["input_ids"][answerable["start_positions"]:answerable["end_positions"] + 1]
    assert tokenizer.decode(span) == "the second little pig"
    assert unanswerable["start_positions"] == unanswerable["end_positions"] == 0


def test_curriculum_starts_with_spans_then_adds_a_share_of_null_windows():
    features = [{"start_positions": 3}] * 10 + [{"start_positions": 0}] * 10
    config = TrainConfig(answerable_first_epochs=1, null_fraction=0.5)
    first = epoch_features(features, 1, config, random.Random(0))
    later = epoch_features(features, 2, config, random.Random(0))
    assert all(f["start_positions"] for f in first) and len(first) == 10
    assert len(later) == 15


def test_margin_loss_rewards_a_high_null_score_only_for_unanswerable_windows():
    batch = {"token_type_ids": torch.tensor([[0, 0, 1, 1]] * 2), "attention_mask": torch.ones(2, 4, dtype=torch.long),
             "start_positions": torch.tensor([2, 0])}
    null_wins = SimpleNamespace(start_logits=torch.tensor([[5.0, 0, 0, 0]] * 2), end_logits=torch.tensor([[5.0, 0, 0, 0]] * 2))
    span_wins = SimpleNamespace(start_logits=torch.tensor([[0.0, 0, 5, 0]] * 2), end_logits=torch.tensor([[0.0, 0, 5, 0]] * 2))
    right = SimpleNamespace(start_logits=torch.tensor([[0.0, 0, 5, 0], [5.0, 0, 0, 0]]),
                            end_logits=torch.tensor([[0.0, 0, 5, 0], [5.0, 0, 0, 0]]))
    assert answerability_loss(right, batch) < min(answerability_loss(null_wins, batch), answerability_loss(span_wins, batch))


def _tiny_run(tmp_path, seed: int = 0):
    from transformers import AutoModelForQuestionAnswering, AutoTokenizer

    from tests.tiny import tiny_qa

    directory = tiny_qa(tmp_path / f"model-{seed}", seed=seed)
    model = AutoModelForQuestionAnswering.from_pretrained(directory)
    tokenizer = AutoTokenizer.from_pretrained(directory)
    examples = [Example(id=str(i), article="pigs", context=f"Pig number {i} built a house of straw and sticks.",
                        question=f"What did pig {i} build?", answers=("a house",),
                        answer_starts=(len(f"Pig number {i} built "),)) for i in range(24)]
    config = TrainConfig(output=tmp_path / "out", epochs=2, batch_size=4, learning_rate=1e-3, threads=1,
                         answerable_first_epochs=0, bf16=False, device="cpu", checkpoint_every=2)
    return model, tokenizer, training_features(tokenizer, examples, config.qa), config


def test_a_stopped_run_continues_from_a_full_or_a_compact_checkpoint(tmp_path):
    """Full: the same weights as an uninterrupted run. Compact (committable, fp16, no AdamW): it
    continues to the end from the step it recorded, at a fraction of the full checkpoint's size."""
    from optimize.train.loop import export_compact, fit

    model, tokenizer, features, config = _tiny_run(tmp_path)
    epochs: list[int] = []
    fit(model, features, tokenizer.pad_token_id, config, lambda epoch: epochs.append(epoch) or 0.0)
    uninterrupted = {k: v.clone() for k, v in model.state_dict().items()}

    stopped, *_ = _tiny_run(tmp_path)  # the same start as the uninterrupted run
    checkpoint = tmp_path / "job" / "checkpoint.pt"
    fit(stopped, features, tokenizer.pad_token_id, config, lambda epoch: 0.0, checkpoint=checkpoint, stop_after=5)
    compact = export_compact(checkpoint, tmp_path / "committed" / "job.pt")
    assert compact.stat().st_size < 0.6 * checkpoint.stat().st_size
    # a fresh clone's job starts from the compact one copied in: `--save-compact` again had raised KeyError there
    assert export_compact(compact, tmp_path / "again" / "job.pt").stat().st_size == compact.stat().st_size

    continued, *_ = _tiny_run(tmp_path, seed=2)  # the checkpoint replaces its weights
    fit(continued, features, tokenizer.pad_token_id, config, lambda epoch: 0.0, checkpoint=checkpoint)
    for name, tensor in continued.state_dict().items():
        torch.testing.assert_close(tensor, uninterrupted[name], msg=name)

    checkpoint.unlink()
    compact.replace(checkpoint)  # what a fresh clone finds: only the committed compact checkpoint
    from_compact, *_ = _tiny_run(tmp_path, seed=3)
    scores = fit(from_compact, features, tokenizer.pad_token_id, config, lambda epoch: float(epoch), checkpoint=checkpoint)
    assert scores == [1.0, 2.0]  # both epochs scored: it ran to the end from step 5
    assert not torch.equal(from_compact.qa_outputs.weight, _tiny_run(tmp_path, seed=3)[0].qa_outputs.weight)
    resumed = torch.load(checkpoint, weights_only=False)
    assert resumed["progress"]["rewarm_from"] == 5 and "optimizer" in resumed  # full again after its first save


def test_a_checkpoint_is_not_continued_on_other_data_under_the_same_paths(tmp_path):
    """Its key held paths only: after the data (or the teacher) behind them changed, the old weights went on training
    on other windows and another schedule, silently. A checkpoint from before the key was widened still continues."""
    from optimize.train.loop import fit

    model, tokenizer, features, config = _tiny_run(tmp_path)
    checkpoint = tmp_path / "job" / "checkpoint.pt"
    fit(model, features, tokenizer.pad_token_id, config, lambda epoch: 0.0, checkpoint=checkpoint, stop_after=3)
    with pytest.raises(ConfigError, match="written by another training run \\(it differs in windows"):  # one line, its cause
        fit(_tiny_run(tmp_path)[0], features[: len(features) // 2], tokenizer.pad_token_id, config, lambda epoch: 0.0,
            checkpoint=checkpoint)
    payload = torch.load(checkpoint, weights_only=False)
    del payload["config"]["windows"]  # as written before the windows were in the key
    torch.save(payload, checkpoint)
    assert len(fit(_tiny_run(tmp_path)[0], features, tokenizer.pad_token_id, config, lambda epoch: 0.0,
                   checkpoint=checkpoint)) == config.epochs


def test_a_training_run_under_glibc_says_how_to_run_hours_of_it_steadily(tmp_path, caplog):
    """glibc's malloc grew a recovery from 4 to 10 GB while its steps slowed (docs/training.md): the loop says, once,
    how to start a long run on jemalloc without purging."""
    from pathlib import Path

    from optimize.train.loop import fit

    if "libjemalloc" in Path("/proc/self/maps").read_text():
        pytest.skip("this test process already runs jemalloc")
    model, tokenizer, features, config = _tiny_run(tmp_path)
    with caplog.at_level("INFO", logger="optimize.train.loop"):
        fit(model, features, tokenizer.pad_token_id, config, lambda epoch: 0.0)
    notes = [r.getMessage() for r in caplog.records if r.getMessage().startswith("memory allocator:")]
    assert len(notes) == 1 and "LD_PRELOAD=" in notes[0] and "MALLOC_CONF=dirty_decay_ms:-1,muzzy_decay_ms:-1" in notes[0], notes


def test_jemalloc_is_left_alone_only_when_it_keeps_freed_pages():
    """jemalloc's default purges every freed buffer over 8 MB, so each step faults it in again: that gets the
    setting; preloaded with it, nothing is said."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from optimize.train.allocator import STEADY_CONF, jemalloc_library

    library = jemalloc_library()
    if library is None:
        pytest.skip("no libjemalloc on this machine (Debian: apt-get install libjemalloc2)")
    script = "from optimize.train.allocator import advice; print(advice())"

    def advice_under(conf: str | None) -> str:
        env = {**os.environ, "LD_PRELOAD": library}
        env.pop("MALLOC_CONF", None)
        env.update({"MALLOC_CONF": conf} if conf else {})
        return subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True,
                              cwd=Path(__file__).resolve().parents[1]).stdout

    assert f"MALLOC_CONF={STEADY_CONF}" in advice_under(None)
    assert advice_under(STEADY_CONF).strip() == "None"


@pytest.mark.parametrize("signum", ["SIGTERM", "SIGINT"])
def test_sigterm_or_ctrl_c_stops_a_run_after_its_step_with_a_checkpoint(signum, tmp_path):
    """`kill PID` on a background job, or Ctrl-C (which had lost every step since the last checkpoint): the step in
    flight finishes, a checkpoint records it, and the handler before the run is back. The command then ends as
    interrupted, saying how to continue (it had exited 0, so `train-qa ... && build ...` built on a stopped run)."""
    import os
    import signal

    signum = getattr(signal, signum)

    from optimize.__main__ import main
    from optimize.train.loop import TrainingStopped, fit

    model, tokenizer, features, config = _tiny_run(tmp_path)
    checkpoint = tmp_path / "job" / "checkpoint.pt"
    calls = []

    def loss_fn(model, batch):
        calls.append(1)
        if len(calls) == 3:
            os.kill(os.getpid(), signum)
        return model(**batch).loss

    before = signal.getsignal(signum)
    with pytest.raises(TrainingStopped) as stopped:
        fit(model, features, tokenizer.pad_token_id, config, lambda epoch: 0.0, loss_fn, checkpoint=checkpoint)
    assert len(calls) == 3 and stopped.value.exit_code == 128 + signum
    assert torch.load(checkpoint, weights_only=False)["progress"]["step"] == 3
    assert signal.getsignal(signum) is before
    with pytest.MonkeyPatch.context() as patch:  # how the command ends: the message, and 128 + the signal
        patch.setattr("optimize.commands.train_qa.run", lambda args: (_ for _ in ()).throw(stopped.value))
        assert main(["train-qa"]) == 128 + signum


def test_ctrl_c_stops_a_run_without_a_checkpoint_at_once(tmp_path):
    """A build's recovery has no checkpoint to continue from: Ctrl-C had stopped it after the step and returned the
    barely trained student as recovered, so the build published it and exited 0. Now it is an interruption."""
    import os
    import signal

    from optimize.train.loop import fit

    model, tokenizer, features, config = _tiny_run(tmp_path)
    calls = []

    def loss_fn(model, batch):
        calls.append(1)
        if len(calls) == 3:
            os.kill(os.getpid(), signal.SIGINT)
        return model(**batch).loss

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # a pytest-xdist worker ignores SIGINT
    try:
        with pytest.raises(KeyboardInterrupt):
            fit(model, features, tokenizer.pad_token_id, config, lambda epoch: 0.0, loss_fn)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert len(calls) == 3

def test_a_stopped_pruning_recovery_prunes_the_same_way_and_continues_to_the_same_weights(tmp_path):
    """The QA recovery job (optimize/train/recover_qa.py) prunes again on resume and loads its
    checkpoint into that student: the seeded pruning must give the same student, and a checkpoint
    written for another recipe must be refused rather than continued."""
    import pytest

    from optimize.prune.encoder import PruneConfig, load_baseline, pruned_copy
    from optimize.train.recover_qa import EncoderRecoveryConfig, distil_loss_fn
    from optimize.train.loop import fit, seed_everything
    from tests.tiny import tiny_qa

    _, tokenizer, features, config = _tiny_run(tmp_path)
    baseline = tiny_qa(tmp_path / "baseline", seed=0)
    teacher = load_baseline(baseline).eval()
    recipe = PruneConfig(heads_kept=2, ffn_kept=32, layers_dropped=1, calibration_windows=8, batch_size=4)
    key = {"prune": str(recipe)}

    def student():
        seed_everything(0)  # as the job does first: dropout draws from torch's RNG
        return pruned_copy(baseline, features, tokenizer.pad_token_id, recipe)

    def recover(model, **job):
        fit(model, features, tokenizer.pad_token_id, config, lambda epoch: 0.0,
            distil_loss_fn(teacher, EncoderRecoveryConfig()), **job)
        return model

    uninterrupted = recover(student()).state_dict()
    checkpoint = tmp_path / "job" / "checkpoint.pt"
    recover(student(), checkpoint=checkpoint, stop_after=3, run_key=key)
    continued = recover(student(), checkpoint=checkpoint, run_key=key).state_dict()
    assert continued.keys() == uninterrupted.keys()
    for name, tensor in continued.items():
        torch.testing.assert_close(tensor, uninterrupted[name], msg=name)
    with pytest.raises(ValueError, match="another training run"):
        recover(student(), checkpoint=checkpoint, run_key={"prune": "4 heads"})


def test_a_pruned_candidate_is_scored_on_validation_only_and_left_unpublished(tmp_path):
    """`prune --task qa --no-test` (issue 48's protocol): a candidate's rule reads validation first, so the job
    neither scores the test articles nor publishes through the build's gate; the student waits in the staging
    folder with its validation scores and no recorded test look."""
    import json

    from optimize.prune.encoder import PruneConfig
    from optimize.train.recover_qa import EncoderRecoveryConfig, run
    from tests.tiny import tiny_qa

    output = tmp_path / "candidate"
    config = _tiny_squad_config(tmp_path, output, epochs=1)
    result = run(tiny_qa(tmp_path / "baseline", seed=0), PruneConfig(heads_kept=2, ffn_kept=32, calibration_windows=8,
                                                                     batch_size=4), config,
                 EncoderRecoveryConfig(attention_dropout=0.0))
    candidate = output.with_name("candidate.partial")
    assert result["candidate"] == str(candidate) and not output.exists()
    training = json.loads((candidate / "training.json").read_text())
    assert "held_out" not in training and "test_looks" not in training and training["validation"]["overall_total"] == 7
    assert (candidate / "model.safetensors").exists()
    assert json.loads((candidate / "config.json").read_text())["attention_probs_dropout_prob"] == 0.0  # as asked


def _tiny_squad_config(tmp_path, output, epochs: int, **options) -> TrainConfig:
    """Three one-paragraph articles (train, validation, test): six answerable questions and one unanswerable each."""
    import json

    from optimize.evaluate.squad import ArticleSplit

    def article(title: str) -> dict:
        context = f"The {title} pig built a house of straw. The wolf blew it down."
        return {"title": title, "paragraphs": [{"context": context, "qas": [
            {"id": f"{title}-{i}", "question": f"What did the {title} pig build{'?' * (i + 1)}",
             "answers": [{"text": "a house of straw", "answer_start": context.index("a house")}]} for i in range(6)] + [
            {"id": f"{title}-null", "question": "What did the wolf eat?", "answers": [], "is_impossible": True}]}]}

    data = tmp_path / "tiny-squad.json"
    data.write_text(json.dumps({"data": [article(title) for title in ("first", "second", "third")]}))
    return TrainConfig(output=output, data=data, extra_data=(), split=ArticleSplit(train=(0,), validation=(1,), test=(2,)),
                       epochs=epochs, batch_size=4, threads=1, answerable_first_epochs=0, bf16=False, device="cpu",
                       score_test=False, **options)


def test_a_run_resumed_without_its_kept_epochs_weights_never_claims_them(tmp_path):
    """A compact checkpoint carries the running weights and the best epoch's scores, not the best epoch's weights (they
    live in the run's staging folder; the output folder keeps the model it served until the run is done). Resumed where that folder is missing or older, the run says which epoch's weights were
    lost and keeps one whose weights it has: training.json's best epoch is the model beside it."""
    import json

    import torch

    from models.manifest import sha256
    from optimize.train.finetune_qa import job_files, staging_dir, train
    from tests.tiny import tiny_qa

    output = tiny_qa(tmp_path / "trained", seed=3)  # the model served from the output folder until the run is done
    served = {path.name: path.read_bytes() for path in output.iterdir()}
    config = _tiny_squad_config(tmp_path, output, epochs=2, base=tiny_qa(tmp_path / "base", seed=0), learning_rate=1e-3)
    checkpoint, _ = job_files(output)
    for _ in range(20):  # one step a call until the first epoch is scored and kept
        assert train(config, stop_after=1).get("stopped")
        if torch.load(checkpoint, weights_only=False)["state"]["best"]:
            break
    # a kept epoch had replaced the served weights, beside the old model's threshold and record
    assert {path.name: path.read_bytes() for path in output.iterdir()} == served
    kept = torch.load(checkpoint, weights_only=False)["state"]["best"]["epoch"]
    (staging_dir(output) / "model.safetensors").unlink()  # what a fresh clone has: the checkpoint without the weights
    result = train(config)
    assert not staging_dir(output).exists()
    training = json.loads((output / "training.json").read_text())
    assert result["kept_weights_lost"] == [kept] and training["best_epoch"] == 2
    assert training["kept_weights_lost"] == [kept] and (output / "model.safetensors").exists()
    assert torch.load(checkpoint, weights_only=False)["state"]["best"]["weights_sha256"] == sha256(output / "model.safetensors")


@pytest.mark.parametrize("flags, message", [
    (["--full-data", "--answerability-stage"], "not allowed with argument"),  # --full-data had been dropped silently
    (["--no-extra-data", "--full-data"], "not allowed with argument"),  # --no-extra-data had been dropped silently
    (["--answerability-stage"], "give the first stage's weights with --init-from"),
    (["--stop-after", "0"], "use a whole number ≥ 1"),
])
def test_train_qa_refuses_flags_that_contradict_each_other(flags, message, tmp_path, capsys):
    from optimize.__main__ import main

    try:
        code = main(["train-qa", *flags, "--output", str(tmp_path / "out")])
    except SystemExit as exit_:  # argparse's own refusals
        code = exit_.code
    assert code == 2 and message in capsys.readouterr().err


def test_keeping_an_epoch_in_fp16_leaves_the_weights_in_training_as_they_were(tiny_qa_dir, tmp_path):
    """The kept epoch was saved by converting the model itself to fp16 and back: every later epoch trained on
    rounded weights."""
    from safetensors.torch import load_file
    from transformers import AutoModelForQuestionAnswering

    from optimize.train.finetune_qa import save_fp16

    model = AutoModelForQuestionAnswering.from_pretrained(tiny_qa_dir, dtype=torch.float32)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(1e-4 * torch.randn_like(parameter))  # values fp16 cannot hold exactly
    before = {name: parameter.detach().clone() for name, parameter in model.named_parameters()}
    save_fp16(model, tmp_path / "kept")
    assert all(torch.equal(before[name], parameter) for name, parameter in model.named_parameters())
    assert {tensor.dtype for tensor in load_file(tmp_path / "kept" / "model.safetensors").values()} == {torch.float16}


@requires_squad()
def test_a_data_file_that_is_not_squads_layout_is_one_line_before_any_training(tmp_path, capsys):
    """A malformed --data file had ended in a JSONDecodeError, KeyError or IsADirectoryError traceback, and a valid
    file with fewer articles than the split reads in an IndexError, after training when it had 13 to 15."""
    import json

    from optimize.__main__ import main
    from optimize.evaluate import squad

    articles = squad.load_articles(squad.DEFAULT_SQUAD_PATH)
    files = {"bad.json": "{bad", "nodata.json": json.dumps({"foo": 1}), "short.json": json.dumps({"data": articles[:13]})}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    expected = {"bad.json": "is not a SQuAD-style JSON file", "nodata.json": "is not a SQuAD-style JSON file",
                "short.json": "has 13 articles; this run's split reads articles by index up to 15", ".": "is a folder"}
    for name, message in expected.items():
        assert main(["train-qa", "--data", str(tmp_path / name), "--output", str(tmp_path / "out"), "--no-extra-data"]) == 2
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err, (name, err[-2000:])


def test_remeasure_of_weights_not_trained_here_is_one_line(tmp_path, capsys):
    """`remeasure-qa --weights` on a folder without a training record had printed a raw errno, or a KeyError
    traceback when its training.json named no data."""
    from optimize.__main__ import main
    from tests.tiny import tiny_qa

    folder = tiny_qa(tmp_path / "mine")
    for record in (None, '{"epochs": 2}'):
        if record:
            (folder / "training.json").write_text(record)
        assert main(["remeasure-qa", "--weights", str(folder)]) == 2
        err = capsys.readouterr().err
        assert "has no training.json naming its data and split" in err and "Traceback" not in err, err
