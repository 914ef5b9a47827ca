"""The issue #30 sweep's report (benchmarks/papers/loglinear_lm.py): which orders and subsets a mean
covers, the Fig. 2a/2b shape verdicts, and resuming a sweep from the results file it wrote."""

import argparse
import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "papers" / "loglinear_lm.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("loglinear_lm_bench", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def cell(subset, order, model, ppl, **extra):
    return {"subset": subset, "order": order, "model": model, "perplexity": ppl, **extra}


def state_with(series, subsets=(0, 1)):
    """Cells for ``series`` {model: {order: perplexity}}, subset k's values shifted by 10 k."""
    cells = []
    for k in subsets:
        for model, values in series.items():
            for order, ppl in values.items():
                extra = {} if model in ("MKN", "KN") else {"lam": 1.0, "alpha": 1.0}
                cells.append(cell(k, order, model, ppl + 10 * k, **extra))
    return {"tuning": [], "cells": cells, "alpha": {}}


def test_an_order_reached_by_some_penalties_is_shown_for_those_alone(bench):
    state = state_with({"MKN": {2: 100, 3: 90, 9: 88}, "KN": {2: 101, 3: 91, 9: 89},
                        "l1": {2: 120, 3: 110}, "wlt2": {2: 110, 3: 95, 9: 93}})
    state["cells"].append(cell(0, 9, "l1", 111, lam=1.0, alpha=1.0))  # l1 at order 9 on subset 0 only
    table, orders, models, chosen = bench.sweep_table(state)
    assert orders == [2, 3, 9] and chosen == [0, 1]
    assert table["wlt2", 9] == pytest.approx(98.0)  # mean of 93 and 103: both subsets
    assert ("l1", 9) not in table  # one subset only: no mean that mixes subsets
    assert table["l1", 3] == pytest.approx(115.0)
    t0, orders0, _, _ = bench.sweep_table(state, [0])
    assert orders0 == [2, 3, 9] and t0["l1", 9] == 111


def test_an_order_without_kneser_ney_baselines_on_every_subset_is_left_out(bench):
    state = state_with({"MKN": {2: 100}, "KN": {2: 101}, "wlt2": {2: 110}})
    state["cells"] += [cell(0, 9, "MKN", 80), cell(0, 9, "KN", 81), cell(0, 9, "wlt2", 90, lam=1.0, alpha=1.0)]
    _, orders, _, chosen = bench.sweep_table(state)
    assert orders == [2] and chosen == [0, 1]


def test_shape_verdicts(bench):
    orders = [2, 3, 4, 6, 9, 12]
    table = {}
    table.update({("l2sq", o): v for o, v in zip(orders, [230, 213, 214, 218, 224, 226])})  # best at 3, +6 %
    table.update({("l1", o): v for o, v in zip(orders, [255, 238, 235, 234, 234.5, 234.6])})  # flat: no degradation
    table.update({("lt2", o): v for o, v in zip(orders, [257, 239, 236, 235, 235.2, 235.3])})
    table.update({("wlt2", o): v for o, v in zip(orders, [238, 213, 208, 207, 215, 222])})  # best at 6, then worse
    verdicts = bench.shape_verdicts(table, orders)
    assert verdicts["l2sq"]["reproduced"] is True and verdicts["l2sq"]["best_order"] == 3
    assert verdicts["l1"]["reproduced"] is False
    assert verdicts["lt2"]["reproduced"] is True
    # improves to order 6, but degrades after it: the "wℓT2 does not degrade" fails
    assert verdicts["wlt2"]["reproduced"] is False and verdicts["wlt2"]["best_order"] == 6
    table.update({("wlt2", o): v for o, v in zip(orders, [238, 213, 208, 207, 206.5, 206.8])})
    assert bench.shape_verdicts(table, orders)["wlt2"]["reproduced"] is True
    assert bench.shape_verdicts({("wlt2", 2): 2.0, ("wlt2", 4): 1.0}, [2, 4])["wlt2"]["reproduced"] is None


def test_a_sweep_resumes_from_the_results_file_its_report_wrote(bench, tmp_path, capsys):
    state = state_with({"MKN": {2: 100, 3: 90}, "KN": {2: 101, 3: 91}, "l2sq": {2: 99, 3: 92}, "wlt2": {2: 110, 3: 95}})
    grid = [{"alpha": 1.3, "lam": 1.0, "perplexity": 150.0, "iterations": 30, "converged": True}]
    for penalty, order in (("l2sq", 2), ("l2sq", 3), ("wlt2", 2), ("wlt2", 3)):
        state["tuning"].append({"order": order, "penalty": penalty, "lam": 1.0, "alpha": 1.3, "perplexity": 150.0,
                                "lams": [1.0], "alphas": [1.3], "lam_interior": True, "alpha_interior": True,
                                "grid": grid})
    state["tuning"] += [{"model": "MKN", "order": 2, "perplexity": 140.0}, {"model": "MKN", "order": 3, "perplexity": 130.0}]
    state["alpha"] = {"wlt2": 1.3}
    sweep, results = tmp_path / "sweep.json", tmp_path / "results.json"
    sweep.write_text(json.dumps(state))
    bench.cmd_report(argparse.Namespace(sweep=str(sweep), results=str(results), sweep_command="python x.py", cpu="cpu"))
    capsys.readouterr()
    resumed = bench.sweep_state_from_results(json.loads(results.read_text()))
    assert resumed["cells"] == state["cells"] and resumed["alpha"] == state["alpha"]
    key = lambda r: json.dumps(r, sort_keys=True)  # noqa: E731
    assert sorted(map(key, resumed["tuning"])) == sorted(map(key, state["tuning"]))
