"""
n-gram language models and MAX-ARPA bounds
==========================================

**Problem.** Estimate a back-off n-gram model from a corpus (interpolated modified
Kneser–Ney, absolute discounting or additive smoothing), write and read it as ARPA or as a
memory-mapped binary file, score text, and compute MAX-ARPA bounds: for every n-gram, the
largest probability any longer left context could give it — the bound that exact decoding
in high-order HMMs needs (:doc:`sys_06_exact_highorder`).

**Papers.** Chen & Goodman (1999) for modified Kneser–Ney; Carter, Dymetman & Bouchard
(2012), eq. 2–8 and §2.3, for MAX-ARPA; Stolcke (1998) for entropy pruning; Stolcke (2002,
SRILM) for static mixing. Peers: KenLM (Heafield 2011) for reading and scoring (and its
Python API), lmplz for estimation, SRILM for mixing and pruning.
"""

# %%
# Python
# ------
import numpy as np

from varorder.lm import ModifiedKneserNey
from varorder.lm.arpa import read_arpa, write_arpa

# a toy corpus: words drawn from a Zipf law with a preference for repeating bigrams
rng = np.random.default_rng(0)
words = [f"w{i}" for i in range(300)]
p = 1.0 / np.arange(1, 301) ** 1.1
p /= p.sum()
follow = rng.integers(300, size=300)  # each word's favourite successor
corpus = []
for _ in range(3000):
    sentence = [rng.choice(300, p=p)]
    while len(sentence) < rng.integers(4, 12):
        last = sentence[-1]
        sentence.append(follow[last] if rng.random() < 0.5 else rng.choice(300, p=p))
    corpus.append(" ".join(words[i] for i in sentence))

lm = ModifiedKneserNey(order=3).fit_sentences(corpus).model_
print(lm.order, "-gram model,", len(lm.vocabulary), "words")
print("log10 p:", lm.score_sentences(corpus[:2]).round(3))
print("perplexity of 3 sentences:", round(lm.perplexity(corpus[:3]), 3))

# MAX-ARPA: a bound on p(w | c) over every left extension of the context c
ids = lm.vocabulary.encode(corpus[0].split()[:3])
exact, bound = lm.logprob(ids[:2], ids[2]), lm.max_logprob(ids[1:2], ids[2])
print(f"log p(w3 | w1 w2) = {exact:.4f} <= bound over all x w2: {bound:.4f}")

# %%
# Command line
# ------------
# Train, write ARPA, build the memory-mapped binary model, score (``--per-token`` prints
# what KenLM's query prints).
import tempfile
from pathlib import Path
from subprocess import PIPE, STDOUT, run

work = Path(tempfile.mkdtemp(prefix="varorder-lm-"))
(work / "train.txt").write_text("\n".join(corpus) + "\n")
(work / "test.txt").write_text("\n".join(corpus[:2]) + "\n")
commands = """
varorder lm train train.txt -n 3 -o model.arpa
varorder lm build-binary model.arpa model.bin
varorder lm score model.bin test.txt
varorder lm maxarpa model.arpa model.maxarpa
"""
shell = run(["bash", "-exc", commands], cwd=work, stdout=PIPE, stderr=STDOUT, text=True)
print(shell.stdout)
shell.check_returncode()  # a failing command stops the script

# %%
# A memory budget, as lmplz's ``-S``
# -----------------------------------
# ``lm train`` always works under a memory budget: ``-S 2G``, ``-S 500M`` or a share of
# physical memory, ``-S 20%`` (the default; lmplz's is 80 %). The corpus is counted in
# memory a block of sentences at a time, so the memory held follows the number of
# distinct n-grams, not the number of tokens; while the counts and the estimate fit in
# the budget everything stays in memory. A corpus whose counts do not fit is spilled to
# sorted runs in ``-T`` (the system's temporary folder by default), merged there, and
# estimated by passes over the sorted tables, the ARPA file written as it is computed
# (``--binary``, ``--max-arpa`` and ``--prune-entropy`` load the merged counts instead).
# Every path writes the same file byte for byte; the command's last lines say which
# one ran ("counts held in memory" or "on disk"). On top of the budget comes a fixed
# ~130 MB for Python, NumPy and Numba's kernels, and the vocabulary.

# %%
# Coming from KenLM
# -----------------
# ``varorder.lm.kenlm`` is KenLM's Python API (``Model`` / ``LanguageModel``, ``State``,
# ``BeginSentenceWrite``, ``NullContextWrite``, ``BaseScore``, ``BaseFullScore``,
# ``score(s, bos=, eos=)``, ``full_scores``, ``perplexity``, ``order``, ``in``) over ARPA
# or varorder binary files, with KenLM's semantics: log10, ``<s>``/``</s>`` added by
# ``score``, out-of-vocabulary words scored as ``<unk>`` and flagged, ``-99`` read as the
# number -99. Code written for ``import kenlm`` runs with ``import varorder.lm.kenlm as
# kenlm`` (KenLM's own ``python/example.py`` passes unchanged but for that line). What
# differs: KenLM's binary files do not open (build varorder's with ``varorder lm
# build-binary``), and ``Config`` is accepted but changes nothing.
import varorder.lm.kenlm as kenlm

model = kenlm.Model(str(work / "model.arpa"))
sentence = " ".join(corpus[0].split()[:5])
print(model.order, "-gram:", round(model.score(sentence, bos=True, eos=True), 4))
print("perplexity:", round(model.perplexity(sentence), 3))
print([(round(p, 4), n, oov) for p, n, oov in model.full_scores(sentence + " unseen")])
state, out = kenlm.State(), kenlm.State()
model.BeginSentenceWrite(state)
total = 0.0
for word in sentence.split():
    total += model.BaseScore(state, word, out)
    state, out = out, state
print("stateful sum = score(eos=False):", abs(total - model.score(sentence, eos=False)) < 1e-9)

# %%
# pyctcdecode (and through it transformers' ``Wav2Vec2ProcessorWithLM``) calls the
# ``kenlm`` module by that name; point it at varorder's before building the decoder
# (pyctcdecode is not a varorder dependency; not run here):
#
# .. code-block:: python
#
#     import pyctcdecode.language_model
#     import varorder.lm.kenlm
#     from pyctcdecode import build_ctcdecoder
#
#     pyctcdecode.language_model.kenlm = varorder.lm.kenlm
#     decoder = build_ctcdecoder(labels, kenlm_model_path="model.arpa")  # or model.bin
#     text = decoder.decode(logits)
#
# (``sys.modules["kenlm"] = varorder.lm.kenlm`` before the first ``import pyctcdecode``
# does the same where pyctcdecode is imported indirectly, as by
# ``Wav2Vec2ProcessorWithLM``.)

# %%
# Coming from SRILM: mixing and pruning
# -------------------------------------
# ``varorder lm mix`` interpolates models linearly, at query time
# (:class:`~varorder.lm.mix.MixtureLM`) or written as one back-off model the way SRILM's
# ``-mix-lm -write-lm`` does: the union of the n-grams with their exact mixed
# probabilities and recomputed back-off weights. Off that union the static model backs
# off with one weight per context instead of one per model: SRILM's approximation, made
# here too. ``--tune`` chooses the weights by EM on held-out text (SRILM's
# ``compute-best-mix``). ``varorder lm prune`` is Stolcke's relative-entropy pruning as
# SRILM's ``-prune`` implements it (:mod:`varorder.lm.prune`).
#
# ================================================  ==============================================
# SRILM                                             varorder
# ================================================  ==============================================
# ``ngram -lm A -mix-lm B -lambda .6 -write-lm M``  ``varorder lm mix A B --lambda 0.6 -o M``
# ``compute-best-mix`` on ``ngram -debug 2 -ppl``   ``varorder lm mix A B --tune held.txt``
# ``ngram -lm A -prune 1e-8 -write-lm P``           ``varorder lm prune A P --threshold 1e-8``
# ``ngram ... -minprune 3``                         ``--min-order 3``
# (prune to a size: search the threshold by hand)   ``varorder lm prune A P --target-size 100000``
# ``ngram -lm A -ppl test.txt``                     ``varorder lm score A test.txt``
# ================================================  ==============================================
#
# Perplexities count out-of-vocabulary words (scored as ``<unk>``), as KenLM does;
# SRILM's ``-ppl`` leaves them out.
other = [" ".join(reversed(s.split())) for s in corpus]
(work / "other.txt").write_text("\n".join(other[:2000]) + "\n")
(work / "held.txt").write_text("\n".join(corpus[-300:] + other[-300:]) + "\n")
commands = """
varorder lm train other.txt -n 3 -o other.arpa
varorder lm mix model.arpa other.arpa --tune held.txt -o mixed.arpa
varorder lm prune model.arpa pruned.arpa --threshold 1e-5 --eval held.txt
"""
shell = run(["bash", "-exc", commands], cwd=work, stdout=PIPE, stderr=STDOUT, text=True)
print(shell.stdout)
shell.check_returncode()

# %%
# Measured
# --------
# PTB (Mikolov's 10k-vocabulary version): loading, scoring and estimating the 5-gram
# against KenLM and lmplz (ratio = varorder ÷ peer).
#
# .. varorder-results:: n-gram LMs
#    :systems: read_arpa; open_binary; score; lm train; lm prune; lm mix

# %%
# Limits
# ------
# * Orders up to 10 (log-linear models up to 32).
# * Scoring one sentence from the command line on an *ARPA* file is about 15 % slower than
#   KenLM's module (the ARPA parse dominates); use the binary model (0.13 s per process).
# * Reading an ARPA file takes 4.5× KenLM's resident memory (+219 MB against +49 MB for the
#   PTB 5-gram).
# * lmplz could not be built on the measuring machine: its figures are the issue's.
