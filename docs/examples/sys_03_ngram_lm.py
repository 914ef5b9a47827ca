"""
n-gram language models and MAX-ARPA bounds
==========================================

**Problem.** Estimate a back-off n-gram model from a corpus (interpolated modified
Kneser–Ney, absolute discounting or additive smoothing), write and read it as ARPA or as a
memory-mapped binary file, score text, and compute MAX-ARPA bounds: for every n-gram, the
largest probability any longer left context could give it — the bound that exact decoding
in high-order HMMs needs (:doc:`sys_06_exact_highorder`).

**Papers.** Chen & Goodman (1999) for modified Kneser–Ney; Carter, Dymetman & Bouchard
(2012), eq. 2–8 and §2.3, for MAX-ARPA. Peers: KenLM (Heafield 2011) for reading and
scoring, lmplz for estimation.
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
# Measured
# --------
# PTB (Mikolov's 10k-vocabulary version): loading, scoring and estimating the 5-gram
# against KenLM and lmplz (ratio = varorder ÷ peer).
#
# .. varorder-results:: n-gram LMs
#    :systems: read_arpa; open_binary; score; lm train

# %%
# Limits
# ------
# * Orders up to 10 (log-linear models up to 32).
# * Scoring one sentence from the command line on an *ARPA* file is about 15 % slower than
#   KenLM's module (the ARPA parse dominates); use the binary model (0.13 s per process).
# * Reading an ARPA file takes 4.5× KenLM's resident memory (+219 MB against +49 MB for the
#   PTB 5-gram).
# * lmplz could not be built on the measuring machine: its figures are the issue's.
