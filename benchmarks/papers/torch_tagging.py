"""The sequence-models lecture's comparison on one neural encoder: local prediction against a
CRF head, on CPU — UD English EWT UPOS and GUM named entities (train → dev).

One encoder (word embeddings + a one-layer BiLSTM) with three heads, trained alike (Adam,
the same seed, the same batches):

* ``softmax`` — independent local prediction p(yₜ | x), decoded greedily (= Viterbi, since
  the factors do not touch);
* ``memm`` — the neural MEMM: p(yₜ | yₜ₋₁, x) from the encoder state and an embedding of the
  previous tag, trained on gold previous tags (teacher forcing); decoded greedily (each
  predicted tag fed to the next step) and by Viterbi over the local distributions (the
  product of the local probabilities maximised exactly on a lattice by the engine);
* ``crf`` — the linear-chain CRF head (:class:`varorder.torch.CRF`): global normalisation,
  exact gradient by the engine's forward–backward, Viterbi decoding.

Named entities (``--task ner``): GUM's flat entities in BIO (:func:`varorder.io.coref.read_ner`:
mentions with a PROPN head, GUM's entity types, outermost spans; 21 tags), the same encoder and
heads, and each head's decoders also under the scheme's constraints (``viterbi+BIO``: the best
*valid* BIO path — the CRF head through ``CRF(constraints="BIO")`` with the trained weights, the
local heads as the best valid path under Σ log p(yₜ | ·)). Scored by :mod:`varorder.eval.ner`
(entity F1, conlleval / seqeval default mode, and strict BIO), with the number of dev sentences
whose decoded tags are not a valid BIO sequence. ``--feature-crf`` adds the feature CRF on the
same split (:class:`varorder.models.crf.CRF`, ``features="ner"``: sklearn-crfsuite's tutorial
word features, c1 = c2 = 0.1, 100 L-BFGS iterations, as ``benchmarks/peers/ner_gum.py``).
``--case`` adds a 4-valued word-shape embedding (lower / Title / UPPER / other) to the word
embedding — an option, reported in rows of its own; the default encoder lower-cases as for POS.

    PYTHONPATH=src python benchmarks/papers/torch_tagging.py                    # the full POS run
    PYTHONPATH=src python benchmarks/papers/torch_tagging.py --train-sentences 2000 --epochs 1   # a smoke run
    PYTHONPATH=src python benchmarks/papers/torch_tagging.py --task ner --epochs 5 --feature-crf \
        --out benchmarks/results/torch-tagging-gum-ner.json                    # the NER run

Reads ``../shared/data/ud-english-ewt`` or ``../shared/data/gum`` (dev is reported; the test
splits are held back), and says so and exits when the folder is absent. Prints one JSON line per
head (dev scores per decoder, train CPU seconds).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import harness  # noqa: E402

sys.path.insert(0, str(harness.SRC))

import numpy as np  # noqa: E402


def data_path(task: str, split: str) -> Path:
    if task == "ner":
        return harness.DATA / "gum" / f"en_gum-ud-{split}.conllu.gz"
    return harness.DATA / "ud-english-ewt" / f"en_ewt-ud-{split}.conllu.gz"


def load(split: str, limit: int | None = None, task: str = "pos"):
    """(words, tags) pairs of a split: UPOS tags (``pos``) or GUM's flat named entities in BIO (``ner``)."""
    from varorder.io import read_conllu
    from varorder.io.coref import read_ner

    if task == "ner":
        sentences, tags = read_ner(data_path(task, split), "BIO")
        return [(s.words, t) for s, t in zip(sentences, tags)][:limit]
    sentences = read_conllu(data_path(task, split))[:limit]
    return [(s.words, s.tags("upos")) for s in sentences]


#: word shapes of the ``case`` option's embedding
CASES = ("lower", "title", "upper", "other")


def word_case(word: str) -> int:
    if word.islower():
        return 0
    if word.istitle():
        return 1
    if word.isupper():
        return 2
    return 3


def build_model(num_words: int, num_tags: int, head: str, dim: int = 64, case: bool = False):
    import torch
    from torch import nn

    from varorder.torch import CRF

    class Tagger(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(num_words, dim, padding_idx=0)
            self.case = nn.Embedding(len(CASES), dim) if case else None
            self.lstm = nn.LSTM(dim, dim, batch_first=True, bidirectional=True)
            self.head = head
            if head == "memm":
                self.previous = nn.Embedding(num_tags + 1, 2 * dim)      # index num_tags = sentence start
            self.out = nn.Linear(2 * dim, num_tags)
            self.crf = CRF(num_tags, batch_first=True) if head == "crf" else None

        def states(self, words):
            """BiLSTM states (B, L, 2·dim); ``words`` is (B, L) word ids, or (B, L, 2) ids and shapes."""
            if words.dim() == 3:
                return self.lstm(self.embed(words[..., 0]) + self.case(words[..., 1]))[0]
            return self.lstm(self.embed(words))[0]

        def local_log_probs(self, h, previous):
            """log p(yₜ | yₜ₋₁ = previous, x): (B, L, K) for previous (B, L), or (B, L, K_prev, K) for all."""
            if previous is None:
                logits = self.out(h.unsqueeze(2) + self.previous.weight[:num_tags].view(1, 1, num_tags, -1))
                return torch.log_softmax(logits, dim=-1)
            return torch.log_softmax(self.out(h + self.previous(previous)), dim=-1)

        def loss(self, words, tags, mask):
            h = self.states(words)
            if self.head == "crf":
                return -self.crf(self.out(h), tags, mask, reduction="token_mean")
            if self.head == "softmax":
                logp = torch.log_softmax(self.out(h), dim=-1)
            else:
                previous = torch.cat([torch.full_like(tags[:, :1], num_tags), tags[:, :-1]], dim=1)
                logp = self.local_log_probs(h, previous)
            picked = logp.gather(2, tags.unsqueeze(2)).squeeze(2)
            return -(picked * mask).sum() / mask.sum()

    return Tagger()


def batches(data, size, rng=None):
    order = np.arange(len(data)) if rng is None else rng.permutation(len(data))
    for lo in range(0, len(data), size):
        yield [data[i] for i in order[lo:lo + size]]


def tensors(batch, vocab, tagset, case: bool = False):
    """(words (B, L), or (B, L, 2) with the word shapes when ``case``; tags (B, L); mask (B, L))."""
    import torch

    L = max(len(w) for w, _ in batch)
    words = torch.zeros(len(batch), L, 2 if case else 1, dtype=torch.long)
    tags = torch.zeros(len(batch), L, dtype=torch.long)
    mask = torch.zeros(len(batch), L, dtype=torch.bool)
    for b, (w, t) in enumerate(batch):
        words[b, :len(w), 0] = torch.tensor([vocab.get(x.lower(), 1) for x in w])
        if case:
            words[b, :len(w), 1] = torch.tensor([word_case(x) for x in w])
        tags[b, :len(t)] = torch.tensor([tagset[x] for x in t])
        mask[b, :len(w)] = True
    return (words if case else words[..., 0]), tags, mask


def memm_viterbi(first, pairs, length, start_bias=None, pair_bias=None):
    """argmax over tag paths of Σ log p(yₜ | yₜ₋₁, x): a lattice (node 1 + t·K + j = tag j at t) to the engine.
    ``start_bias`` (K,) and ``pair_bias`` (K, K), 0 or −inf, restrict the paths to a scheme's."""
    from varorder import lattice

    K = first.shape[0]
    if start_bias is not None:
        first, pairs = first + start_bias, pairs + pair_bias
    labels = np.arange(K)
    src, dst, lab, w = [np.zeros(K, dtype=np.int64)], [1 + labels], [labels], [first]
    ii, jj = np.meshgrid(labels, labels, indexing="ij")
    for t in range(1, length):
        src.append((1 + (t - 1) * K + ii).ravel())
        dst.append((1 + t * K + jj).ravel())
        lab.append(jj.ravel())
        w.append(pairs[t].ravel())
    positions = np.concatenate([[0], np.repeat(np.arange(1, length + 1), K)])
    lat = lattice.Lattice(positions, np.concatenate(src), np.concatenate(dst), np.concatenate(lab), np.concatenate(w))
    return lattice.viterbi(lat)[0]


def scheme_decoder(labels, crf=None):
    """A ``CRF(constraints="BIO")`` with ``crf``'s weights (zero weights without one): its ``decode`` is the
    best valid BIO path of the scores it is given."""
    import torch

    from varorder.torch import CRF

    constrained = CRF(len(labels), batch_first=True, constraints="BIO", labels=labels)
    with torch.no_grad():
        if crf is None:
            for p in constrained.parameters():
                p.zero_()
        else:
            constrained.load_state_dict(crf.state_dict())
    return constrained


def memm_scheme_bias(labels):
    """(start (K,), pairs (K, K)) biases, 0 where BIO allows the tag / transition and −inf elsewhere."""
    from varorder.torch import allowed_transitions

    K = len(labels)
    start, pairs = np.full(K, -np.inf), np.full((K, K), -np.inf)
    for i, j in allowed_transitions("BIO", labels):
        if i == K and j < K:
            start[j] = 0.0
        elif i < K and j < K:
            pairs[i, j] = 0.0
    return start, pairs


def predict(model, data, vocab, tagset, head, scheme: bool = False, case: bool = False):
    """(gold tag ids, {decoder: predicted tag ids}) per sentence; ``scheme`` adds the BIO-constrained
    Viterbi decoder (``viterbi+BIO``) of each head."""
    import torch

    K = len(tagset)
    labels = sorted(tagset, key=tagset.get)
    if scheme:
        constrained = scheme_decoder(labels, model.crf)
        start_bias, pair_bias = memm_scheme_bias(labels)
    gold, predicted = [], {}
    with torch.no_grad():
        for batch in batches(data, 64):
            words, tags, mask = tensors(batch, vocab, tagset, case)
            h = model.states(words)
            n = mask.sum(1).tolist()
            gold += [tags[b, :n[b]].tolist() for b in range(len(batch))]
            if head == "crf":
                paths = {"viterbi": model.crf.decode(model.out(h), mask)}
                if scheme:
                    paths["viterbi+BIO"] = constrained.decode(model.out(h), mask)
            elif head == "softmax":
                best = model.out(h).argmax(-1)
                paths = {"greedy": [best[b, :n[b]].tolist() for b in range(len(batch))]}
                if scheme:
                    paths["viterbi+BIO"] = constrained.decode(torch.log_softmax(model.out(h), dim=-1), mask)
            else:
                allpairs = model.local_log_probs(h, None).numpy()                   # (B, L, K_prev, K)
                first = model.local_log_probs(h[:, :1], torch.full_like(tags[:, :1], K))[:, 0].numpy()
                paths = {"greedy": [], "viterbi": []} | ({"viterbi+BIO": []} if scheme else {})
                for b in range(len(batch)):
                    y = [int(first[b].argmax())]
                    for t in range(1, n[b]):
                        y.append(int(allpairs[b, t, y[-1]].argmax()))
                    paths["greedy"].append(y)
                    paths["viterbi"].append(memm_viterbi(first[b], allpairs[b], n[b]).tolist())
                    if scheme:
                        paths["viterbi+BIO"].append(
                            memm_viterbi(first[b], allpairs[b], n[b], start_bias, pair_bias).tolist())
            for name, ps in paths.items():
                predicted.setdefault(name, []).extend(ps)
    return gold, predicted


def evaluate(model, dev, vocab, tagset, head, case: bool = False):
    """Dev token accuracy (%) per decoder."""
    gold, predicted = predict(model, dev, vocab, tagset, head, case=case)
    total = sum(map(len, gold))
    return {name: round(100.0 * sum(int(p == g) for ps, gs in zip(paths, gold) for p, g in zip(ps, gs)) / total, 2)
            for name, paths in predicted.items()}


def entity_scores(gold_tags, predicted_tags) -> dict:
    """Entity F1 (conlleval / seqeval default and strict BIO), token accuracy, and how many sentences'
    predicted tags are not a valid BIO sequence, of tag strings."""
    from varorder.eval.ner import entity_report, flat_accuracy_score
    from varorder.io.schemes import is_valid

    return {"f1": round(entity_report(gold_tags, predicted_tags).micro.f1, 4),
            "strict_f1": round(entity_report(gold_tags, predicted_tags, mode="strict", scheme="BIO").micro.f1, 4),
            "token_accuracy": round(100.0 * flat_accuracy_score(gold_tags, predicted_tags), 2),
            "invalid_sentences": sum(not is_valid(t, "BIO") for t in predicted_tags)}


def evaluate_entities(model, dev, vocab, tagset, head, case: bool = False):
    """Entity scores per decoder (:func:`entity_scores`), the BIO-constrained decoders included."""
    labels = sorted(tagset, key=tagset.get)
    gold, predicted = predict(model, dev, vocab, tagset, head, scheme=True, case=case)
    gold_tags = [[labels[i] for i in g] for g in gold]
    return {name: entity_scores(gold_tags, [[labels[i] for i in p] for p in paths])
            for name, paths in predicted.items()}


def run(head, train, dev, vocab, tagset, epochs, seed, task="pos", case=False):
    import torch

    torch.manual_seed(seed)
    model = build_model(len(vocab) + 2, len(tagset), head, case=case)
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    rng = np.random.default_rng(seed)
    began = time.process_time()
    losses = []
    for _ in range(epochs):
        for batch in batches(train, 32, rng):
            words, tags, mask = tensors(batch, vocab, tagset, case)
            opt.zero_grad()
            loss = model.loss(words, tags, mask)
            loss.backward()
            opt.step()
            losses.append(float(loss.detach()))
    cpu = time.process_time() - began
    out = {"head": head, "case": case, "train_cpu_s": round(cpu, 1), "first_loss": round(losses[0], 4),
           "last_loss": round(float(np.mean(losses[-20:])), 4)}
    if task == "ner":
        out["dev_entities"] = evaluate_entities(model, dev, vocab, tagset, head, case)
    else:
        out["dev_accuracy"] = evaluate(model, dev, vocab, tagset, head, case)
    return out


def run_feature_crf(train, dev, iterations=100):
    """The feature CRF on the same split: sklearn-crfsuite's tutorial word features (``features="ner"``),
    c1 = c2 = 0.1, L-BFGS, CRFsuite's sparse state features; decoded with and without ``constraints="BIO"``."""
    from varorder.models.crf import CRF

    began = time.process_time()
    crf = CRF(features="ner", c1=0.1, c2=0.1, max_iterations=iterations, all_possible_states=False, n_threads=1)
    crf.fit([w for w, _ in train], [t for _, t in train])
    cpu = time.process_time() - began
    words, gold = [w for w, _ in dev], [t for _, t in dev]
    return {"head": "feature CRF", "case": None, "train_cpu_s": round(cpu, 1), "iterations": int(crf.n_iter_),
            "dev_entities": {"viterbi": entity_scores(gold, crf.predict(words)),
                             "viterbi+BIO": entity_scores(gold, crf.predict(words, constraints="BIO"))}}


def main(argv=None) -> None:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", choices=("pos", "ner"), default="pos",
                        help="pos: UD-EWT UPOS; ner: GUM flat named entities in BIO")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--train-sentences", type=int, default=None)
    parser.add_argument("--dev-sentences", type=int, default=None)
    parser.add_argument("--heads", default="softmax,memm,crf")
    parser.add_argument("--case", action="store_true", help="add the word-shape embedding to the encoder")
    parser.add_argument("--feature-crf", action="store_true", help="ner: also train the feature CRF on the split")
    parser.add_argument("--feature-crf-iterations", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None, help="write a results file (schema 1) here")
    args = parser.parse_args(argv)
    for split in ("train", "dev"):
        if not data_path(args.task, split).exists():
            print(f"skipped: {data_path(args.task, split)} is absent (the shared data sets: ../shared/data/README)")
            return
    torch.set_num_threads(1)
    train = load("train", args.train_sentences, args.task)
    dev = load("dev", args.dev_sentences, args.task)
    counts = Counter(w.lower() for ws, _ in train for w in ws)
    vocab = {w: i + 2 for i, w in enumerate(sorted(w for w, c in counts.items() if c >= 2))}  # 0 pad, 1 unknown
    tagset = {t: i for i, t in enumerate(sorted({t for _, ts in train for t in ts}))}
    if args.task == "ner":
        for scheme_tag in [f"{p}-{t[2:]}" for t in tagset if t != "O" for p in "BI"]:
            tagset.setdefault(scheme_tag, len(tagset))  # every B-/I- pair present, so the scheme is whole
    results, loads = [], [harness.load_average()]
    for head in filter(None, args.heads.split(",")):
        result = run(head, train, dev, vocab, tagset, args.epochs, args.seed, args.task, args.case)
        loads.append(harness.load_average())
        result.update(train_sentences=len(train), dev_sentences=len(dev), epochs=args.epochs, load=round(loads[-1], 2))
        print(json.dumps(result), flush=True)
        results.append(result)
    if args.task == "ner" and args.feature_crf:
        result = run_feature_crf(train, dev, args.feature_crf_iterations)
        loads.append(harness.load_average())
        result.update(train_sentences=len(train), dev_sentences=len(dev), load=round(loads[-1], 2))
        print(json.dumps(result), flush=True)
        results.append(result)
    if args.out is not None:
        document = ner_results_file(results, loads) if args.task == "ner" else results_file(results, loads)
        harness.write_results(args.out, document)
        print(f"wrote {args.out}")


def encoder_name(result) -> str:
    return "BiLSTM" + (" (+ word shape)" if result.get("case") else "")


def results_file(results, loads):
    """Dev accuracy of each head and decoder against the softmax head's greedy decoding."""
    by_head = {r["head"]: r for r in results}
    base = by_head.get("softmax", results[0])
    reference = next(iter(base["dev_accuracy"].values()))
    r0 = results[0]
    task = (f"UD English EWT UPOS, train ({r0['train_sentences']} sentences) -> dev ({r0['dev_sentences']}), "
            f"one BiLSTM encoder (64-dim embeddings and states), {r0['epochs']} epochs of Adam, same seed")
    rows = []
    for r in results:
        for decoder, accuracy in r["dev_accuracy"].items():
            rows.append(harness.row(f"{encoder_name(r)} + {r['head']} head, {decoder} decoding", task, "dev accuracy %",
                                    accuracy, reference, "BiLSTM + softmax head, greedy", better="higher",
                                    note=f"train {r['train_cpu_s']} CPU s; load {r['load']}"))
    return harness.results_document("Neural structured layers", "Local prediction vs a CRF head on one neural "
                                    "encoder (UD-EWT POS, CPU)", rows, issue=43, loads=loads,
                                    details={"runs": results})


def ner_results_file(results, loads):
    """Dev entity F1 of each head and decoder against the feature CRF's (its unconstrained Viterbi; without it in
    the run, against the first head's first decoder), with the invalid-BIO sentence counts in the notes."""
    by_head = {r["head"]: r for r in results}
    neural = next((r for r in results if r["head"] != "feature CRF"), results[0])
    if "feature CRF" in by_head:
        reference, reference_name = by_head["feature CRF"]["dev_entities"]["viterbi"]["f1"], "feature CRF, viterbi"
    else:  # a run without the feature CRF: its first head's first decoder
        first_decoder, first_scores = next(iter(neural["dev_entities"].items()))
        reference = first_scores["f1"]
        reference_name = f"{encoder_name(neural)} + {neural['head']} head, {first_decoder}"
    task = (f"GUM flat named entities (PROPN-head mentions, BIO, 21 tags), train ({neural['train_sentences']} "
            f"sentences) -> dev ({neural['dev_sentences']})")
    rows = []
    for r in results:
        system = ("feature CRF (tutorial word features, c1 = c2 = 0.1, L-BFGS)" if r["head"] == "feature CRF" else
                  f"{encoder_name(r)} + {r['head']} head ({r['epochs']} epochs of Adam)")
        for decoder, scores in r["dev_entities"].items():
            rows.append(harness.row(f"{system}, {decoder} decoding", task, "dev entity F1 (conlleval)", scores["f1"],
                                    reference, reference_name, better="higher",
                                    note=f"strict BIO F1 {scores['strict_f1']}; {scores['invalid_sentences']} of "
                                         f"{r['dev_sentences']} dev sentences decoded to an invalid BIO sequence; "
                                         f"train {r['train_cpu_s']} CPU s; load {r['load']}"))
    return harness.results_document("Neural structured layers", "A CRF head with BIO-constrained decoding vs local "
                                    "heads and the feature CRF (GUM NER, CPU)", rows, issue=43, loads=loads,
                                    details={"runs": results})


if __name__ == "__main__":
    main()
