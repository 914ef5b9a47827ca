"""The OCR experiment end to end on a small slice of the vendored data (the full protocol is a benchmark)."""

from __future__ import annotations

import numpy as np
import pytest

from varorder.tasks.ocr import OcrConfig, format_table, load_ocr, run_ocr_experiment, vendored_data_path, write_plots


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
    assert 0.2 < rcms.letter_acc <= 1 and 0 <= rcms.recall_at_99 <= 1
    assert "rcms(2)" in format_table(results)
    # every example is answered at some confidence: the curve reaches recall 1
    assert rcms.recall[-1] == 1.0 and beam.recall[-1] == 1.0
    assert np.all(np.diff(rcms.recall) > 0)
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
    for name in ("beam(10)", "rcms(10)", "beam(200)", "recall @ 99% precision"):
        assert name in result.output
    assert (out / "ocr_precision_recall.png").stat().st_size > 1000
