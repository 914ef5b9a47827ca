"""The sequence-models lecture's comparison on one neural encoder: local prediction against a
CRF head, UD English EWT UPOS (train → dev), on CPU.

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

    PYTHONPATH=src python benchmarks/papers/torch_tagging.py                    # the full run
    PYTHONPATH=src python benchmarks/papers/torch_tagging.py --train-sentences 2000 --epochs 1   # a smoke run

Reads ``../shared/data/ud-english-ewt`` (dev is reported; the test split is held back).
Prints one JSON line per head (dev token accuracy per decoder, train CPU seconds).
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


def load(split: str, limit: int | None = None):
    from varorder.io import read_conllu

    path = harness.DATA / "ud-english-ewt" / f"en_ewt-ud-{split}.conllu.gz"
    sentences = read_conllu(path)[:limit]
    return [(s.words, s.tags("upos")) for s in sentences]


def build_model(num_words: int, num_tags: int, head: str, dim: int = 64):
    import torch
    from torch import nn

    from varorder.torch import CRF

    class Tagger(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(num_words, dim, padding_idx=0)
            self.lstm = nn.LSTM(dim, dim, batch_first=True, bidirectional=True)
            self.head = head
            if head == "memm":
                self.previous = nn.Embedding(num_tags + 1, 2 * dim)      # index num_tags = sentence start
            self.out = nn.Linear(2 * dim, num_tags)
            self.crf = CRF(num_tags, batch_first=True) if head == "crf" else None

        def states(self, words):
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


def tensors(batch, vocab, tagset):
    import torch

    L = max(len(w) for w, _ in batch)
    words = torch.zeros(len(batch), L, dtype=torch.long)
    tags = torch.zeros(len(batch), L, dtype=torch.long)
    mask = torch.zeros(len(batch), L, dtype=torch.bool)
    for b, (w, t) in enumerate(batch):
        words[b, :len(w)] = torch.tensor([vocab.get(x.lower(), 1) for x in w])
        tags[b, :len(t)] = torch.tensor([tagset[x] for x in t])
        mask[b, :len(w)] = True
    return words, tags, mask


def memm_viterbi(first, pairs, length):
    """argmax over tag paths of Σ log p(yₜ | yₜ₋₁, x): a lattice (node 1 + t·K + j = tag j at t) to the engine."""
    from varorder import lattice

    K = first.shape[0]
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


def evaluate(model, dev, vocab, tagset, head):
    import torch

    K = len(tagset)
    correct = Counter()
    total = 0
    with torch.no_grad():
        for batch in batches(dev, 64):
            words, tags, mask = tensors(batch, vocab, tagset)
            h = model.states(words)
            n = mask.sum(1).tolist()
            gold = [tags[b, :n[b]].tolist() for b in range(len(batch))]
            total += sum(n)
            if head == "crf":
                predicted = {"viterbi": model.crf.decode(model.out(h), mask)}
            elif head == "softmax":
                best = model.out(h).argmax(-1)
                predicted = {"greedy": [best[b, :n[b]].tolist() for b in range(len(batch))]}
            else:
                allpairs = model.local_log_probs(h, None).numpy()                   # (B, L, K_prev, K)
                first = model.local_log_probs(h[:, :1], torch.full_like(tags[:, :1], K))[:, 0].numpy()
                greedy, viterbi = [], []
                for b in range(len(batch)):
                    y = [int(first[b].argmax())]
                    for t in range(1, n[b]):
                        y.append(int(allpairs[b, t, y[-1]].argmax()))
                    greedy.append(y)
                    viterbi.append(memm_viterbi(first[b], allpairs[b], n[b]).tolist())
                predicted = {"greedy": greedy, "viterbi": viterbi}
            for name, paths in predicted.items():
                correct[name] += sum(int(p == g) for ps, gs in zip(paths, gold) for p, g in zip(ps, gs))
    return {name: round(100.0 * c / total, 2) for name, c in correct.items()}


def run(head, train, dev, vocab, tagset, epochs, seed):
    import torch

    torch.manual_seed(seed)
    model = build_model(len(vocab) + 2, len(tagset), head)
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    rng = np.random.default_rng(seed)
    began = time.process_time()
    losses = []
    for _ in range(epochs):
        for batch in batches(train, 32, rng):
            words, tags, mask = tensors(batch, vocab, tagset)
            opt.zero_grad()
            loss = model.loss(words, tags, mask)
            loss.backward()
            opt.step()
            losses.append(float(loss.detach()))
    cpu = time.process_time() - began
    return {"head": head, "dev_accuracy": evaluate(model, dev, vocab, tagset, head), "train_cpu_s": round(cpu, 1),
            "first_loss": round(losses[0], 4), "last_loss": round(float(np.mean(losses[-20:])), 4)}


def main(argv=None) -> None:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--train-sentences", type=int, default=None)
    parser.add_argument("--dev-sentences", type=int, default=None)
    parser.add_argument("--heads", default="softmax,memm,crf")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None, help="write a results file (schema 1) here")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    train, dev = load("train", args.train_sentences), load("dev", args.dev_sentences)
    counts = Counter(w.lower() for ws, _ in train for w in ws)
    vocab = {w: i + 2 for i, w in enumerate(sorted(w for w, c in counts.items() if c >= 2))}  # 0 pad, 1 unknown
    tagset = {t: i for i, t in enumerate(sorted({t for _, ts in train for t in ts}))}
    results, loads = [], [harness.load_average()]
    for head in args.heads.split(","):
        result = run(head, train, dev, vocab, tagset, args.epochs, args.seed)
        loads.append(harness.load_average())
        result.update(train_sentences=len(train), dev_sentences=len(dev), epochs=args.epochs, load=round(loads[-1], 2))
        print(json.dumps(result), flush=True)
        results.append(result)
    if args.out is not None:
        harness.write_results(args.out, results_file(results, loads))
        print(f"wrote {args.out}")


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
            rows.append(harness.row(f"BiLSTM + {r['head']} head, {decoder} decoding", task, "dev accuracy %", accuracy,
                                    reference, "BiLSTM + softmax head, greedy", better="higher",
                                    note=f"train {r['train_cpu_s']} CPU s; load {r['load']}"))
    return harness.results_document("Neural structured layers", "Local prediction vs a CRF head on one neural "
                                    "encoder (UD-EWT POS, CPU)", rows, issue=43, loads=loads,
                                    details={"runs": results})


if __name__ == "__main__":
    main()
