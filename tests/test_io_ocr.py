"""Tests for the OCR letters reader on generated files and (when present) the real data."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

from varorder.io.ocr import OcrWord, read_ocr_letters, split_by_fold
from _shared_data import SHARED_DATA

SHARED_OCR = SHARED_DATA / "ocr-letters" / "letter.data.gz"


def _write_letters(path: Path, words, compress: bool):
    """Write words = [(word_id, fold, letters, images (n,16,8))] in letter.data format."""
    lines = []
    letter_id = 1
    for word_id, fold, letters, images in words:
        for position, (letter, image) in enumerate(zip(letters, images), start=1):
            last = position == len(letters)
            next_id = -1 if last else letter_id + 1
            fields = [letter_id, letter, next_id, word_id, position, fold, *image.reshape(-1).tolist()]
            lines.append("\t".join(map(str, fields)) + "\t\n")
            letter_id += 1
    data = "".join(lines)
    if compress:
        with gzip.open(path, "wt") as handle:
            handle.write(data)
    else:
        path.write_text(data)


def _random_words(rng, n_words=5):
    words = []
    for word_id in range(1, n_words + 1):
        n = int(rng.integers(1, 6))
        letters = "".join(rng.choice(list("abcdefghij"), size=n))
        images = rng.integers(0, 2, size=(n, 16, 8))
        words.append((word_id, int(rng.integers(0, 3)), letters, images))
    return words


@pytest.mark.parametrize("compress", [False, True])
def test_round_trip_generated_file(tmp_path, compress):
    rng = np.random.default_rng(0)
    words = _random_words(rng)
    path = tmp_path / ("letter.data.gz" if compress else "letter.data")
    _write_letters(path, words, compress)
    got = read_ocr_letters(path)
    assert [w.word_id for w in got] == [w[0] for w in words]
    for word, (word_id, fold, letters, images) in zip(got, words):
        assert isinstance(word, OcrWord)
        assert word.fold == fold and word.letters == letters
        assert word.images.dtype == np.uint8 and word.images.shape == (len(letters), 16, 8)
        np.testing.assert_array_equal(word.images, images)


def test_downsample_keeps_odd_rows_and_columns(tmp_path):
    # Pixel value encodes its coordinates' parity so the kept set is checkable exactly.
    rows, cols = np.meshgrid(np.arange(16), np.arange(8), indexing="ij")
    both_odd = ((rows % 2 == 1) & (cols % 2 == 1)).astype(int)
    rng = np.random.default_rng(1)
    noise = rng.integers(0, 2, size=(16, 8))
    image = np.where(both_odd == 1, noise, 0)
    path = tmp_path / "letter.data"
    _write_letters(path, [(7, 0, "ab", np.stack([image, 1 - both_odd]))], compress=False)
    (word,) = read_ocr_letters(path, downsample=True)
    assert word.images.shape == (2, 8, 4)
    np.testing.assert_array_equal(word.images[0], noise[1::2, 1::2])
    assert (word.images[1] == 0).all()  # 1 - both_odd is 0 exactly where both coordinates are odd


def test_split_by_fold(tmp_path):
    rng = np.random.default_rng(2)
    words = _random_words(rng, n_words=12)
    path = tmp_path / "letter.data"
    _write_letters(path, words, compress=False)
    got = read_ocr_letters(path)
    train, test = split_by_fold(got, test_fold=1)
    assert all(w.fold == 1 for w in test) and all(w.fold != 1 for w in train)
    assert len(train) + len(test) == len(got)


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda f: f[:-3], "fields"),
        (lambda f: [f[0], "xy", *f[2:]], "one character"),
        (lambda f: [f[0], f[1], "z", *f[3:]], "non-integer"),
        (lambda f: [*f[:6], "2", *f[7:]], "0 or 1"),
    ],
)
def test_malformed_line_names_file_and_line(tmp_path, mutate, message):
    rng = np.random.default_rng(3)
    path = tmp_path / "letter.data"
    _write_letters(path, _random_words(rng, n_words=3), compress=False)
    lines = path.read_text().splitlines(keepends=True)
    fields = lines[1].rstrip("\t\n").split("\t")
    lines[1] = "\t".join(mutate(fields)) + "\t\n"
    path.write_text("".join(lines))
    with pytest.raises(ValueError, match=rf"letter\.data:2: .*{message}"):
        read_ocr_letters(path)


def test_unterminated_word_is_an_error(tmp_path):
    path = tmp_path / "letter.data"
    _write_letters(path, [(1, 0, "abc", np.zeros((3, 16, 8), dtype=int))], compress=False)
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:2]))
    with pytest.raises(ValueError, match=r"letter\.data:2: file ends inside word 1"):
        read_ocr_letters(path)


@pytest.mark.shared_data
def test_real_file_counts():
    if not SHARED_OCR.exists():
        pytest.skip(f"{SHARED_OCR} not present")
    words = read_ocr_letters(SHARED_OCR, downsample=True)
    assert len(words) == 6877
    assert sum(len(w) for w in words) == 52152
    assert {w.fold for w in words} == set(range(10))
    assert all(w.images.shape == (len(w), 8, 4) for w in words)
    train, test = split_by_fold(words, test_fold=1)
    assert len(train) + len(test) == 6877 and len(test) > 0
