"""Reader for the Kassel/Taskar OCR handwritten-letters data (``letter.data``).

Format (Taskar, Guestrin & Koller, "Max-Margin Markov Networks", NIPS 2003; the file
distributed with it): one letter per line, tab-separated (trailing tab allowed):

    id  letter  next_id  word_id  position  fold  p_0_0 … p_15_7

``next_id`` is −1 on the last letter of a word, ``position`` is 1-based, ``fold``
is 0–9 and the 128 pixels (0/1) are a 16×8 image stored row-major. Words are
returned as :class:`OcrWord` (letters + a stack of images), in file order.

Downsampling to 8×4 (as in Steinhardt & Liang, "Reified Context Models", ICML 2015,
§6 word recognition, which found the full-resolution task too easy) keeps the
pixels whose row and column coordinates are both odd (0-based): rows 1, 3, …, 15
and columns 1, 3, 5, 7.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from varorder.errors import FormatError
from varorder.io._text import open_text

__all__ = ["OcrWord", "read_ocr_letters", "split_by_fold", "IMAGE_SHAPE", "DOWNSAMPLED_SHAPE"]

IMAGE_SHAPE = (16, 8)
DOWNSAMPLED_SHAPE = (8, 4)
_N_PIXELS = IMAGE_SHAPE[0] * IMAGE_SHAPE[1]
_N_META = 6


@dataclass
class OcrWord:
    """One handwritten word: its id, cross-validation fold, gold letters and letter images.

    ``images`` is uint8 of shape (len(letters), 16, 8), or (len(letters), 8, 4) when
    read with ``downsample=True``.
    """

    word_id: int
    fold: int
    letters: str
    images: np.ndarray

    def __len__(self) -> int:
        return len(self.letters)


def read_ocr_letters(path, downsample: bool = False) -> list[OcrWord]:
    """Read ``letter.data`` (optionally gzip-compressed) into words, in file order.

    Raises FormatError naming the file and 1-based line number on a malformed line
    (wrong column count, non-integer field, non-binary pixel, a letter that is not a
    single character, or a word whose letters are not contiguous and in position order).
    """
    path = os.fspath(path)
    words: list[OcrWord] = []
    letters: list[str] = []
    pixels: list[np.ndarray] = []
    current: tuple[int, int] | None = None  # (word_id, fold) of the word being read

    def fail(lineno: int, why: str):
        raise FormatError(f"{path}:{lineno}: {why}", path=path, line=lineno)

    with open_text(path) as handle:
        lineno = 0
        for lineno, line in enumerate(handle, start=1):
            fields = line.rstrip("\r\n").rstrip("\t").split("\t")
            if fields == [""]:
                continue
            if len(fields) != _N_META + _N_PIXELS:
                fail(lineno, f"expected {_N_META + _N_PIXELS} tab-separated fields, got {len(fields)}")
            letter = fields[1]
            if len(letter) != 1:
                fail(lineno, f"letter field must be one character, got {letter!r}")
            try:
                _, next_id, word_id, position, fold = (int(fields[i]) for i in (0, 2, 3, 4, 5))
                image = np.array(fields[_N_META:], dtype=np.int64)
            except (ValueError, OverflowError) as err:  # a 20-digit pixel overflows int64
                fail(lineno, f"non-integer or out-of-range field ({err})")
            if ((image != 0) & (image != 1)).any():
                fail(lineno, "pixels must be 0 or 1")
            if current is None:
                if position != 1:
                    fail(lineno, f"word {word_id} starts at position {position}, expected 1")
                current = (word_id, fold)
            elif current != (word_id, fold):
                fail(lineno, f"word {current[0]} is unterminated (next_id != -1) before word {word_id}")
            elif position != len(letters) + 1:
                fail(lineno, f"word {word_id}: position {position}, expected {len(letters) + 1}")
            letters.append(letter)
            pixels.append(image.astype(np.uint8).reshape(IMAGE_SHAPE))
            if next_id == -1:
                images = np.stack(pixels)
                if downsample:
                    images = np.ascontiguousarray(images[:, 1::2, 1::2])
                words.append(OcrWord(word_id=current[0], fold=current[1], letters="".join(letters), images=images))
                letters, pixels, current = [], [], None
        if current is not None:
            fail(lineno, f"file ends inside word {current[0]} (last letter has next_id != -1)")
    return words


def split_by_fold(words: list[OcrWord], test_fold: int = 1) -> tuple[list[OcrWord], list[OcrWord]]:
    """(train, test): test = the words of ``test_fold``, train = all other folds."""
    train = [w for w in words if w.fold != test_fold]
    test = [w for w in words if w.fold == test_fold]
    return train, test
