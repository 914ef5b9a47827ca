"""Reading and normalising line-aligned parallel text (one sentence per line per side).

Normalisation follows the NAACL 2003 word-alignment test conventions (see
``../shared/data/hansards-en-fr/normalized/README.md``): lower case, accents
stripped to ASCII (œ → oe), punctuation (hyphens included) split off, French elisions expanded
(l' → le …) and du/des/au/aux split (de le, de les, a le, a les); English 's split
and n't → not. Apply the same function to every part of a corpus.
"""

from __future__ import annotations

import re
import unicodedata

from varorder.io._text import open_text

__all__ = ["read_bitext", "normalize", "strip_accents"]

_LIGATURES = {"œ": "oe", "Œ": "oe", "æ": "ae", "Æ": "ae", "ß": "ss"}
_FRENCH_ELISIONS = {"l'": "le", "d'": "de", "qu'": "que", "j'": "je", "m'": "me", "t'": "te", "s'": "se",
                    "n'": "ne", "c'": "ce", "jusqu'": "jusque", "lorsqu'": "lorsque", "puisqu'": "puisque",
                    "quoiqu'": "quoique"}
_FRENCH_CONTRACTIONS = {"du": ["de", "le"], "des": ["de", "les"], "au": ["a", "le"], "aux": ["a", "les"]}
_KEEP_WHOLE = {"mr.", "mrs.", "ms.", "hon.", "dr.", "st.", "m.", "mme.", "no."}
_TOKEN = re.compile(r"\b(?:mrs|mr|ms|hon|dr|st|mme|m|no)\.|[a-z0-9]+'?|[^\sa-z0-9]")


def strip_accents(text: str) -> str:
    for k, v in _LIGATURES.items():
        text = text.replace(k, v)
    return "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))


def normalize(line: str, language: str) -> list[str]:
    """Tokens of one raw sentence in the NAACL 2003 conventions (``language`` "en" or "fr")."""
    if language not in ("en", "fr"):
        raise ValueError(f"language must be 'en' or 'fr', got {language!r}")
    text = strip_accents(line.strip().lower()).replace("’", "'")
    if language == "en":
        text = re.sub(r"n't\b", " not", text)
    out = []
    for raw in text.split():
        if raw in _KEEP_WHOLE:
            out.append(raw)
            continue
        for tok in _TOKEN.findall(raw):
            if language == "fr":
                if tok in _FRENCH_ELISIONS:
                    out.append(_FRENCH_ELISIONS[tok])
                    continue
                if tok.endswith("'") and len(tok) > 1:
                    out.extend([tok[:-1], "'"])
                    continue
                out.extend(_FRENCH_CONTRACTIONS.get(tok, [tok]))
            else:
                if tok.endswith("'") and len(tok) > 1:
                    out.append(tok[:-1])
                    out.append("'")
                else:
                    out.append(tok)
        # English possessive: "john's" tokenizes as "john'" + "s" above; rejoin as 's
    return _join_possessive(out) if language == "en" else out


def _join_possessive(tokens):
    out = []
    i = 0
    while i < len(tokens):
        if tokens[i] == "'" and i + 1 < len(tokens) and tokens[i + 1] == "s":
            out.append("'s")
            i += 2
            continue
        out.append(tokens[i])
        i += 1
    return out


def read_bitext(e_path, f_path, limit: int | None = None, normalize_text: bool = False):
    """Read line-aligned English and French files into a list of (e tokens, f tokens).

    Tokens are whitespace-separated unless ``normalize_text`` applies :func:`normalize`.
    Raises ValueError naming the file and line when one side has more lines.
    """
    pairs = []
    with open_text(e_path) as fe, open_text(f_path) as ff:
        line_no = 0
        while limit is None or line_no < limit:
            e, f = fe.readline(), ff.readline()
            if not e and not f:
                break
            line_no += 1
            if not e or not f:
                short, other = (e_path, f_path) if not e else (f_path, e_path)
                raise ValueError(f"{short}: ends at line {line_no - 1} but {other} has line {line_no}; "
                                 "parallel files must have the same number of lines")
            if normalize_text:
                pairs.append((normalize(e, "en"), normalize(f, "fr")))
            else:
                pairs.append((e.split(), f.split()))
    return pairs
