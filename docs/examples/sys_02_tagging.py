"""
Sequence tagging: CRF, MEMM and HMM
===================================

**Problem.** Label every token of a sentence (part-of-speech tags, OCR letters, ...) with a
model trained on labelled sentences. :class:`~varorder.models.crf.CRF` is a linear-chain
conditional random field trained by L-BFGS / OWL-QN (ℓ1 + ℓ2) or AdaGrad/SGD;
:class:`~varorder.models.memm.MEMM` the maximum-entropy Markov model and
:class:`~varorder.models.hmm.HMM` the discrete HMM (supervised or Baum–Welch). All three
follow scikit-learn's estimator conventions and infer through the one DP engine.

**Papers.** Lafferty, McCallum & Pereira (2001), *Conditional Random Fields*; McCallum,
Freitag & Pereira (2000), *MEMMs*; the objective and features of CRFsuite (Okazaki 2007).
"""

# %%
# Python
# ------
# Tokens are dicts of features; :func:`~varorder.models.features.pos_features` makes the
# CRFsuite tutorial's features from words.
from varorder.models.crf import CRF
from varorder.models.features import pos_features
from varorder.models.hmm import HMM

sentences = [
    ("the dog barks", "DET NOUN VERB"),
    ("a cat sleeps", "DET NOUN VERB"),
    ("the old dog sleeps", "DET ADJ NOUN VERB"),
    ("a small cat barks", "DET ADJ NOUN VERB"),
    ("dogs bark", "NOUN VERB"),
    ("the cat sees a dog", "DET NOUN VERB DET NOUN"),
] * 3
words = [s.split() for s, _ in sentences]
tags = [t.split() for _, t in sentences]
X = [pos_features(w) for w in words]

crf = CRF(c1=0.1, c2=0.1, max_iterations=50).fit(X, tags)
test = "a small dog sees the cat".split()
print("CRF:", crf.predict([pos_features(test)])[0])
marginals = crf.predict_marginals([pos_features(test)])[0]  # (tokens, classes_)
print("p(NOUN) per token:", marginals[:, crf.classes_.index("NOUN")].round(2))

hmm = HMM(alpha_start=0.1, alpha_transition=0.1, alpha_emission=0.1).fit(words, tags)
print("HMM:", hmm.predict([test])[0])

# %%
# Command line
# ------------
# ``varorder tag train / predict / eval`` read CoNLL-U (or CRFsuite attribute files with
# ``--format crfsuite``). Here a toy CoNLL-U file stands in for a treebank.
import tempfile
from pathlib import Path
from subprocess import PIPE, STDOUT, run

work = Path(tempfile.mkdtemp(prefix="varorder-tagging-"))
with open(work / "toy.conllu", "w") as f:
    for w, t in zip(words, tags):
        for i, (form, tag) in enumerate(zip(w, t), 1):
            f.write(f"{i}\t{form}\t_\t{tag}\t_\t_\t0\t_\t_\t_\n")
        f.write("\n")

commands = """
varorder tag train toy.conllu -o crf.npz --max-iterations 50 --quiet
varorder tag predict crf.npz toy.conllu -o tagged.conllu --probabilities probs.tsv
varorder tag eval crf.npz toy.conllu
"""
shell = run(["bash", "-exc", commands], cwd=work, stdout=PIPE, stderr=STDOUT, text=True)
print(shell.stdout)
shell.check_returncode()  # a failing command stops the script

# %%
# Measured
# --------
# UD English EWT UPOS, the same features and objective as CRFsuite (ratio = varorder ÷
# CRFsuite).
#
# .. varorder-results:: Sequence tagging
#    :systems: CRF

# %%
# Limits
# ------
# * First-order chains; CRF features are sparse indicators or weights per token (no
#   learned representations).
# * Peak memory during training is 1.5× CRFsuite's (dense F × K weight matrix).
# * The HMM has no unknown-word model beyond one shared column for unseen symbols.
