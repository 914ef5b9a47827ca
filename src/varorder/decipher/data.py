"""Decipherment data: plaintext sentences, a 1:1 word substitution cipher, seeded splits
(Steinhardt & Liang 2015, §2 "Decipherment"; Nuhn & Ney 2014).

Preparation, reproducible from a seed: lower-case and tokenize a corpus into sentences,
take the ``num_words`` (500) most frequent tokens as the plaintext word list, call a
sentence *in-list* when all its tokens are on the list, encipher ``num_cipher`` (2,000)
in-list sentences drawn at random with a random permutation of the word ids as the key
(cipher symbols are integers), and keep every other sentence as plaintext.

The paper had 24,666 in-list sentences (Gigaword) and enciphered 2,000; War and Peace
(train + valid) and Brown give 1,753 and 1,787, so at most about 1,750 can be enciphered
(``prepare`` refuses more than there are). The plaintext keeps *every* sentence that is
not enciphered, with out-of-list tokens as one symbol ``<unk>`` that the LM counts but the
hidden chain never visits (see :mod:`varorder.decipher.transitions`). ``DecipherData.plaintext_in_list``
says how many plaintext sentences are in-list.

Extension (not in the paper; the issue's fallback when too few in-list sentences exist):
``max_unk_tokens`` > 0 lets a cipher sentence hold up to that many out-of-list tokens, at
most ``max_unk_share`` of its tokens. Every out-of-list token then becomes the one word
``<unk>``, appended to the word list as hidden word K (so K = ``num_words`` + 1): the
plaintext chain visits it (the LM's ``<unk>`` estimate), the key enciphers it as one more
cipher symbol, and mapping accuracy leaves that symbol out (``DecipherData.unk_symbol``;
whether it decodes to ``<unk>`` is reported on its own). With ``max_unk_tokens`` = 0 (the
default) preparation is the strict, paper-faithful one.

On disk (a folder, all plain text): ``words.txt`` (the list, id order), ``plain.txt``
(plaintext, tokens separated by spaces), ``cipher.txt`` (cipher sentences as integers),
``gold.txt`` (the plaintext of each cipher line; only evaluation reads it), ``key.tsv``
(symbol, word) and ``meta.json``.
"""

from __future__ import annotations

import collections
import gzip
import io
import json
import re
import tarfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from varorder.errors import FormatError, ParameterError
from varorder.io import atomic_write_text, open_text
from varorder.engine.validate import as_rng

__all__ = ["DecipherData", "SubstitutionCipher", "prepare", "load", "read_corpus_sentences", "tokenize"]

UNK = "<unk>"
_TOKEN = re.compile(r"[a-z]+(?:'[a-z]+)*|[0-9]+(?:[.,][0-9]+)*|[^\sa-z0-9]")
_QUOTES = str.maketrans({"“": '"', "”": '"', "‘": "'", "’": "'", "—": "--", "–": "-"})
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def tokenize(text: str) -> list[str]:
    """Lower-case tokens: words (with inner apostrophes), numbers, single punctuation marks."""
    return _TOKEN.findall(text.translate(_QUOTES).lower())


@dataclass
class SubstitutionCipher:
    """A 1:1 substitution: word id w ↦ cipher symbol ``key[w]``."""

    key: np.ndarray

    @classmethod
    def random(cls, num_words: int, seed) -> "SubstitutionCipher":
        return cls(as_rng(seed).permutation(num_words).astype(np.int64))

    @property
    def inverse(self) -> np.ndarray:
        inv = np.empty_like(self.key)
        inv[self.key] = np.arange(len(self.key))
        return inv

    def encipher(self, word_ids) -> np.ndarray:
        return self.key[np.asarray(word_ids, dtype=np.int64)]

    def decipher(self, symbols) -> np.ndarray:
        return self.inverse[np.asarray(symbols, dtype=np.int64)]


@dataclass
class DecipherData:
    """Plaintext word list, plaintext sentences, cipher sentences and (for evaluation) the key."""

    words: list[str]
    plaintext: list[list[str]]
    cipher: list[np.ndarray]
    cipher_gold: list[list[str]] | None = None
    cipher_key: SubstitutionCipher | None = None
    meta: dict = field(default_factory=dict)

    @property
    def plaintext_in_list(self) -> int:
        return sum(1 for s in self.plaintext if UNK not in s)

    @property
    def unk_symbol(self) -> int | None:
        """The cipher symbol of the ``<unk>`` hidden word (lenient preparation), else None."""
        if self.cipher_key is None or not self.words or self.words[-1] != UNK:
            return None
        return int(self.cipher_key.key[len(self.words) - 1])

    def scored_symbols(self, symbols) -> np.ndarray:
        """The distinct symbols of ``symbols`` that mapping accuracy counts (all but ``unk_symbol``)."""
        distinct = np.unique(np.asarray(symbols, dtype=np.int64))
        unk = self.unk_symbol
        return distinct if unk is None else distinct[distinct != unk]

    def cipher_flat(self, limit: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(symbols concatenated, offsets) of the first ``limit`` cipher sentences."""
        sentences = self.cipher[:limit] if limit else self.cipher
        offsets = np.zeros(len(sentences) + 1, dtype=np.int64)
        np.cumsum([len(s) for s in sentences], out=offsets[1:])
        flat = np.concatenate(sentences).astype(np.int64) if sentences else np.zeros(0, np.int64)
        return flat, offsets


def read_corpus_sentences(path) -> list[list[str]]:
    """Tokenized sentences of a corpus file: a (``.gz``) plain text, split at . ! ? (lines
    joined within blank-line paragraphs), or the NLTK Brown tarball (``word/tag`` tokens,
    one sentence per line, tags dropped)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such corpus file")
    if path.name.endswith((".tar.gz", ".tgz")):
        return list(_brown_sentences(path))
    with open_text(path) as handle:
        text = handle.read()
    sentences = []
    for paragraph in re.split(r"\n\s*\n", text):
        for chunk in _SENTENCE_END.split(" ".join(paragraph.split())):
            tokens = tokenize(chunk)
            if tokens:
                sentences.append(tokens)
    return sentences


def _brown_sentences(path):
    try:
        yield from _brown_archive_sentences(path)
    except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile, UnicodeDecodeError) as err:
        raise FormatError(f"{path}: not a readable Brown corpus archive ({type(err).__name__}: {err})", path=path) from None


def _brown_archive_sentences(path):
    with tarfile.open(path, "r:gz") as archive:
        members = sorted((m for m in archive.getmembers() if m.isfile() and re.fullmatch(r"brown/c[a-r]\d\d", m.name)),
                         key=lambda m: m.name)
        if not members:
            raise FormatError(f"{path}: no Brown corpus files (brown/ca01 ...) in the archive", path=path)
        for member in members:
            for line_no, line in enumerate(io.TextIOWrapper(archive.extractfile(member), encoding="utf-8"), 1):
                tokens = []
                for item in line.split():
                    word, slash, _tag = item.rpartition("/")
                    if not slash:
                        raise FormatError(f"{path}:{member.name}:{line_no}: expected word/tag tokens, got {item!r}", path=path)
                    tokens.append(word.lower())
                if tokens:
                    yield tokens


def prepare(sentences, *, num_words: int = 500, num_cipher: int = 2000, seed: int = 0, name: str = "",
            max_unk_tokens: int = 0, max_unk_share: float = 1.0) -> DecipherData:
    """Word list, seeded cipher/plaintext split and random key from tokenized ``sentences``.

    A sentence may be enciphered when it has at most ``max_unk_tokens`` out-of-list tokens,
    at most ``max_unk_share`` of its length; 0 (the default) is the paper's in-list rule,
    more adds ``<unk>`` as a hidden word with its own cipher symbol (module docstring)."""
    if int(max_unk_tokens) != max_unk_tokens or max_unk_tokens < 0:
        raise ParameterError(f"max_unk_tokens must be a non-negative integer, got {max_unk_tokens!r}", name='max_unk_tokens', value=max_unk_tokens)
    if not 0.0 <= max_unk_share <= 1.0:
        raise ParameterError(f"max_unk_share must lie in [0, 1], got {max_unk_share!r}", name='max_unk_share', value=max_unk_share)
    sentences = [list(s) for s in sentences if s]
    counts = collections.Counter(w for s in sentences for w in s)
    if len(counts) < num_words:
        raise ParameterError(f"the corpus has {len(counts)} distinct tokens, fewer than num_words = {num_words}", name='num_words', value=num_words)
    # ties broken by the token itself, so the list does not depend on dict order
    words = [w for w, _ in sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:num_words]]
    if UNK in words:
        raise ParameterError(f"the corpus itself holds the token {UNK!r} among its {num_words} most frequent")
    listed = set(words)
    outside = [sum(1 for w in s if w not in listed) for s in sentences]
    in_list = [i for i, n in enumerate(outside) if n == 0]
    qualifying = [i for i, n in enumerate(outside)
                  if n <= max_unk_tokens and n <= max_unk_share * len(sentences[i])]
    if len(qualifying) < num_cipher:
        rule = "in-list" if max_unk_tokens == 0 else \
            f"qualifying (at most {max_unk_tokens} out-of-list tokens, share <= {max_unk_share})"
        raise ParameterError(f"only {len(qualifying)} {rule} sentences, fewer than num_cipher = {num_cipher}", name='num_cipher', value=num_cipher)
    rng = as_rng(seed)
    chosen = set(rng.choice(np.asarray(qualifying), size=num_cipher, replace=False).tolist())
    order = sorted(chosen, key=lambda i: i)
    rng.shuffle(order)
    if max_unk_tokens > 0:
        words = words + [UNK]
    key = SubstitutionCipher.random(len(words), rng)
    index = {w: i for i, w in enumerate(words)}
    gold = [[w if w in listed else UNK for w in sentences[i]] for i in order]
    cipher = [key.encipher([index[w] for w in s]) for s in gold]
    plaintext = [[w if w in listed else UNK for w in s] for i, s in enumerate(sentences) if i not in chosen]
    meta = {"corpus": name, "seed": seed, "num_words": num_words, "sentences": len(sentences),
            "in_list_sentences": len(in_list), "cipher_sentences": num_cipher,
            "plaintext_sentences": len(plaintext),
            "plaintext_in_list": sum(1 for s in plaintext if UNK not in s),
            "cipher_tokens": int(sum(len(s) for s in cipher)),
            "distinct_cipher_symbols": int(len({int(x) for s in cipher for x in s}))}
    if max_unk_tokens > 0:
        meta.update({"max_unk_tokens": int(max_unk_tokens), "max_unk_share": float(max_unk_share),
                     "qualifying_sentences": len(qualifying),
                     "plaintext_qualifying": len(qualifying) - num_cipher,
                     "cipher_unk_tokens": int(sum(s.count(UNK) for s in gold)),
                     "unk_symbol": int(key.key[len(words) - 1])})
    return DecipherData(words, plaintext, cipher, gold, key, meta)


def _write_atomic(path: Path, text: str) -> None:
    with atomic_write_text(path) as handle:
        handle.write(text)


def save(data: DecipherData, folder) -> None:
    """Write ``data`` to ``folder`` (created if needed) in the plain-text layout above."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    _write_atomic(folder / "words.txt", "".join(w + "\n" for w in data.words))
    _write_atomic(folder / "plain.txt", "".join(" ".join(s) + "\n" for s in data.plaintext))
    _write_atomic(folder / "cipher.txt", "".join(" ".join(map(str, s.tolist())) + "\n" for s in data.cipher))
    if data.cipher_gold is not None:
        _write_atomic(folder / "gold.txt", "".join(" ".join(s) + "\n" for s in data.cipher_gold))
    if data.cipher_key is not None:
        _write_atomic(folder / "key.tsv", "symbol\tword\n" + "".join(
            f"{int(data.cipher_key.key[w])}\t{word}\n" for w, word in enumerate(data.words)))
    _write_atomic(folder / "meta.json", json.dumps(data.meta, indent=2) + "\n")


def _lines(path: Path) -> list[str]:
    if not path.exists():
        raise FileNotFoundError(f"{path}: missing (run `varorder decipher prepare` first)")
    with open_text(path) as handle:
        return handle.read().splitlines()


def load(folder, *, with_gold: bool = True) -> DecipherData:
    """Read a prepared folder, checking every line (errors name file and line)."""
    folder = Path(folder)
    words = _lines(folder / "words.txt")
    if len(set(words)) != len(words) or any(not w or " " in w for w in words):
        raise FormatError(f"{folder / 'words.txt'}: expected one distinct token per line", path=folder / 'words.txt')
    plaintext = [line.split() for line in _lines(folder / "plain.txt")]
    cipher = []
    for n, line in enumerate(_lines(folder / "cipher.txt"), 1):
        try:
            symbols = np.array([int(x) for x in line.split()], dtype=np.int64)
        except (ValueError, OverflowError):
            raise FormatError(f"{folder / 'cipher.txt'}:{n}: expected integers separated by spaces, got {line!r:.80}", path=folder / 'cipher.txt', line=n) from None
        if symbols.size == 0 or (symbols < 0).any():
            raise FormatError(f"{folder / 'cipher.txt'}:{n}: expected a non-empty line of non-negative integers", path=folder / 'cipher.txt', line=n)
        cipher.append(symbols)
    meta_path = folder / "meta.json"
    meta = {}
    if meta_path.exists():
        try:
            meta = json.loads("\n".join(_lines(meta_path)))
        except json.JSONDecodeError as err:
            raise FormatError(f"{meta_path}: not valid JSON ({err})", path=meta_path) from None
        if not isinstance(meta, dict):
            raise FormatError(f"{meta_path}: expected a JSON object", path=meta_path)
    gold = key = None
    if with_gold and (folder / "key.tsv").exists():
        index = {w: i for i, w in enumerate(words)}
        mapping = np.full(len(words), -1, dtype=np.int64)
        rows = _lines(folder / "key.tsv")
        for n, line in enumerate(rows[1:], 2):
            parts = line.split("\t")
            if len(parts) != 2 or parts[1] not in index or not (parts[0].isascii() and parts[0].isdigit()) \
                    or len(parts[0]) > 18:
                raise FormatError(f"{folder / 'key.tsv'}:{n}: expected 'symbol<TAB>listed word', got {line!r}", path=folder / 'key.tsv', line=n)
            mapping[index[parts[1]]] = int(parts[0])
        if (mapping < 0).any() or len(set(mapping.tolist())) != len(words):
            raise FormatError(f"{folder / 'key.tsv'}: the key must map every listed word to a distinct symbol", path=folder / 'key.tsv')
        key = SubstitutionCipher(mapping)
        if (folder / "gold.txt").exists():
            gold = [line.split() for line in _lines(folder / "gold.txt")]
    _check_folder(folder, words, plaintext, cipher, gold, meta)
    return DecipherData(words, plaintext, cipher, gold, key, meta)


def _check_folder(folder: Path, words, plaintext, cipher, gold, meta) -> None:
    """The folder as a whole: no empty file, and the files agree with each other and with
    the counts ``meta.json`` announces — a truncated cipher.txt trained silently on fewer sentences."""
    for name, rows in (("words.txt", words), ("plain.txt", plaintext), ("cipher.txt", cipher)):
        if not rows or not any(len(row) for row in rows):
            raise FormatError(f"{folder / name}: empty (the task folder {folder} is incomplete; "
                              f"rerun `varorder decipher prepare`)", path=folder / name)
    counts = {"cipher_sentences": ("cipher.txt", len(cipher)), "plaintext_sentences": ("plain.txt", len(plaintext)),
              "cipher_tokens": ("cipher.txt", int(sum(len(s) for s in cipher)))}
    for field, (name, actual) in counts.items():
        announced = meta.get(field)
        if announced is not None and announced != actual:
            raise FormatError(f"{folder / name}: holds {actual} {field.replace('_', ' ')}, but "
                              f"{folder / 'meta.json'} field {field!r} announces {announced!r:.20} (a truncated or replaced file?)", path=folder / name)
    if gold is not None:
        if len(gold) != len(cipher):
            raise FormatError(f"{folder / 'gold.txt'}: {len(gold)} sentences, but {folder / 'cipher.txt'} has {len(cipher)}", path=folder / 'gold.txt')
        for n, (plain, symbols) in enumerate(zip(gold, cipher), 1):
            if len(plain) != len(symbols):
                raise FormatError(f"{folder / 'gold.txt'}:{n}: {len(plain)} words, but line {n} of "
                                  f"{folder / 'cipher.txt'} has {len(symbols)} symbols", path=folder / 'gold.txt', line=n)
