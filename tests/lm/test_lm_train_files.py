"""``varorder.lm.train.train_from_files``, the function ``lm train`` calls: each path it
chooses (in memory, counting on disk, the whole estimate streamed through disk; a small
corpus under a budget stays in memory, ``path="disk"`` forces the disk) writes the
file the in-memory estimator writes, byte for byte, and says which path ran."""

from __future__ import annotations

import numpy as np
import pytest

from _lm_oracle import random_corpus
from varorder.lm import ModifiedKneserNey, train_from_files
from varorder.lm.arpa import write_arpa
from varorder.lm.binary import open_binary


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(random_corpus(np.random.default_rng(3), 60, 12)) + "\n")
    return str(path)


def _in_memory_arpa(corpus, path):
    write_arpa(ModifiedKneserNey(order=3).fit(corpus).model_, path)
    return path.read_bytes()


@pytest.mark.parametrize("memory, binary, streamed, path", [(None, False, False, "auto"), (1 << 20, False, False, "auto"),
                                                            (1 << 20, False, True, "disk"),
                                                            (1 << 20, True, False, "disk")])
def test_every_path_writes_the_in_memory_model(tmp_path, corpus, memory, binary, streamed, path):
    expected = _in_memory_arpa(corpus, tmp_path / "memory.arpa")
    out = tmp_path / ("model.bin" if binary else "model.arpa")
    trained = train_from_files(ModifiedKneserNey(order=3), [corpus], memory=memory, temp_dir=tmp_path, output=out,
                               binary=binary, path=path)
    assert (trained.streamed, trained.written, trained.n_workers) == (streamed, True, None)
    assert trained.path == ("disk" if path == "disk" else "memory")
    assert hasattr(trained.estimator, "model_") != streamed
    if binary:
        write_arpa(open_binary(out), tmp_path / "back.arpa")
        out = tmp_path / "back.arpa"
    assert out.read_bytes() == expected
    assert trained.ngram_counts == [int(line.split("=")[1]) for line in expected.decode().splitlines()
                                    if line.startswith("ngram ")]


def test_without_output_the_model_stays_in_memory(tmp_path, corpus):
    trained = train_from_files(ModifiedKneserNey(order=2), corpus, memory=1 << 20, temp_dir=tmp_path)
    assert not trained.written and not trained.streamed
    assert trained.ngram_counts == list(trained.estimator.model_.ngram_counts)
