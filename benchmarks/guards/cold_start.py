"""Cold start: a fresh virtualenv, the README's install, then each first call timed in
its own new process (issue #19: every first call <= 5 s, `varorder --help` <= 0.3 s).

    python benchmarks/guards/cold_start.py                 # install as the README does, then time
    python benchmarks/guards/cold_start.py --no-warmup     # the same install without compiled kernels
    python benchmarks/guards/cold_start.py --venv DIR      # time an existing install (skip installing)

Prints one row per first call: wall seconds, CPU seconds of the process (user + sys,
children included) and the 1-minute load average when it started.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared harness
import harness  # noqa: E402

ROOT = harness.ROOT

PY_CALLS = {
    "import varorder.chain": "import varorder.chain",
    "chain.log_partition": "chain.log_partition(E, T)",
    "chain.viterbi": "chain.viterbi(E, T)",
    "chain.marginals": "chain.marginals(E, T)",
    "chain.marginals(edges='sum')": "chain.marginals(E, T, edges='sum')",
    "chain.sample": "chain.sample(E, T, n=3, seed=0)",
    "chain.kbest": "chain.kbest(E, T, k=3)",
    "chain.entropy": "chain.entropy(E, T)",
    "lattice.log_partition + marginals": "lat = lattice.Lattice.from_chain(E[0], T); lattice.log_partition(lat); lattice.marginals(lat)",
    "lattice.sample": "lattice.sample(lattice.Lattice.from_chain(E[0], T), n=3, seed=0)",
}
PRELUDE = "import numpy as np\nfrom varorder import chain, lattice\nE = np.random.default_rng(0).normal(size=(64, 20, 8)); T = np.zeros((8, 8))\n"


def _write_data(folder: Path) -> dict[str, Path]:
    corpus = folder / "lm.txt"
    corpus.write_text("the dog barked\nthe fog lifted\ntwo dogs barked\nthe dog ate\na fog came\n" * 5)
    conllu = folder / "train.conllu"
    lexicon = {"the": "DET", "dog": "NOUN", "runs": "VERB", "a": "DET", "cat": "NOUN", "eats": "VERB"}
    sentences = [["the", "dog", "runs"], ["a", "cat", "eats"], ["the", "cat", "runs"], ["a", "dog", "eats"]] * 10
    lines = []
    for s in sentences:
        lines += [f"{i}\t{w}\t{w}\t{lexicon[w]}\t_\t_\t0\tdep\t_\t_" for i, w in enumerate(s, 1)] + [""]
    conllu.write_text("\n".join(lines) + "\n")
    english, french = folder / "c.e", folder / "c.f"
    english.write_text("the dog runs\na cat eats\nthe cat runs\na dog eats\n" * 10)
    french.write_text("le chien court\nun chat mange\nle chat court\nun chien mange\n" * 10)
    pairs = folder / "g2p.tsv"
    pairs.write_text("".join(f"{x}\t{y}\n" for x, y in [("K AE T", "cat"), ("D AO G", "dog"), ("AE T", "at")] * 4))
    plain = folder / "plain.txt"
    plain.write_text("\n".join(["the dog runs .", "a cat eats .", "the big cat runs .", "a red dog eats ."] * 50) + "\n")
    return {"corpus": corpus, "conllu": conllu, "e": english, "f": french, "pairs": pairs, "plain": plain}


def _cli_calls(data: dict[str, Path], folder: Path) -> dict[str, list[str]]:
    arpa = folder / "model.arpa"
    return {
        "varorder --help": ["--help"],
        "varorder --version": ["--version"],
        "varorder lm train": ["lm", "train", str(data["corpus"]), "-n", "4", "--discount-fallback", "-o", str(arpa)],
        "varorder lm score": ["lm", "score", str(arpa), str(data["corpus"])],
        "varorder decode (t9)": ["decode", str(arpa), "--task", "t9", "--text", "843 364 227533"],
        "varorder sample (t9)": ["sample", str(arpa), "--task", "t9", "--text", "843 364", "--samples", "5"],
        "varorder tag train (crf)": ["tag", "train", str(data["conllu"]), "-o", str(folder / "crf.npz"),
                                     "--max-iterations", "5", "--quiet"],
        "varorder tag predict": ["tag", "predict", str(folder / "crf.npz"), str(data["conllu"]),
                                 "-o", str(folder / "out.conllu")],
        "varorder align train": ["align", "train", str(data["e"]), str(data["f"]), "-o", str(folder / "a.npz"),
                                 "--iterations", "2", "--ibm1-iterations", "2"],
        "varorder demo --engine": ["demo", "--engine", "--samples", "1000"],
        "varorder lm train --model loglinear": ["lm", "train", str(data["corpus"]), "-n", "3", "--model", "loglinear",
                                                "--epochs", "1", "-o", str(folder / "ll.npz")],
        "varorder tag train (samplerank)": ["tag", "train", str(data["conllu"]), "-o", str(folder / "sr.npz"),
                                            "--learner", "samplerank", "--quiet"],
        "varorder induce train (product)": ["induce", "train", str(data["conllu"]), "-o", str(folder / "ind.npz"),
                                            "--iterations", "2", "--quiet"],
        "varorder decipher prepare": ["decipher", "prepare", str(data["plain"]), "-o", str(folder / "task"),
                                      "--num-words", "6", "--num-cipher", "20", "--seed", "1"],
        "varorder decipher train (2nd order rcms)": ["decipher", "train", str(folder / "task"), "-o",
                                                     str(folder / "run"), "--order", "2", "--inference", "rcms",
                                                     "--size", "4", "--iterations", "1"],
        "varorder transduce train (rcms)": ["transduce", "train", str(data["pairs"]), "-o", str(folder / "t.npz"),
                                            "--size", "2", "--epochs", "1", "--hash-bits", "12"],
        "varorder transduce eval": ["transduce", "eval", str(folder / "t.npz"), str(data["pairs"])],
        "varorder strings infer (pep)": ["strings", "infer", "--synthetic", "10", "--alphabet-size", "4",
                                         "--method", "pep", "--iterations", "2"],
    }


def _timed(command: list[str], env: dict) -> tuple[float, float, float, int]:
    load = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    rc = subprocess.run(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, load, rc


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--venv", type=Path, help="time this existing virtualenv instead of installing one")
    parser.add_argument("--no-warmup", action="store_true", help="install with VARORDER_NO_WARMUP=1")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="varorder-cold-"))
    venv = args.venv
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    if venv is None:
        venv = work / "venv"
        install_env = dict(env, **({"VARORDER_NO_WARMUP": "1"} if args.no_warmup else {}))
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        wall, cpu, load, rc = _timed([str(venv / "bin" / "pip"), "install", "-q", str(ROOT)], install_env)
        print(f"{'pip install .':40s} wall {wall:7.2f} s  cpu {cpu:7.2f} s  load {load:5.2f}  rc {rc}")
    python, varorder = str(venv / "bin" / "python"), str(venv / "bin" / "varorder")
    data = _write_data(work)
    print(f"{'first call (fresh process each)':40s} {'wall':>9s}    {'cpu':>9s}    load")
    for name, code in PY_CALLS.items():
        wall, cpu, load, rc = _timed([python, "-c", PRELUDE + code], dict(env))
        print(f"{name:40s} {wall:7.2f} s  {cpu:7.2f} s  {load:5.2f}{'' if rc == 0 else f'  FAILED rc={rc}'}")
    for name, cli_args in _cli_calls(data, work).items():
        wall, cpu, load, rc = _timed([varorder, *cli_args], dict(env, MPLBACKEND="Agg"))
        print(f"{name:40s} {wall:7.2f} s  {cpu:7.2f} s  {load:5.2f}{'' if rc == 0 else f'  FAILED rc={rc}'}")


if __name__ == "__main__":
    main()
