"""external._blocks: the sentences it encodes equal encode_sentences' on random corpora
(lines given to the compiled encoder without their line breaks, so its line count matches)."""

import numpy as np

from varorder.lm.corpus import Vocabulary
from varorder.lm import external


def _corpus(tmp_path, seed):
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(30)]
    lines = [" ".join(rng.choice(words, size=rng.integers(1, 12))) for _ in range(200)]
    text = "\n".join(line if i % 17 else "" for i, line in enumerate(lines)) + "\n"
    path = tmp_path / "c.txt"
    path.write_text(text)
    return path, [line.split() for line in text.split("\n") if line.strip()], words


def test_blocks_match_encode_sentences(tmp_path):
    for seed in range(5):
        path, sentences, words = _corpus(tmp_path, seed)
        vocabulary = Vocabulary(["<unk>", "<s>", "</s>"] + words[:20])
        expected_ids, expected_lengths = vocabulary.encode_sentences(sentences)
        blocks = list(external._blocks([path], vocabulary, block_tokens=50, batch_bytes=300))
        ids = np.concatenate([b[0] for b in blocks])
        lengths = np.concatenate([b[1] for b in blocks])
        assert ids.tolist() == expected_ids.tolist()
        assert lengths.tolist() == list(expected_lengths)


def test_lines_reach_the_compiled_encoder(tmp_path, monkeypatch):
    path, sentences, words = _corpus(tmp_path, 0)
    vocabulary = Vocabulary(["<unk>", "<s>", "</s>"] + words)
    def refuse(*args, **kwargs):
        raise AssertionError("Python fallback used")
    monkeypatch.setattr(vocabulary, "encode_sentences", refuse)
    list(external._blocks([path], vocabulary, block_tokens=50, batch_bytes=300))
