"""Reading and normalising line-aligned parallel text (one sentence per line per side).

Input comes as two line-aligned files (English, French) or as one fast_align-style joint file
with ``english ||| french`` on each line; ``-`` reads standard input.

Normalisation follows the NAACL 2003 word-alignment test conventions (see
``../shared/data/hansards-en-fr/normalized/README.md``), each part switchable
(:class:`Normalization`): lower case; accents stripped to ASCII (œ → oe); tokenisation —
punctuation split off (hyphens included, but ``--`` and ``...`` kept whole), numbers kept whole
(6.42, 1,122,000, .5, 2.8c), abbreviations kept whole (mr., hon., p.m.), French elisions expanded
(l' → le …, other words ending in an apostrophe such as aujourd' kept whole), du/des/au/aux split
into de le / de les / a le / a les except inside hyphenated words (Rivière-du-Loup) and for the
accented dû / dès; English 's split off and n't → not (can't → can not, won't → will not).
On the already-tokenised NAACL test text it changes no line's token count.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import asdict, dataclass

from varorder.errors import FormatError, ParameterError
from varorder.io._text import open_stdin, open_text

__all__ = ["Normalization", "read_bitext", "read_joint", "iter_bitext", "iter_joint", "parse_joint_line", "normalize",
           "strip_accents", "JOINT_SEPARATOR"]

JOINT_SEPARATOR = "|||"
_LIGATURES = {"œ": "oe", "Œ": "oe", "æ": "ae", "Æ": "ae", "ß": "ss", "«": '"', "»": '"', "“": '"', "”": '"'}
_FRENCH_ELISIONS = {"l'": "le", "d'": "de", "qu'": "que", "j'": "je", "m'": "me", "t'": "te", "s'": "se",
                    "n'": "ne", "c'": "ce", "jusqu'": "jusque", "lorsqu'": "lorsque", "puisqu'": "puisque",
                    "quoiqu'": "quoique"}
_FRENCH_CONTRACTIONS = {"du": ["de", "le"], "des": ["de", "les"], "au": ["a", "le"], "aux": ["a", "les"]}
_KEEP_WHOLE = {"mr.", "mrs.", "ms.", "hon.", "dr.", "st.", "m.", "mme.", "no.", "mm.", "messrs."}
_ENGLISH_NEGATIONS = ((re.compile(r"\bcan't\b", re.I), "can not"), (re.compile(r"\bwon't\b", re.I), "will not"),
                      (re.compile(r"\bshan't\b", re.I), "shall not"), (re.compile(r"n't\b", re.I), " not"))
_TOKEN = re.compile(r"""
    (?:[^\W\d_]\.){2,}                 # p.m., u.s.
  | (?<![^\W_])(?:messrs|mrs|mr|ms|hon|dr|st|mme|mm|m|no)\.   # mr., hon. (also after an elision: l'hon.)
  | \d+(?:[.,]\d+)*[^\W\d_]*           # 6.42, 1,122,000, 2.8c
  | \.\d+                              # .5
  | -{2,} | \.{2,}                     # -- and ...
  | [^\W_]+'?                          # words (letters and digits), an elided form keeps its apostrophe
  | \S                                 # any other character alone
""", re.VERBOSE)


@dataclass(frozen=True)
class Normalization:
    """Which parts of the NAACL 2003 normalisation to apply (all off: whitespace tokens as given)."""

    lowercase: bool = False
    strip_accents: bool = False
    tokenize: bool = False

    @classmethod
    def naacl(cls) -> "Normalization":
        return cls(True, True, True)

    @classmethod
    def from_dict(cls, data, where: str = "normalization") -> "Normalization":
        if not isinstance(data, dict) or set(data) != {"lowercase", "strip_accents", "tokenize"} \
                or not all(isinstance(v, bool) for v in data.values()):
            raise FormatError(f"{where}: expected booleans lowercase, strip_accents, tokenize; got {data!r}")
        return cls(**data)

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def active(self) -> bool:
        return self.lowercase or self.strip_accents or self.tokenize

    def describe(self) -> str:
        parts = [name for name, on in self.to_dict().items() if on]
        return "+".join(parts) if parts else "none"

    def __call__(self, line: str, language: str) -> list[str]:
        if not self.active:
            return line.split()
        return normalize(line, language, lowercase=self.lowercase, accents=self.strip_accents,
                         tokenize=self.tokenize)


class _Interner:
    """Tokens of a corpus share one string object per word type (a 100k-pair corpus held as
    lists of fresh strings costs ~4× the memory of lists of shared ones)."""

    def __init__(self, normalization: Normalization):
        self.normalization = normalization
        self.types: dict[str, str] = {}

    def __call__(self, line: str, language: str) -> list[str]:
        types = self.types
        return [types.setdefault(t, t) for t in self.normalization(line, language)]


def _spacing_marks() -> dict[int, None]:
    """Characters whose compatibility decomposition is a space and combining marks only — the
    spacing diacritics ``¯ ´ ¨ ¸ ˘ ˙ ˚ ˛ ˜ ˝ ΄ ῭`` …: stripped of their accent they are nothing, not
    a space (else ``'a ¯ b'`` would give the whitespace token ``' '``). Built once, from the BMP."""
    global _SPACING
    if _SPACING is None:
        _SPACING = {}
        for code in range(0x10000):
            char = chr(code)
            if char.isspace():
                continue
            decomposed = unicodedata.normalize("NFKD", char)
            if " " in decomposed and all(c == " " or unicodedata.combining(c) for c in decomposed):
                _SPACING[code] = None
    return _SPACING


_SPACING = None


def strip_accents(text: str) -> str:
    for k, v in _LIGATURES.items():
        text = text.replace(k, v)
    if not text.isascii():
        text = text.translate(_spacing_marks())
    return "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))


def _french_tokens(tokens: list[str]) -> list[str]:
    """Expand elisions; split du/des/au/aux unless a hyphen touches them (Rivière-du-Loup, au - dessus).

    Rules match the lower-cased token; a token no rule changes keeps its case.
    """
    out = []
    for k, tok in enumerate(tokens):
        low = tok.lower()
        if low in _FRENCH_ELISIONS:
            out.append(_FRENCH_ELISIONS[low])
        elif low in _FRENCH_CONTRACTIONS and "-" not in tokens[max(k - 1, 0):k] + tokens[k + 1:k + 2]:
            out.extend(_FRENCH_CONTRACTIONS[low])
        else:
            out.append(tok)
    return out


def _english_tokens(tokens: list[str]) -> list[str]:
    """Split a trailing apostrophe off English words and join ' + s into the possessive 's."""
    split = []
    for tok in tokens:
        if len(tok) > 1 and tok.endswith("'"):
            split.extend([tok[:-1], "'"])
        else:
            split.append(tok)
    out, i = [], 0
    while i < len(split):
        if split[i] == "'" and i + 1 < len(split) and split[i + 1] == "s":
            out.append("'s")
            i += 2
            continue
        out.append(split[i])
        i += 1
    return out


def normalize(line: str, language: str, lowercase: bool = True, accents: bool = True,
              tokenize: bool = True) -> list[str]:
    """Tokens of one raw sentence in the NAACL 2003 conventions (``language`` "en" or "fr")."""
    if language not in ("en", "fr"):
        raise ParameterError(f"language must be 'en' or 'fr', got {language!r}", name='language', value=language)
    text = line.strip()
    if lowercase:
        text = text.lower()
    if not tokenize:
        # a token of spacing accents only (a lone '¯') strips to nothing: no token
        return [s for s in map(strip_accents, text.split()) if s] if accents else text.split()
    text = text.replace("’", "'")
    if language == "en":
        for pattern, replacement in _ENGLISH_NEGATIONS:
            text = pattern.sub(replacement, text)
    out = []
    for raw in text.split():
        if raw.lower() in _KEEP_WHOLE:
            out.append(raw)
            continue
        out.extend(_TOKEN.findall(raw))
    out = _french_tokens(out) if language == "fr" else _english_tokens(out)
    return [s for s in map(strip_accents, out) if s] if accents else out


def _open(path):
    if str(path) == "-":
        return open_stdin()  # strict UTF-8 as a file is, whatever the locale
    return open_text(path)


def iter_bitext(e_path, f_path, limit: int | None = None, normalize_text=False, _tokens=None):
    """:func:`read_bitext` one pair at a time (the files are read as the pairs are consumed)."""
    norm = _tokens or _normalization(normalize_text)
    with _open(e_path) as fe, _open(f_path) as ff:
        line_no = 0
        while limit is None or line_no < limit:
            e, f = fe.readline(), ff.readline()
            if not e and not f:
                break
            line_no += 1
            if not e or not f:
                short, other = (e_path, f_path) if not e else (f_path, e_path)
                raise FormatError(f"{short}: ends at line {line_no - 1} but {other} has line {line_no}; "
                                  "parallel files must have the same number of lines", path=short)
            yield norm(e, "en"), norm(f, "fr")


def read_bitext(e_path, f_path, limit: int | None = None, normalize_text=False):
    """Read line-aligned English and French files into a list of (e tokens, f tokens).

    ``normalize_text``: a :class:`Normalization`, or True for all of it (False/None: whitespace
    tokens). Either path may be ``-`` (stdin). Raises FormatError naming the file and line when one
    side has more lines.
    """
    return list(iter_bitext(e_path, f_path, limit, _tokens=_Interner(_normalization(normalize_text))))


def iter_joint(path, limit: int | None = None, normalize_text=False, _tokens=None):
    """:func:`read_joint` one pair at a time (the file is read as the pairs are consumed)."""
    norm = _tokens or _normalization(normalize_text)
    with _open(path) as fh:
        for line_no, line in enumerate(fh, 1):
            if limit is not None and line_no > limit:
                break
            yield parse_joint_line(line, path, line_no, norm)


def parse_joint_line(line: str, path, line_no: int, normalize_text=False):
    """The (english, french) token lists of one ``english ||| french`` line of ``path`` (``-``: stdin)."""
    norm = normalize_text if callable(normalize_text) else _normalization(normalize_text)
    parts = line.rstrip("\r\n").split(f" {JOINT_SEPARATOR} ")
    if len(parts) != 2:
        parts = line.rstrip("\r\n").split(JOINT_SEPARATOR)
    if len(parts) != 2:
        shown = "stdin" if str(path) == "-" else path
        raise FormatError(f"{shown}, line {line_no}: expected 'english tokens ||| french tokens' "
                          f"(one '{JOINT_SEPARATOR}'), found {len(parts) - 1}", path=shown, line=line_no)
    return norm(parts[0], "en"), norm(parts[1], "fr")


def read_joint(path, limit: int | None = None, normalize_text=False):
    """Read a fast_align-style joint file (``english ||| french`` per line; ``-`` is stdin)."""
    return list(iter_joint(path, limit, _tokens=_Interner(_normalization(normalize_text))))


def _normalization(value) -> Normalization:
    if isinstance(value, Normalization):
        return value
    return Normalization.naacl() if value else Normalization()
