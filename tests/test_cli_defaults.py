"""One set of defaults (issue #31): every CLI option that sets an estimator parameter defaults
to the library's value, or its help says why it differs ("Differs from the library's ...")."""

from __future__ import annotations

import dataclasses

import click
import pytest

from varorder.agree.aligner import WordAligner
from varorder.cli.main import main
from varorder.decipher.model import Decipherer
from varorder.factorgraph.samplerank import SampleRankTagger
from varorder.grammar.induce import GrammarInducer
from varorder.lm.estimate import AbsoluteDiscounting, AdditiveSmoothing, ModifiedKneserNey
from varorder.loglinear.model import SolverOptions, StructuredLogLinear
from varorder.models.crf import CRF
from varorder.models.hmm import HMM
from varorder.models.memm import MEMM
from varorder.strings.em import EditEM
from varorder.strings.inference import EPOptions, PrunedBP, StringEP
from varorder.transduce.model import AlignmentTransducer, TransducerOptions

# command path -> [(estimator class, {option name: parameter name})]
MAPPINGS = {
    ("tag", "train"): [
        (CRF, {"algorithm": "algorithm", "c1": "c1", "c2": "c2", "max_iterations": "max_iterations"}),
        (MEMM, {"c1": "c1", "c2": "c2", "max_iterations": "max_iterations"}),
        (HMM, {"alpha": "alpha_emission"}), (HMM, {"alpha": "alpha_transition"}), (HMM, {"alpha": "alpha_start"}),
        (SampleRankTagger, {"epochs": "n_epochs", "rule": "rule", "pairs": "pairs", "seed": "random_state"}),
    ],
    ("align", "train"): [(WordAligner, {name: name for name in (
        "model", "training", "iterations", "ibm1_iterations", "null_prob", "max_jump", "band", "threshold",
        "max_length", "shard_size")})],
    ("induce", "train"): [(GrammarInducer, {"model": "model", "iterations": "n_iter", "ccm_smoothing": "ccm_smoothing",
                                            "dmv_smoothing": "dmv_smoothing"})],
    ("decipher", "train"): [(Decipherer, {"order": "order", "inference": "inference", "size": "size",
                                          "iterations": "n_iter", "laplace": "laplace", "discount": "discount",
                                          "smoothing": "smoothing", "init_noise": "init_noise", "seed": "seed"})],
    ("lm", "train"): [
        (ModifiedKneserNey, {"order": "order", "min_count": "min_count"}),
        (AbsoluteDiscounting, {"discount": "discount", "smoothing": "smoothing"}),
        (AdditiveSmoothing, {"alpha": "alpha"}),
        (StructuredLogLinear, {"penalty": "penalty", "depth_alpha": "alpha", "weighting": "weighting",
                               "epochs": "epochs", "batch_size": "batch_size", "optimizer": "optimizer",
                               "polish": "polish", "seed": "seed"}),
        # the rarely changed knobs live in StructuredLogLinear(solver=SolverOptions(...))
        (SolverOptions, {"learning_rate": "learning_rate", "lipschitz": "lipschitz", "mu": "mu",
                         "restart": "restart"}),
    ],
    ("transduce", "train"): [(AlignmentTransducer, {
        "method": "method", "size": "num_contexts", "order": "order", "max_advance": "max_advance",
        "hash_bits": "hash_bits", "unigrams": "edge_unigrams", "epochs": "epochs", "seed": "seed"}),
        # the rarely changed knobs live in AlignmentTransducer(options=TransducerOptions(...))
        (TransducerOptions, {"step_size": "step_size", "delta": "delta", "truncation": "truncation"})],
    # --em-iterations 0 switches EM off (inference only): a mode, not EditEM's iteration count
    ("strings", "infer"): [(StringEP, {"eta": "eta", "iterations": "iterations", "inner_passes": "inner_passes"}),
                           (EPOptions, {"prox_penalty": "prox_penalty", "prox_steps": "prox_steps"}),
                           (PrunedBP, {"k": "k", "iterations": "iterations"}),
                           (EditEM, {"em_smoothing": "smoothing"})],
    ("ocr",): [(CRF, {"c2": "c2", "max_iterations": "max_iterations"})],
}


def _command(path):
    command, ctx = main, click.Context(main)
    for name in path:
        command = command.get_command(ctx, name)
    return command


def _same(cli, library) -> bool:
    if isinstance(cli, str) and not isinstance(library, str):  # click.Choice of numbers ("2")
        return str(library) == cli
    if isinstance(cli, (tuple, list)) and isinstance(library, (tuple, list)):
        return tuple(cli) == tuple(library)
    return cli == library


@pytest.mark.parametrize("path", sorted(MAPPINGS), ids=" ".join)
def test_cli_defaults_are_the_librarys_or_say_why_not(path):
    options = {p.name: p for p in _command(path).params if isinstance(p, click.Option)}
    differing = []
    for estimator, mapping in MAPPINGS[path]:
        instance = estimator()
        library = dataclasses.asdict(instance) if dataclasses.is_dataclass(instance) else instance.get_params()
        for option, parameter in mapping.items():
            assert option in options, f"varorder {' '.join(path)} has no option {option!r}"
            default = options[option].default
            if not _same(default, library[parameter]):
                help_text = options[option].help or ""
                if "Differs from the library's" not in help_text:
                    differing.append(f"--{option.replace('_', '-')} = {default!r} but "
                                     f"{estimator.__name__}({parameter}={library[parameter]!r})")
    assert not differing, "CLI defaults that differ from the library's without saying why: " + "; ".join(differing)
