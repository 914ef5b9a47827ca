"""
Decipherment by EM
==================

**Problem.** A text was enciphered by a 1:1 word substitution (each plaintext word became
an arbitrary symbol). From the cipher text and unrelated plaintext of the same language,
learn which symbol stands for which word: EM over a hidden-Markov model whose hidden
chain is a plaintext language model and whose emissions are the unknown substitution
table. With a second-order plaintext model exact inference is too expensive; beam search
and RCMS approximate the E-step.

**Paper.** Steinhardt & Liang (2015), *Reified Context Models* (ICML), §6 and Fig. 5–6:
RCMS E-steps learn where beam search barely does; App. B for the smoothing.
"""

# %%
# Python
# ------
# A toy language with a 25-word list; 300 enciphered sentences, a plaintext LM from the
# rest; five EM iterations with RCMS (10 contexts per position) and with beam search (10).
import tempfile
from pathlib import Path
from subprocess import PIPE, STDOUT, run

import numpy as np

from varorder.decipher import Decipherer, prepare

rng = np.random.default_rng(0)
nouns = ["dog", "cat", "man", "woman", "house", "ball", "tree", "car", "book", "bird"]
verbs = ["sees", "likes", "finds", "wants", "takes", "makes"]
adjectives = ["big", "small", "old", "new", "red", "good"]
determiners = ["the", "a", "my", "this"]
sentences = []
for _ in range(3000):
    s = (
        [str(rng.choice(determiners))]
        + [str(rng.choice(adjectives))] * int(rng.integers(0, 2))
        + [
            str(rng.choice(nouns)),
            str(rng.choice(verbs)),
            str(rng.choice(determiners)),
            str(rng.choice(nouns)),
        ]
    )
    if rng.random() < 0.3:
        s += ["and", str(rng.choice(verbs)), "it"]
    sentences.append(s)

data = prepare(sentences, num_words=25, num_cipher=300, seed=0)
for inference in ("rcms", "beam"):
    model = Decipherer(order=2, inference=inference, size=10, n_iter=5).fit(data)
    accuracy = [round(h["accuracy"], 3) for h in model.history_ if "accuracy" in h]
    print(f"{inference}(10): mapping accuracy per iteration {accuracy}")

# %%
# Command line
# ------------
# ``prepare`` writes a task folder (word list, plaintext, cipher text, key); ``train`` runs
# EM and writes the model, the table and the history; ``eval`` scores the mapping.
work = Path(tempfile.mkdtemp(prefix="varorder-decipher-"))
(work / "corpus.txt").write_text("".join(" ".join(s) + " .\n\n" for s in sentences))
commands = """
varorder decipher prepare corpus.txt -o task --num-words 25 --num-cipher 300
varorder decipher train task -o run --order 2 --inference rcms --size 10 --iterations 5
varorder decipher eval task run/model.npz
"""
shell = run(["bash", "-exc", commands], cwd=work, stdout=PIPE, stderr=STDOUT, text=True)
print(shell.stdout)
shell.check_returncode()  # a failing command stops the script

# %%
# Measured
# --------
# War and Peace and Brown, 500-word lists, 1,750 in-list cipher sentences (the paper had
# 2,000 from Gigaword): mapping accuracy, higher is better.
#
# .. varorder-results:: Decipherment

# %%
# Limits
# ------
# * The paper's claim that every second-order model beats every first-order one does not
#   hold for beam search here (2nd-order beam-60 stays below exact 1st-order EM).
# * RCMS-60 costs 30–65 CPU seconds per EM iteration on 1,750 sentences; the runs stopped at
#   8–10 iterations.
