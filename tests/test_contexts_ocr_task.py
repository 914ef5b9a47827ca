"""The OCR experiment end to end on a small slice of the vendored data (the full protocol is a benchmark)."""

from __future__ import annotations

import numpy as np
import pytest

from varorder.contexts.model import ReifiedContextModel
from varorder.tasks.ocr import (ALPHABET, OcrConfig, format_table, load_ocr, run_ocr_experiment, vendored_data_path,
                                word_arrays, write_plots)


def test_vendored_data_is_the_fold_split_of_the_paper():
    train, test = load_ocr()
    assert len(train) + len(test) == 6877 and len(test) == 704
    assert all(w.images.shape[1:] == (8, 4) for w in test[:20])
    assert vendored_data_path().endswith("letter.data.gz")


def test_small_experiment_runs_and_rcms_keeps_coverage(tmp_path):
    pytest.importorskip("matplotlib")
    config = OcrConfig(methods=(("beam", 2), ("rcms", 2)), epochs=1, max_train_words=150, progress=False,
                       curve_every_epoch=False)
    results = run_ocr_experiment(config, log=lambda *_: None)
    beam, rcms = results
    assert 0.2 < rcms.letter_acc <= 1 and 0 <= rcms.recall_at_99 <= rcms.recall_at_99_max <= 1
    assert "rcms(2)" in format_table(results)
    # coverage (paper §1, §4.1): under RCMS every test word's true spelling keeps positive
    # probability; beam search gives probability 0 to every spelling that fell off its beam
    _, test = load_ocr()
    xs, ys = word_arrays(test[:150])
    for result, expect_coverage in ((rcms, True), (beam, False)):
        model = ReifiedContextModel(num_labels=len(ALPHABET), order=config.order, num_contexts=result.size, mode=result.mode)
        model._init_state(xs[0].shape[1])
        model.ngram_weights_, model.observation_weights_ = result.weights
        logp = np.array([model.log_probability(x, y) for x, y in zip(xs, ys)])
        assert np.isfinite(logp).all() == expect_coverage, result.name
        assert (logp <= 1e-9).all()
    paths = write_plots(results, tmp_path)
    assert all((tmp_path / p.split("/")[-1]).stat().st_size > 1000 for p in paths)


@pytest.mark.slow
def test_demo_command_prints_the_table_and_writes_the_plot(tmp_path):
    pytest.importorskip("matplotlib")
    from click.testing import CliRunner

    from varorder.cli.main import main

    out = tmp_path / "demo"
    result = CliRunner().invoke(main, ["demo", "--epochs", "1", "--max-train-words", "20", "--out", str(out)])
    assert result.exit_code == 0, result.output
    for name in ("beam(10)", "rcms(10)", "beam(200)", "recall @ 99% precision", "| paper |", "| +backoff |",
                 "| +cap |"):
        assert name in result.output
    rows = [line for line in result.output.splitlines() if line.startswith("| rcms(10) |")]
    assert [r.split("|")[2].strip() for r in rows] == ["paper", "+backoff", "+cap"]
    assert (out / "ocr_precision_recall.png").stat().st_size > 1000


def test_plots_share_colours_and_keep_every_precision_recall_tail(tmp_path, monkeypatch):
    """Issue #31 item 6: one colour per method across the three OCR plots, the precision axis
    low enough for the lowest curve (beam(10)'s tail ends near its word accuracy, below 0.8),
    and a one-epoch training plot with its x axis from 0 (not 0.96-1.04 around one dot)."""
    pytest.importorskip("matplotlib")
    from varorder.eval import plots
    from varorder.tasks.ocr import MethodResult

    figures = []
    monkeypatch.setattr(plots, "_save", lambda fig, path: figures.append(fig))
    monkeypatch.setattr(plots._pyplot(), "close", lambda fig: None)
    recall = np.linspace(0.0, 1.0, 11)

    def result(name, mode, final):
        return MethodResult(name, mode, 10, 0.9, final, 0.2, 0.3, 1.0, 1.0, recall,
                            np.linspace(1.0, final, 11), [{"epoch": 1, "test_word_acc": final}], [(10, 1.0), (20, 1.5)],
                            None, "paper")

    write_plots([result("beam(10)", "beam", 0.72), result("rcms(10)", "rcms", 0.86)], tmp_path)
    pr, training, context = figures
    assert pr.axes[0].get_ylim()[0] <= 0.72
    assert training.axes[0].get_xlim()[0] <= 0.0 and "one test point per epoch" in training.axes[0].get_title()
    colour = {}
    for fig in figures:
        for line in fig.axes[0].get_lines():
            if line.get_label().startswith(("beam", "rcms")):
                assert colour.setdefault(line.get_label(), line.get_color()) == line.get_color()
    assert colour["beam(10) [paper]"] != colour["rcms(10) [paper]"]
    assert context.axes[0].get_lines()[0].get_color() == colour["rcms(10) [paper]"]
