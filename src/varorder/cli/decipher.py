"""``varorder decipher``: prepare a substitution-cipher task, learn the key by EM, evaluate
(Steinhardt & Liang 2015, §6).

    varorder decipher prepare wap.train.txt.gz wap.valid.txt.gz -o wap/ --num-cipher 1750 --seed 0
    varorder decipher train wap/ -o wap-rcms60 --order 2 --inference rcms --size 60 --iterations 20
    varorder decipher eval wap/ wap-rcms60/model.npz
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from varorder.cli._options import DaskAddress, OutputFile, OutputFolder, Real, executor, refuse_inapplicable
from varorder.errors import FormatError

__all__ = ["COMMAND"]


@click.group("decipher")
def COMMAND():
    """Decipher a 1:1 word substitution by EM (exact / beam / RCMS E-steps)."""


@COMMAND.command("prepare")
@click.argument("corpus", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--output", required=True, type=OutputFolder(), help="task folder to write")
@click.option("--num-words", type=click.IntRange(1), default=500, show_default=True, help="plaintext word list size")
@click.option("--num-cipher", type=click.IntRange(1), default=2000, show_default=True,
              help="sentences to encipher (the paper's 2,000; War and Peace and Brown hold about 1,750)")
@click.option("--seed", type=click.IntRange(0), default=0, show_default=True)
@click.option("--max-unk-tokens", type=click.IntRange(0), default=0, show_default=True,
              help="out-of-list tokens a cipher sentence may hold (0: the paper's in-list rule); above 0 they "
                   "become one hidden word <unk> with its own cipher symbol, left out of mapping accuracy")
@click.option("--max-unk-share", type=Real(0, 1), default=1.0, show_default=True,
              help="and at most this share of the sentence's tokens")
def prepare(corpus, output, num_words, num_cipher, seed, max_unk_tokens, max_unk_share):
    """Tokenize CORPUS files (plain text / .gz, or the Brown .tar.gz), encipher in-list sentences."""
    from varorder.decipher import data as task

    try:
        sentences = [s for path in corpus for s in task.read_corpus_sentences(path)]
        prepared = task.prepare(sentences, num_words=num_words, num_cipher=num_cipher, seed=seed,
                                name="+".join(Path(p).name for p in corpus), max_unk_tokens=max_unk_tokens,
                                max_unk_share=max_unk_share)
        task.save(prepared, output)
    except (ValueError, FileNotFoundError) as exc:
        raise click.ClickException(str(exc))
    click.echo(json.dumps(prepared.meta, indent=1))


@COMMAND.command("train")
@click.argument("task_folder", type=click.Path(exists=True, file_okay=False))
@click.option("-o", "--output", required=True, type=OutputFolder(),
              help="folder for model.npz, table.tsv and history.json")
@click.option("--order", type=click.Choice(["1", "2"]), default="2", show_default=True, help="plaintext chain order")
@click.option("--inference", type=click.Choice(["exact", "rcms", "beam"]), default="rcms", show_default=True)
@click.option("--size", type=click.IntRange(1), default=60, show_default=True, help="contexts / beam entries per position")
@click.option("--iterations", type=click.IntRange(0), default=20, show_default=True)
@click.option("--num-cipher", type=click.IntRange(1), default=None, help="use the first N cipher sentences (default all)")
@click.option("--laplace", type=Real(0, min_open=True), default=0.01, show_default=True)
@click.option("--discount", type=Real(0), default=0.25, show_default=True)
@click.option("--smoothing", type=Real(0), default=0.01, show_default=True)
@click.option("--init-noise", type=Real(0), default=0.0, show_default=True, help="seeded noise on the uniform start")
@click.option("--seed", type=click.IntRange(0), default=0, show_default=True)
@click.option("--shards", type=click.IntRange(1), default=None, help="E-step work units (default: one per worker)")
@click.option("--workers", "--jobs", "workers", type=click.IntRange(1), default=1, show_default=True, help="local E-step threads")
@click.option("--dask", "--dask-scheduler", "dask_address", type=DaskAddress(), default=None, help="dask.distributed scheduler address")
def train(task_folder, output, order, inference, size, iterations, num_cipher, laplace, discount, smoothing, init_noise,
          seed, shards, workers, dask_address):
    """Learn the emission table from TASK_FOLDER's cipher text and plaintext (the key is read
    only to print the accuracy of each iteration)."""
    from varorder._progress import Progress
    from varorder.decipher import Decipherer, load

    refuse_inapplicable(click.get_current_context(), [("size", inference != "exact", "--inference rcms or beam")])
    out = Path(output)
    try:
        data = load(task_folder)
        bar = Progress(total=iterations, desc=f"EM {inference}-{size} order {order}", unit="iter")

        def report(entry, _):
            bar.update(1)
            shown = {"loglik": f"{entry['log_likelihood']:.1f}", "ctx": f"{entry['context_length']:.2f}"}
            if "accuracy" in entry:
                shown["acc"] = f"{entry['accuracy']:.3f}"
            bar.set_postfix(shown)

        model = Decipherer(order=int(order), inference=inference, size=size, n_iter=iterations, laplace=laplace,
                           discount=discount, smoothing=smoothing, init_noise=init_noise, seed=seed,
                           n_shards=shards or max(1, workers), executor=executor(workers, dask_address),
                           callback=report)
        model.fit(data, num_cipher=num_cipher)
        bar.close()
        out.mkdir(parents=True, exist_ok=True)
        model.save(out / "model.npz", data.words)
        model.write_table(out / "table.tsv", data.words)
        from varorder.io import atomic_write_text

        with atomic_write_text(out / "history.json") as handle:  # atomic, and a full disk names the file
            handle.write(model.history_json() + "\n")
    except (ValueError, FileNotFoundError) as exc:
        raise click.ClickException(str(exc))
    last = model.history_[-1] if model.history_ else {}
    click.echo(f"wrote {out}/model.npz, table.tsv, history.json"
               + (f"; mapping accuracy {last['accuracy']:.4f}" if "accuracy" in last else ""), err=True)


@COMMAND.command("eval")
@click.argument("task_folder", type=click.Path(exists=True, file_okay=False))
@click.argument("model_path", type=click.Path(exists=True, dir_okay=False))
@click.option("--num-cipher", type=click.IntRange(1), default=None, help="score the first N cipher sentences (default all)")
@click.option("--decoded", type=OutputFile(), default=None,
              help="also write the cipher text deciphered by the learned mapping")
def evaluate(task_folder, model_path, num_cipher, decoded):
    """Mapping accuracy (distinct symbols decoded right) and token accuracy of a trained model."""
    import numpy as np

    from varorder.decipher import Decipherer, load
    from varorder.io import atomic_write_text
    from varorder.eval.metrics import mapping_accuracy

    try:
        data = load(task_folder)
        if data.cipher_key is None:
            raise FormatError(f"{task_folder}: no key.tsv, nothing to evaluate against", path=task_folder)
        model = Decipherer.load(model_path)
        if model.words_ != data.words:
            raise FormatError(f"{model_path}: trained on another word list than {task_folder}", path=model_path)
        symbols, _ = data.cipher_flat(num_cipher)
        if symbols.max() >= len(model.mapping_):
            raise FormatError(f"{task_folder}: cipher symbol {int(symbols.max())} is outside the model's table", path=task_folder)
        truth = data.cipher_key.inverse
        scored = data.scored_symbols(symbols)
        result = {"mapping_accuracy": mapping_accuracy(model.mapping_, truth, scored),
                  "token_accuracy": float(np.mean(model.mapping_[symbols] == truth[symbols])),
                  "distinct_symbols": int(len(scored)), "tokens": int(len(symbols))}
        unk = data.unk_symbol
        if unk is not None and unk in symbols:
            # the <unk> word's symbol is left out of mapping accuracy, reported here instead
            result["unk_symbol"] = unk
            result["unk_symbol_correct"] = bool(model.mapping_[unk] == truth[unk])
            result["unk_tokens"] = int(np.sum(symbols == unk))
    except (ValueError, FileNotFoundError) as exc:
        raise click.ClickException(str(exc))
    if decoded:
        sentences = data.cipher[:num_cipher] if num_cipher else data.cipher
        with atomic_write_text(Path(decoded)) as handle:
            handle.write("".join(" ".join(data.words[w] for w in model.mapping_[s]) + "\n" for s in sentences))
    click.echo(json.dumps(result, indent=1))
