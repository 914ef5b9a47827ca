"""Compile the package's Numba kernels ahead of first use.

``pip install .`` runs this on the freshly built package (see ``setup.py``): every
public operation and CLI command is exercised once on tiny generated data, so the
kernels' machine code lands in the package's ``__pycache__`` folders (Numba's cache is
keyed by the source file's content hash, the Numba version and the CPU, so it stays
valid once the files are installed). A user's first call then loads compiled code
instead of spending tens of seconds in LLVM. A step that fails is reported and skipped:
the kernels it would have compiled are simply compiled on first use, as without this.

An editable install (``pip install -e .``) runs it too, on the source tree: the caches land
in ``src/varorder``'s ``__pycache__`` folders, which the installed package is, and survive
later installs. A stamp (``__pycache__/warmup-stamp.json`` beside this file) records what was
compiled: the hash of every source file, the Numba and Python versions and the CPU. While it
matches, :func:`warm` does nothing, so a second install (``.[docs]`` after ``.[test]``) or a
docs build costs a second, not minutes; after a source change it runs again and compiles
only what the change made stale.

``python -m varorder._warmup [--part I/N]`` runs the steps (or every N-th, from I) in
this process; ``--jobs N`` runs them in N processes and records the stamp when all passed,
``--if-cold`` first checks the stamp; ``--list`` names the steps.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from pathlib import Path

STEPS = []


def step(function):
    STEPS.append(function)
    return function


def _cli(*args):
    from click.testing import CliRunner

    from varorder.cli.main import main

    result = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=True)
    if result.exit_code != 0:
        raise RuntimeError(f"varorder {' '.join(map(str, args))} exited {result.exit_code}: "
                           f"{result.output[-400:]} {result.exception!r}")
    return result.output


def _tagged_corpus(path: Path, n: int, seed: int):
    import numpy as np

    rng = np.random.default_rng(seed)
    lexicon = {"the": "DET", "a": "DET", "dog": "NOUN", "cat": "NOUN", "runs": "VERB", "eats": "VERB", "big": "ADJ"}
    words = list(lexicon)
    lines = []
    for s in range(n):
        sentence = list(rng.choice(words, size=int(rng.integers(2, 7))))
        lines.append(f"# sent_id = {s}")
        lines += [f"{i}\t{w}\t{w}\t{lexicon[w]}\t_\t_\t0\tdep\t_\t_" for i, w in enumerate(sentence, 1)]
        lines.append("")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


@step
def engine_chain(tmp: Path):
    import numpy as np

    from varorder import chain

    rng = np.random.default_rng(0)
    for B in (1, 64):
        E, T = rng.normal(size=(B, 5, 3)), rng.normal(size=(3, 3))
        per_sequence = rng.normal(size=(B, 3, 3))
        for transitions in (T, per_sequence):
            chain.log_partition(E, transitions)
            chain.viterbi(E, transitions)
            for edges in (False, "sum", True):
                chain.marginals(E, transitions, edges=edges, return_log_z=True)
            chain.sample(E, transitions, n=2, seed=0)
            chain.kbest(E, transitions, k=2)
            chain.entropy(E, transitions)
            chain.forward(E, transitions, semiring="max")
            chain.forward(E, transitions, semiring="log")


@step
def engine_lattice(tmp: Path):
    import numpy as np

    from varorder import lattice

    rng = np.random.default_rng(0)
    lat = lattice.Lattice.from_chain(rng.normal(size=(4, 3)), rng.normal(size=(3, 3)))
    lattice.log_partition(lat)
    lattice.viterbi(lat)
    lattice.marginals(lat)
    lattice.marginals(lat, with_final=True)
    lattice.sample(lat, n=2, seed=0)
    lattice.kbest(lat, 2)
    lattice.entropy(lat)
    lattice.alphas(lat, "max")
    lattice.betas(lat)


@step
def hidden_semi_markov(tmp: Path):
    import numpy as np

    from varorder.models.hsmm import GaussianHSMM, PoissonHSMM

    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 2))
    for distribution in ("nonparametric", "poisson", "negative_binomial"):
        model = GaussianHSMM(n_components=2, max_duration=6, duration_distribution=distribution, n_iter=2,
                             random_state=0).fit(X, [40, 20])
    # score, decode, k-best and sampling run the generic recursion (kernels made per process, not cached);
    # the cached helpers they call, compiled here:
    from varorder.engine import semimarkov

    semimarkov._argmax(np.zeros(3), 3)
    semimarkov._finish_occupancy(np.zeros((2, 2)), 2)
    PoissonHSMM(n_components=2, max_duration=5, n_iter=2, random_state=0).fit(rng.poisson(3.0, (30, 1)))


@step
def demo_engine(tmp: Path):
    _cli("demo", "--engine", "--samples", "100")


@step
def tagging(tmp: Path):
    train, dev = tmp / "train.conllu", tmp / "dev.conllu"
    _tagged_corpus(train, 40, 0)
    _tagged_corpus(dev, 10, 1)
    for model in ("crf", "memm", "hmm", "crf2"):  # crf2: the sparse-move chain (engine.chain_sparse)
        path = tmp / f"{model}.npz"
        _cli("tag", "train", train, "-o", path, "--model", model,
             *([] if model == "hmm" else ["--max-iterations", "3"]), "--quiet")
        _cli("tag", "predict", path, dev, "-o", tmp / f"{model}.out.conllu")
        _cli("tag", "eval", path, dev)


@step
def semi_markov_crf(tmp: Path):
    from varorder.models.semicrf import SemiMarkovCRF

    X = [["Anna", "Smith", "saw", "Oslo"], ["Ola", "ran"], ["Oslo", "is", "far"]] * 4
    y = [["B-PER", "I-PER", "O", "B-LOC"], ["B-PER", "O"], ["B-LOC", "O", "O"]] * 4
    model = SemiMarkovCRF(max_iterations=3).fit(X, y)  # the flat semi-Markov marginals (engine.semimarkov_flat)
    model.predict(X)
    model.predict_kbest(X[:2], 2)
    model.predict_marginals(X[:2])


@step
def hmm_series(tmp: Path):
    # the hmmlearn-style models and `varorder hmm` (continuous and count emissions, GMMs, every covariance
    # type, with and without NaN entries): densities, the E-step (chain.statistics), scores, filtered
    # (chain.filtered, dense and structured matrices) and fixed-lag posteriors, Viterbi, k-best, path samples
    import numpy as np

    from varorder import chain
    from varorder.models.count_hmm import CategoricalHMM, PoissonHMM
    from varorder.models.gaussian_hmm import GaussianHMM
    from varorder.models.gmm_hmm import GMMHMM

    rng = np.random.default_rng(0)
    X = np.concatenate([rng.normal(0, 1, (30, 2)), rng.normal(4, 1, (30, 2))])
    holes = X.copy()
    holes[::7, 1] = np.nan
    lengths = [35, 25]
    for covariance_type in ("spherical", "diag", "full", "tied"):
        for data in (X, holes):
            for model in (GaussianHMM(n_components=2, covariance_type=covariance_type, n_iter=2, random_state=0),
                          GMMHMM(n_components=2, n_mix=2, covariance_type=covariance_type, n_iter=2, random_state=0)):
                model.fit(data, lengths)
                model.score(data, lengths)
                model.score_samples(data, lengths)
                model.predict_proba(data, lengths, filtered=True)
                model.predict_proba(data, lengths, lag=2)
                model.decode(data, lengths)
    model.transmat_ = np.array([[0.9, 0.1], [0.0, 1.0]])  # left-right: the filter's log-space path
    model.predict_proba(X, lengths, filtered=True)
    model.kbest_paths(X, lengths, k=2)
    model.sample_paths(X, lengths, n=2, random_state=0)
    model.sample(5, random_state=0)
    counts = rng.poisson(3.0, (60, 2))
    PoissonHMM(n_components=2, n_iter=2, random_state=0).fit(counts, lengths).predict_proba(counts, filtered=True)
    CategoricalHMM(n_components=2, n_iter=2, random_state=0).fit(counts[:, :1] % 3, lengths).decode(counts[:, :1] % 3)
    E = rng.normal(size=(60, 3))
    T = rng.normal(size=(3, 3))
    chain.statistics(E, lengths, T, features=E, node=True)
    chain.flat_log_partition(E, lengths, T)
    chain.filtered(E, lengths, T)
    series = tmp / "series.csv"
    series.write_text("id,a,b\n" + "".join(f"{i // 30},{float(a)!r},{'' if i % 9 == 0 else repr(float(b))}\n"
                                           for i, (a, b) in enumerate(X)))
    for kind in ("gaussian", "gmm"):
        path = tmp / f"{kind}.npz"
        _cli("hmm", "train", series, "-o", path, "--model", kind, "--n-iter", "2", "--sequence-column", "id")
        _cli("hmm", "decode", path, series, "--sequence-column", "id", "--probabilities")
        _cli("hmm", "decode", path, series, "--sequence-column", "id", "--filtered")
        _cli("hmm", "score", path, series, "--sequence-column", "id")
        _cli("hmm", "sample", path, "-n", "5")


@step
def samplerank_tagging(tmp: Path):
    train = tmp / "train.conllu"
    _tagged_corpus(train, 30, 0)
    for extra in ([], ["--skip-factors", "--second-order"]):
        path = tmp / f"sr{len(extra)}.npz"
        _cli("tag", "train", train, "-o", path, "--learner", "samplerank", "--epochs", "1", "--quiet", *extra)
        _cli("tag", "predict", path, train, "-o", tmp / f"sr{len(extra)}.conllu")


@step
def language_models(tmp: Path):
    corpus = tmp / "lm.txt"
    corpus.write_text("the dog runs\nthe cat eats\na big dog eats\na cat runs\nthe big cat\n" * 4)
    for method in ("kneser-ney", "absolute", "additive"):
        arpa = tmp / f"{method}.arpa"
        fallback = ["--discount-fallback"] if method == "kneser-ney" else []
        _cli("lm", "train", corpus, "-n", "3", "--method", method, *fallback, "-o", arpa)
        _cli("lm", "score", arpa, corpus)
    _cli("lm", "build-binary", tmp / "kneser-ney.arpa", tmp / "kn.bin")
    _cli("lm", "score", tmp / "kn.bin", corpus)
    _cli("lm", "maxarpa", tmp / "kneser-ney.arpa", tmp / "max.arpa")
    # mixing with a tuned weight (EM on held-out text) and entropy pruning with an evaluation
    held = tmp / "held.txt"
    held.write_text("the dog eats\na big cat runs\n")
    _cli("lm", "mix", tmp / "kneser-ney.arpa", tmp / "absolute.arpa", "--tune", held, "-o", tmp / "mixed.arpa")
    _cli("lm", "prune", tmp / "kneser-ney.arpa", tmp / "pruned.arpa", "--threshold", "1e-5", "--eval", held)
    import varorder.lm.kenlm as kenlm  # the kenlm-compatible API's stateful query kernel

    model, state, out = kenlm.Model(tmp / "kn.bin"), kenlm.State(), kenlm.State()
    model.BeginSentenceWrite(state)
    model.BaseScore(state, "the", out)
    # Counting in blocks merges the blocks' tables (a corpus this small is one block on the CLI).
    from varorder.lm.counting import count_corpus

    count_corpus(corpus, 3, block_tokens=8)


@step
def exact_decoding(tmp: Path):
    corpus = tmp / "words.txt"
    corpus.write_text("the dog barked\nthe fog lifted\ntwo dogs barked\nthe dog ate\na fog came\n" * 3)
    arpa = tmp / "words.arpa"
    _cli("lm", "train", corpus, "-n", "4", "--discount-fallback", "-o", arpa)
    _cli("decode", arpa, "--task", "t9", "--text", "843 364 227533")
    _cli("sample", arpa, "--task", "t9", "--text", "843 364", "--samples", "5", "--seed", "0")
    tags = tmp / "tags.txt"
    tags.write_text("DT NN VB\nDT JJ NN VB\nDT NN NN VB\n" * 3)
    tag_arpa = tmp / "tags.arpa"
    _cli("lm", "train", tags, "-n", "3", "--discount-fallback", "-o", tag_arpa)
    train = tmp / "train.tsv"
    train.write_text("the\tDT\ndog\tNN\nruns\tVB\n\na\tDT\nbig\tJJ\ncat\tNN\neats\tVB\n\n" * 3)
    _cli("decode", tag_arpa, "--task", "pos", "--train", train, "--text", "the big dog eats")
    _cli("sample", tag_arpa, "--task", "pos", "--train", train, "--text", "the dog eats", "--target-ar", "0.5",
         "--seed", "0")


@step
def exact_decoding_unbounded(tmp: Path):
    import numpy as np

    from varorder.exact import HighOrderTarget, decode, sample
    from varorder.lm.suffix_index import build_index, open_index
    from varorder.lm.unbounded import WittenBell

    corpus = tmp / "unbounded.txt"
    corpus.write_text("the old dog likes a good bone\nthe old man wants a good book\nmy dog finds a ball\n" * 5)
    model = WittenBell(build_index(corpus, tmp / "unbounded.idx"))
    # the bounded build's kernels (shard repair, k-way merge) and the verifying open
    build_index(corpus, tmp / "bounded.idx", memory=1 << 20, shard_tokens=7, overlap=0)
    open_index(tmp / "bounded.idx")
    _cli("lm", "index", corpus, "-o", tmp / "cli-bounded.idx", "-S", "1M")
    vocab = model.vocabulary
    candidates = [(np.asarray([vocab.id_of(w) for w in options]), np.zeros(len(options)))
                  for options in (["the", "my"], ["old", "dog"], ["dog", "man"], ["likes", "wants"])]
    target = HighOrderTarget(model, candidates)
    decode(target)
    sample(target, n_samples=2, batch=4, seed=0)


@step
def constrained_lm(tmp: Path):
    from varorder.constrain import ConstrainedLM
    from varorder.lm import AdditiveSmoothing

    lm = AdditiveSmoothing(order=2, alpha=0.5).fit_sentences(["the dog runs", "a cat eats", "the cat runs"]).model_
    model = ConstrainedLM.from_spec(lm, contains=["cat"], min_length=2, max_length=4)
    model.sample(3, seed=0)
    model.sample_array(2, seed=None)
    model.decode()
    model.next_logprobs(["the"])


@step
def alignment(tmp: Path):
    import numpy as np

    rng = np.random.default_rng(0)
    english = [f"e{i}" for i in range(12)]
    pairs = []
    for _ in range(60):
        n = int(rng.integers(2, 7))
        e = list(rng.choice(english, size=n))
        f = ["f" + w[1:] for w in e]
        rng.shuffle(f)
        pairs.append((e, f))
    (tmp / "c.e").write_text("".join(" ".join(e) + "\n" for e, _ in pairs))
    (tmp / "c.f").write_text("".join(" ".join(f) + "\n" for _, f in pairs))
    _cli("align", "train", tmp / "c.e", tmp / "c.f", "-o", tmp / "m.npz", "--iterations", "2", "--ibm1-iterations", "2")
    _cli("align", "apply", tmp / "m.npz", tmp / "c.e", tmp / "c.f", "-o", tmp / "out.align")
    from varorder.agree.aligner import WordAligner

    WordAligner(training="agreement", iterations=2).fit(pairs).align(pairs[:1])


@step
def reified_contexts(tmp: Path):
    _cli("demo", "--epochs", "1", "--max-train-words", "10", "--out", tmp / "demo")


@step
def grammar_induction(tmp: Path):
    train = tmp / "train.conllu"
    lines = []
    for s, words in enumerate([["the", "dog", "runs"], ["a", "big", "cat", "eats", "."], ["the", "cat", "runs"]] * 4):
        tags = {"the": "DET", "a": "DET", "big": "ADJ", "dog": "NOUN", "cat": "NOUN", "runs": "VERB", "eats": "VERB",
                ".": "PUNCT"}
        verb = next(i for i, w in enumerate(words, 1) if tags[w] == "VERB")
        lines.append(f"# sent_id = {s}")
        lines += [f"{i}\t{w}\t{w}\t{tags[w]}\t_\t_\t{0 if i == verb else verb}\tdep\t_\t_"
                  for i, w in enumerate(words, 1)]
        lines.append("")
    train.write_text("\n".join(lines) + "\n")
    for model in ("product", "dmv", "ccm"):
        path = tmp / f"{model}.npz"
        _cli("induce", "train", train, "-o", path, "--model", model, "--iterations", "2", "--quiet")
        _cli("induce", "parse", path, train, "--trees", tmp / f"{model}.trees")
        _cli("induce", "eval", path, train)


@step
def decipherment(tmp: Path):
    import numpy as np

    rng = np.random.default_rng(0)
    words = ["the", "a", "dog", "cat", "runs", "eats", "big", "red"]
    corpus = tmp / "corpus.txt"
    corpus.write_text("\n\n".join(" ".join(rng.choice(words, size=int(rng.integers(3, 7)))) + "." for _ in range(200)))
    _cli("decipher", "prepare", corpus, "-o", tmp / "task", "--num-words", "6", "--num-cipher", "20", "--seed", "1")
    for order, inference in ((1, "exact"), (2, "rcms"), (2, "beam")):
        run = tmp / f"run{order}{inference}"
        args = ["--order", order, "--inference", inference, "--iterations", "1"]
        if inference != "exact":
            args += ["--size", "4"]
        _cli("decipher", "train", tmp / "task", "-o", run, *args)
    _cli("decipher", "eval", tmp / "task", tmp / "run2rcms" / "model.npz")


@step
def loglinear_language_model(tmp: Path):
    corpus = tmp / "text.txt"
    corpus.write_text("the cat sat on the mat\nthe dog sat\na cat ran\nthe dog ran on the mat\n" * 5)
    for optimizer in ("apg", "adagrad"):
        for penalty in ("wlt2", "wltinf", "l1", "l2sq"):
            path = tmp / f"{optimizer}-{penalty}.npz"
            _cli("lm", "train", corpus, "-n", "3", "-o", path, "--model", "loglinear", "--penalty", penalty,
                 "--epochs", "1", "--optimizer", optimizer)
    _cli("lm", "score", tmp / "apg-wlt2.npz", corpus)


@step
def strings_inference(tmp: Path):
    # pep-prox reaches the Numba tree-ℓ2 prox of varorder.loglinear.prox
    _cli("strings", "infer", "--synthetic", "4", "--alphabet-size", "3", "--method", "pep-prox",
         "--iterations", "2", "--inner-passes", "1", "--max-variables", "1")


@step
def transduce(tmp: Path):
    pairs = tmp / "pairs.tsv"
    pairs.write_text("".join(f"{x}\t{y}\n" for x, y in [("K AE T", "cat"), ("D AO G", "dog"), ("AE T", "at")] * 2))
    for method in ("rcms", "hybrid", "forced"):
        model = tmp / f"{method}.npz"
        _cli("transduce", "train", pairs, "-o", model, "--method", method, "--size", "2", "--epochs", "1",
             "--hash-bits", "12")
    _cli("transduce", "apply", tmp / "rcms.npz", pairs, "-o", tmp / "out.tsv")
    _cli("transduce", "eval", tmp / "forced.npz", pairs)


@step
def arpa_not_closed(tmp: Path):
    # A trigram whose bigram prefix is not listed (as SRILM's pruning leaves them): the ARPA
    # reader's general compiled path, which the closed-model path hands such files to.
    arpa = tmp / "open.arpa"
    arpa.write_text("\\data\\\nngram 1=4\nngram 2=1\nngram 3=1\n\n\\1-grams:\n-1\t<unk>\t0\n-99\t<s>\t-0.3\n"
                    "-0.5\t</s>\t0\n-0.4\ta\t-0.2\n\n\\2-grams:\n-0.3\t<s> a\t0\n\n\\3-grams:\n"
                    "-0.2\ta a </s>\n\n\\end\\\n")
    text = tmp / "open.txt"
    text.write_text("a a\n")
    _cli("lm", "score", arpa, text)


@step
def scoring_from_strings(tmp: Path):
    # NgramLM.score_sentences: the compiled sentence encoder (varorder.lm._encode) and the
    # pipelined scorer (varorder.lm._kernels.score_flat), which small CLI inputs skip.
    from varorder.lm import _kernels  # noqa: F401  (loaded: the compiled scorer serves every input)
    from varorder.lm import ModifiedKneserNey

    text = ["the dog runs", "the cat eats", "a big dog eats", "a cat runs", "the big cat"] * 4
    model = ModifiedKneserNey(order=3).fit_sentences(text).model_
    model.score_sentences(text + ["an unknown wörd", ""])


def run(part: int = 0, parts: int = 1, verbose: bool = True) -> list[str]:
    """Run every ``parts``-th step from ``part``; return the names of failed steps."""
    warnings.simplefilter("ignore")
    failed = []
    with tempfile.TemporaryDirectory(prefix="varorder-warmup-") as folder:
        for index, function in enumerate(STEPS):
            if index % parts != part:
                continue
            tmp = Path(folder) / function.__name__
            tmp.mkdir()
            start = time.perf_counter()
            try:
                function(tmp)
                status = "ok"
            except Exception:  # a failed step only means compiling on first use instead
                failed.append(function.__name__)
                status = "FAILED\n" + traceback.format_exc(limit=3)
            if verbose:
                print(f"varorder warm-up: {function.__name__}: {status} ({time.perf_counter() - start:.1f} s)",
                      file=sys.stderr, flush=True)
    return failed


PACKAGE = Path(__file__).resolve().parent


def _stamp_path(package: Path) -> Path:
    return package / "__pycache__" / "warmup-stamp.json"


def _say(message: str) -> None:
    print(f"varorder warm-up: {message}", file=sys.stderr, flush=True)


def source_stamp(package: Path = PACKAGE) -> dict:
    """What the package's Numba caches are valid for: the content of every source file (Numba keys a
    kernel by its own file's content only, so any change counts), Numba's and Python's versions and the
    CPU (Numba keys entries by CPU model)."""
    import llvmlite.binding
    import numba

    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return {"sources": digest.hexdigest(), "numba": numba.__version__, "python": sys.implementation.cache_tag,
            "machine": platform.machine(), "cpu": llvmlite.binding.get_host_cpu_name()}


def is_warm(package: Path = PACKAGE) -> bool:
    """Whether the last warm-up of ``package`` passed every step for its present sources, Numba and CPU."""
    try:
        recorded = json.loads(_stamp_path(package).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return recorded == source_stamp(package)


def warm(jobs: int = 2, if_cold: bool = True, package: Path = PACKAGE) -> list[str]:
    """Run every step in ``jobs`` fresh processes (each on one thread: the two halves of a 2-core
    machine), announcing the start and the time taken on stderr; record the stamp when every step
    passed. With ``if_cold``, do nothing while the stamp matches. Returns the failed steps."""
    if if_cold and is_warm(package):
        _say(f"the kernels are already compiled for these sources ({package / '__pycache__'}): nothing to do")
        return []
    _say(f"compiling the Numba kernels into {package}'s __pycache__ folders ({jobs} processes; about "
         "2.5 min on a quiet 2-core machine, over 10 min on a busy one; later calls load them) ...")
    began = time.perf_counter()
    root = str(package.parent)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p),
               NUMBA_NUM_THREADS="1", VARORDER_THREADS="1", MPLBACKEND="Agg")
    command = [sys.executable, "-m", "varorder._warmup", "--part"]
    try:
        workers = [subprocess.Popen(command + [f"{i}/{jobs}"], env=env, cwd=root) for i in range(jobs)]
    except OSError as exc:
        _say(f"skipped ({exc}); the kernels compile on first use")
        return ["all"]
    failed = [f"part {i + 1} of {jobs}" for i, worker in enumerate(workers) if worker.wait() != 0]
    if not failed:
        stamp = _stamp_path(package)
        stamp.parent.mkdir(exist_ok=True)
        stamp.write_text(json.dumps(source_stamp(package), indent=1) + "\n", encoding="utf-8")
    outcome = "done" if not failed else "done, some steps failed (their kernels compile on first use)"
    _say(f"{outcome} in {time.perf_counter() - began:.0f} s")
    return failed


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if "--list" in argv:
        print("\n".join(f.__name__ for f in STEPS))
        return 0
    if "--jobs" in argv:
        return 1 if warm(int(argv[argv.index("--jobs") + 1]), if_cold="--if-cold" in argv) else 0
    part, parts = 0, 1
    if "--part" in argv:
        part, parts = (int(x) for x in argv[argv.index("--part") + 1].split("/"))
    os.environ.setdefault("VARORDER_THREADS", "auto")
    # small inputs run the serial twins of engine.threads.parallel_kernel: compile the parallel ones too
    os.environ.setdefault("VARORDER_COMPILE_TWINS", "1")
    return 1 if run(part, parts) else 0


if __name__ == "__main__":
    sys.exit(main())
