"""
Named-entity recognition: data, training, constrained decoding, entity F1
=========================================================================

**Problem.** Find the named entities of a text — spans with a type (person, place, ...) — by
tagging tokens in a chunk scheme (BIO, BIOES, ...) and reading the spans back. The flow here is
CRFsuite's canonical workload (the sklearn-crfsuite CoNLL tutorial), end to end: CoNLL columns or
GUM's coreference annotation → tags → :class:`~varorder.models.crf.CRF` (or the
:class:`~varorder.models.crf2.SecondOrderCRF`) → decoding that can only emit valid sequences →
entity precision / recall / F1 as ``conlleval`` and seqeval compute them.

**Papers.** Tjong Kim Sang & De Meulder (2003), *CoNLL-2003 NER*; Ramshaw & Marcus (1995) and
Ratinov & Roth (2009) for the tag schemes; Lafferty, McCallum & Pereira (2001) for the CRF;
Tsuboi et al. (2008) for training on partial labels; Zeldes (2017) for GUM.
"""

# %%
# Data
# ----
# :mod:`varorder.io.conll` reads and writes CoNLL-2002/2003 column files (token first, tags after,
# ``-DOCSTART-`` lines kept); :mod:`varorder.io.schemes` converts between IOB1, IOB2 (BIO), BIOES
# and BILOU and validates; :func:`varorder.io.coref.read_ner` turns GUM's CorefUD ``Entity=``
# annotation into flat NER tags (a mention is *named* when its head word is a proper noun; its type
# is GUM's entity type; of nested named mentions the outermost is kept).
import tempfile
from pathlib import Path

from varorder.io import schemes
from varorder.io.conll import read_conll

work = Path(tempfile.mkdtemp(prefix="varorder-ner-"))
people, places = ["Anna", "Boris", "Carla", "Dmitri"], ["Paris", "Oslo", "Lima"]
lines = ["-DOCSTART- -X- O", ""]
for i in range(40):
    person = [people[i % 4]] + (["Smith"] if i % 3 == 0 else [])
    rows = [(w, "NNP", "I-PER") for w in person]  # CoNLL-2003's own scheme is IOB1
    rows += [("flew", "VBD", "O"), ("to", "TO", "O")]
    rows += [(places[i % 3], "NNP", "I-LOC"), (".", ".", "O")]
    lines += [" ".join(r) for r in rows] + [""]
(work / "train.txt").write_text("\n".join(lines) + "\n")

sentences = read_conll(work / "train.txt")
iob1 = [s.tags(-1) for s in sentences]
tags = [schemes.convert(t, "IOB1", "BIO") for t in iob1]
print(sentences[0].words, iob1[0], "->", tags[0])
print("spans:", schemes.spans(tags[0], "BIO"))

# %%
# Train, then decode under constraints
# ------------------------------------
# The CRF reads feature dicts; :func:`~varorder.models.features.ner_features` makes the tutorial's
# word features. ``predict(X, constraints="BIO")`` forbids every transition BIO does not allow
# (``O → I-PER`` and the like, the masks of :func:`~varorder.io.schemes.allowed_transitions`) and
# finds the best valid sequence exactly; ``allowed=`` fixes tags or restricts them to sets
# per token;
# ``predict_kbest`` gives the n best with their probabilities. All of it runs on the one chain
# engine (its ``allowed=`` masks and k-best semiring).
from varorder.eval.ner import classification_report, entity_report
from varorder.models.crf import CRF
from varorder.models.features import ner_features

words = [s.words for s in sentences]
X = [ner_features(w) for w in words]
crf = CRF(c1=0.1, c2=0.1, max_iterations=50).fit(X, tags)

test = [ner_features("Carla Smith flew to Oslo .".split())]
print(crf.predict(test, constraints="BIO")[0])
allowed = [[None, None, None, None, {"B-LOC", "O"}, "O"]]  # candidates per token
print(crf.predict(test, allowed=allowed, constraints="BIO")[0])
taggings, log_p = crf.predict_kbest(test, k=3, constraints="BIO")
for tagging, lp in zip(taggings[0], log_p[0]):
    print(f"{lp:8.3f}", tagging)

# %%
# Entity scores
# -------------
# :func:`~varorder.eval.ner.entity_report` counts a predicted span correct when a gold span has the
# same type, start and end: ``mode="default"`` reads spans as ``conlleval`` (and seqeval's default)
# do, ``mode="strict"`` as seqeval's strict mode for a scheme. The numbers equal seqeval's (tested
# on random sequences for every mode and scheme).
predicted = crf.predict(X, constraints="BIO")
report = entity_report(tags, predicted)
print(
    f"micro F1 {report.micro.f1:.3f}, strict BIO F1 "
    f"{entity_report(tags, predicted, mode='strict', scheme='BIO').micro.f1:.3f}"
)
print(classification_report(tags, predicted))

# %%
# Command line
# ------------
# ``--task ner`` reads CoNLL columns (``--format conll``, tag column ``--column``, default the last)
# or CoNLL-U with CorefUD entities (GUM), uses the NER feature preset, decodes under ``--scheme``
# (default BIO), writes the tags back in the input's format and ``tag eval`` prints entity scores.
# ``--model crf2`` trains the second-order CRF. On GUM itself:
# ``varorder tag train en_gum-ud-train.conllu.gz --task ner -o gum.npz`` then
# ``varorder tag eval gum.npz en_gum-ud-dev.conllu.gz --task ner``.
from subprocess import PIPE, STDOUT, run

from varorder.io.conll import write_conll

write_conll(work / "train.bio", sentences, tags)
commands = """
varorder tag train train.bio --format conll --task ner -o ner.npz \\
    --max-iterations 50 --quiet
varorder tag predict ner.npz train.bio --format conll --task ner -o tagged.bio
varorder tag eval ner.npz train.bio --format conll --task ner
varorder tag train train.bio --format conll --task ner --model crf2 -o ner2.npz \\
    --max-iterations 30 --quiet
"""
shell = run(["bash", "-exc", commands], cwd=work, stdout=PIPE, stderr=STDOUT, text=True)
print(shell.stdout)
shell.check_returncode()  # a failing command stops the script

# %%
# Coming from sklearn-crfsuite
# ----------------------------
# What maps: ``CRF(algorithm=..., c1=, c2=, max_iterations=, all_possible_states=,
# all_possible_transitions=, epsilon=, pa_type=, c=, error_sensitive=, averaging=, variance=,
# gamma=, calibration_*=)`` take CRFsuite's names and meanings, with the trainers ``lbfgs``,
# ``l2sgd``,
# ``ap``, ``pa``, ``arow``; feature dicts as python-crfsuite takes them (string values become
# ``name:value`` features, numbers and booleans weights, nested dicts and lists of strings too; str
# or UTF-8 bytes); ``fit`` / ``predict`` / ``predict_marginals`` (sklearn-crfsuite's
# ``predict_marginals`` gives a dict per token, here an (n, K) array with columns in ``classes_``
# order); ``state_features_``, ``transition_features_``, ``size_``, ``training_log_``; the
# ``flat_*`` metrics in :mod:`varorder.eval.ner`.
#
# What differs:
#
# * Defaults: ``all_possible_states`` and ``all_possible_transitions`` default to True here (the
#   dense F × K weights varorder always had), False in CRFsuite; pass False for CRFsuite's sparse
#   feature set (a feature seen with a label counts whatever its value, as in CRFsuite: a False
#   flag is a feature with the value 0). ``min_freq`` is ``min_feature_count``. The objective is
#   CRFsuite's: on the same feature dicts with ``all_possible_states=False`` the L-BFGS / OWL-QN
#   loss equals CRFsuite's at every iteration (``tests/test_models_crfsuite_compat.py``).
#   ``boundary_weights=True`` adds start and end label weights, which CRFsuite lacks.
# * Files: the model is npz + JSON (``save`` / ``load``), not CRFsuite's binary format; there is no
#   ``model_filename`` / ``keep_tempfiles`` / ``trainer_cls``.
# * Trainers: ``l2sgd``'s step-size calibration follows CRFsuite's idea (try η on a sample, grow or
#   shrink it by ``calibration_rate``) but not its code, so epochs differ in detail; ``ap``/``pa``/
#   ``arow`` visit sequences in a seeded random order per epoch (``random_state``). The lbfgs
#   line search options (``linesearch``, ``max_linesearch``, ``num_memories``) are not exposed.
# * ``size_`` counts the bytes of the non-zero weights and their feature names, not a model file.
# * ``training_log_`` has ``num``, ``loss``, ``error_norm`` and ``time`` per iteration (no
#   ``active_features`` or line-search fields).
# * New here: ``predict(X, allowed=..., constraints=...)``, ``predict_kbest``, constrained
#   marginals, partial labels in ``fit`` (a token's label may be a set of candidates or None), and
#   the second-order CRF.

# %%
# Measured
# --------
# GUM train → dev with the tutorial's features, against CRFsuite on the same feature dicts
# (ratio = varorder ÷ CRFsuite; ``benchmarks/peers/ner_gum.py``).
#
# .. varorder-results:: Sequence tagging
#    :systems: first order; start/end; second-order; semi-Markov; constraints; algorithm=

# %%
# Limits
# ------
# * The second-order CRF runs the engine's sparse-move chain over pair states (≈ 260 for GUM's 21
#   BIO labels, ≈ 3 100 moves): a training pass costs ≈ 6× a first-order one.
# * :class:`~varorder.models.semicrf.SemiMarkovCRF` scores whole segments (length per label,
#   span shape, case pattern, text, first and last word, the words just outside, a jackknifed
#   dictionary of training entities) on the engine's semi-Markov structure; it reads words,
#   cannot emit an entity longer than ``max_segment_length``, and an objective evaluation costs
#   a pass over (positions × lengths × labels) segment scores (≈ 1.3 M × 11 on GUM train with
#   segments of at most 8 words).
# * Flat NER only: GUM's nested mentions are reduced to one layer (outermost or innermost).
