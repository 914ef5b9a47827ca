"""
Regimes of a real series: Gaussian HMM, filtered probabilities, semi-Markov durations
=====================================================================================

**Problem.** Find the regimes of a time series — stretches where it behaves alike — and say,
at each time, which regime it is in: in hindsight (smoothed), or with only the data seen so far
(filtered, as a forecaster would have known it). The series here is US real GDP growth, quarterly,
1959–2009 (statsmodels' ``macrodata``: FRED's figures, public domain); the regimes found are set
against the NBER's recession dates. The models take hmmlearn's names and call shapes:
:class:`~varorder.models.gaussian_hmm.GaussianHMM` and the explicit-duration
:class:`~varorder.models.hsmm.GaussianHSMM`, both on the one chain / semi-Markov engine.

**Needs** ``pip install statsmodels`` (BSD-3-Clause) for the data set, and matplotlib (a varorder
dependency) for the figures, which the script also writes to ``regimes.png`` and
``durations.png`` in a temporary folder (it prints where).

**Papers.** Hamilton (1989), *A new approach to the economic analysis of nonstationary time
series and the business cycle* (two-regime switching in GNP growth); Rabiner (1989) for the HMM;
McConnell & Perez-Quiros (2000) on the fall in US output volatility after 1984; Yu (2010),
*Hidden semi-Markov models*, for the explicit-duration model.
"""

# %%
# Data
# ----
# Growth is the annualised quarter-on-quarter change of log real GDP, in percent: 202 quarters,
# one sequence. ``X`` has hmmlearn's shape, (n_samples, n_features).
import tempfile
from pathlib import Path

import numpy as np

try:
    import statsmodels.api as sm
except ImportError:
    raise SystemExit("this example reads statsmodels' macrodata: pip install statsmodels") from None

macro = sm.datasets.macrodata.load_pandas().data
growth = 400 * np.diff(np.log(macro["realgdp"].to_numpy()))
when = (macro["year"] + (macro["quarter"] - 1) / 4).to_numpy()[1:]  # 1959.25 = 1959Q2
X = growth[:, None]
print(f"{len(growth)} quarters, {when[0]:.2f}-{when[-1]:.2f}; growth mean {growth.mean():.2f}%, "
      f"sd {growth.std():.2f}%")

# NBER business-cycle reference dates in the sample (peak, trough); a recession is the
# quarters after the peak up to and including the trough
NBER = [(1960.25, 1961.0), (1969.75, 1970.75), (1973.75, 1975.0), (1980.0, 1980.5),
        (1981.5, 1982.75), (1990.5, 1991.0), (2001.0, 2001.75), (2007.75, 2009.25)]
recession = np.zeros(len(when), dtype=bool)
for peak, trough in NBER:
    recession |= (when > peak) & (when <= trough)
print(f"NBER recession quarters: {recession.sum()}")

# %%
# How many regimes
# ----------------
# EM from a seeded k-means++ start, one model per number of states; ``aic`` and ``bic`` count
# the free parameters as hmmlearn does. BIC picks two states: their means are alike and their
# spreads are not — a volatile regime before the mid-1980s and a calm one after (the "Great
# Moderation"; the calm state's first and last quarters are printed). AIC picks three, and the
# third state is the one this page follows: a regime of falling output.
from varorder import GaussianHMM

models = {}
for k in (1, 2, 3, 4):
    models[k] = GaussianHMM(n_components=k, n_iter=200, random_state=0).fit(X)
    m = models[k]
    print(f"K={k}: log-likelihood {m.score(X):8.2f}  AIC {m.aic(X):7.1f}  BIC {m.bic(X):7.1f}")
print(f"BIC picks K={min(models, key=lambda k: models[k].bic(X))}, "
      f"AIC picks K={min(models, key=lambda k: models[k].aic(X))}")

two = models[2]
calm = int(np.argmin(two.covars_[:, 0, 0]))
print("two states: means", np.round(two.means_[:, 0], 2),
      "sd", np.round(np.sqrt(two.covars_[:, 0, 0]), 2))
calm_quarters = when[two.predict(X) == calm]
print(f"calm state: {calm_quarters.size} quarters, "
      f"{calm_quarters.min():.2f}-{calm_quarters.max():.2f}")

# %%
# Three regimes: decoded states and filtered probabilities
# --------------------------------------------------------
# The states are relabelled by their mean growth (0 = falling output, 1 = normal, 2 = fast).
# ``predict`` is the Viterbi path; ``predict_proba(X)`` the smoothed p(zₜ | x₁..ₙ);
# ``predict_proba(X, filtered=True)`` the filtered p(zₜ | x₁..ₜ), from a forward pass only — what
# the model would have said in real time (hmmlearn has no public call for them).
import matplotlib.pyplot as plt

hmm = models[3]
order = np.argsort(hmm.means_[:, 0])  # the states by mean growth
rank = order.argsort()  # state -> its rank
states = rank[hmm.predict(X)]
smoothed = hmm.predict_proba(X)[:, order]  # columns in rank order
filtered = hmm.predict_proba(X, filtered=True)[:, order]
print("means", np.round(hmm.means_[order, 0], 2), "sd",
      np.round(np.sqrt(hmm.covars_[order, 0, 0]), 2))
print("expected stay (quarters), 1 / (1 - A[k, k]):",
      np.round(1 / (1 - np.diag(hmm.transmat_)[order]), 1))
for name, flag in (("Viterbi state 0", states == 0), ("filtered p0 > 0.5", filtered[:, 0] > 0.5),
                   ("smoothed p0 > 0.5", smoothed[:, 0] > 0.5)):
    print(f"{name:18s}: {flag.sum():3d} quarters, {(flag & recession).sum():2d} of them in NBER "
          f"recessions; {(recession & ~flag).sum():2d} recession quarters missed")

colours = np.array(["tab:red", "tab:grey", "tab:green"])
labels = ["falling", "normal", "fast"]
fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 5.5), sharex=True,
                                  gridspec_kw={"height_ratios": [3, 2]})
for ax in (top, bottom):
    for peak, trough in NBER:
        ax.axvspan(peak, trough, color="0.88", lw=0)
top.plot(when, growth, color="0.6", lw=0.8)
for k in range(3):
    top.scatter(when[states == k], growth[states == k], s=12, c=colours[k], label=labels[k],
                zorder=3)
top.axhline(0, color="k", lw=0.5)
top.set_ylabel("real GDP growth, % a year")
top.legend(loc="upper right", ncol=3, fontsize=8, title="Viterbi state", title_fontsize=8)
top.set_title("US real GDP growth by decoded state; NBER recessions shaded")
bottom.plot(when, filtered[:, 0], color="tab:red", label="filtered p(z_t = falling | x_1..t)")
bottom.plot(when, smoothed[:, 0], color="k", lw=0.8, ls="--",
            label="smoothed p(z_t = falling | x_1..n)")
bottom.set_ylim(-0.02, 1.02)
bottom.set_ylabel("probability")
bottom.legend(loc="upper right", fontsize=8)
fig.tight_layout()
work = Path(tempfile.mkdtemp(prefix="varorder-regimes-"))
fig.savefig(work / "regimes.png", dpi=100)

# %%
# Command line
# ------------
# ``varorder hmm`` reads a CSV (one row per time step, a header line allowed) or ``.npy``:
# ``train`` fits by EM and saves npz + JSON, ``decode --filtered`` prints the state and the
# filtered probabilities per row, ``score`` the log-likelihood, AIC and BIC. The model file loads
# back in Python, validated in full.
from subprocess import PIPE, STDOUT, run

np.savetxt(work / "gdp.csv", X, fmt="%.6f", header="growth", comments="")
commands = """
varorder hmm train gdp.csv --model gaussian --n-components 3 --seed 0 -o gdp.npz
varorder hmm decode gdp.npz gdp.csv --filtered > decoded.csv
head -4 decoded.csv
varorder hmm score gdp.npz gdp.csv
"""
shell = run(["bash", "-exc", commands], cwd=work, stdout=PIPE, stderr=STDOUT, text=True)
print(shell.stdout)
shell.check_returncode()  # a failing command stops the script

from_file = GaussianHMM.load(work / "gdp.npz")
print(f"loaded: log-likelihood {from_file.score(X):.4f} (Python's model: {hmm.score(X):.4f})")

# %%
# Semi-Markov durations
# ---------------------
# An HMM state's stay is geometric: one quarter is its likeliest length, whatever the state. The
# explicit-duration :class:`~varorder.models.hsmm.GaussianHSMM` gives each state a distribution
# of stays — here ``"poisson"`` (stay − 1 ~ Poisson(λₖ), cut at ``max_duration``) — and no
# self-transitions. It starts from the HMM: the same start, means and variances, the
# transitions without their diagonal, and Poisson stays with the HMM's mean stays
# (``init_params=""`` keeps what was set, as in hmmlearn). Its Viterbi ``segments`` are
# (start, end, state) runs; compare its counts against the NBER's with the HMM's above. (A
# ``"nonparametric"`` duration per state is a histogram of the handful of stays a series this
# short has; on these data EM collapses it onto one length.)
# Filtered probabilities are the HMM's: the semi-Markov forward values are per segment end.
from varorder import GaussianHSMM
from varorder.models.hsmm import truncated_poisson_log_pmf

D = 40
hsmm = GaussianHSMM(n_components=3, max_duration=D, duration_distribution="poisson",
                    n_iter=100, init_params="")
hsmm.startprob_, hsmm.means_ = hmm.startprob_, hmm.means_
hsmm.covars_ = np.diagonal(hmm.covars_, axis1=1, axis2=2)  # "diag" takes (K, n_features)
jumps = hmm.transmat_ * (1 - np.eye(3))
hsmm.transmat_ = jumps / jumps.sum(axis=1, keepdims=True)
hsmm.duration_lambdas_ = 1 / (1 - np.diag(hmm.transmat_)) - 1  # mean stay − 1
hsmm.durations_ = np.exp(truncated_poisson_log_pmf(hsmm.duration_lambdas_, D))
hsmm.fit(X)
print(f"HSMM: {hsmm.n_iter_} iterations, log-likelihood {hsmm.score(X):.2f} "
      f"(HMM {hmm.score(X):.2f}); BIC {hsmm.bic(X):.1f} (HMM {hmm.bic(X):.1f})")
hsmm_order = np.argsort(hsmm.means_[:, 0])
hsmm_rank = hsmm_order.argsort()
lengths = np.arange(1, D + 1)
print("mean stay (quarters) by rank:", np.round((hsmm.durations_ @ lengths)[hsmm_order], 1))
falling = [(when[s], when[e - 1]) for s, e, k in hsmm.segments(X)[0] if hsmm_rank[k] == 0]
print("falling-output segments:", ", ".join(f"{a:.2f}-{b:.2f}" for a, b in falling))
hsmm_states = hsmm_rank[hsmm.predict(X)]
flag = hsmm_states == 0
print(f"HSMM state 0: {flag.sum():3d} quarters, {(flag & recession).sum():2d} of them in NBER "
      f"recessions; {(recession & ~flag).sum():2d} recession quarters missed")

fig, (rows, stays) = plt.subplots(1, 2, figsize=(9, 2.8), gridspec_kw={"width_ratios": [3, 1]})
for y, path in ((1, states), (0, hsmm_states)):
    for k in range(3):
        rows.bar(when[path == k], 0.8, width=0.25, bottom=y - 0.4, color=colours[k], lw=0)
rows.bar(when[recession], 0.8, width=0.25, bottom=1.6, color="k", lw=0)
rows.set_yticks([0, 1, 2], ["HSMM", "HMM", "NBER"])
rows.set_title("Viterbi states (colours as above) and NBER recessions")
stay = np.diag(hmm.transmat_)[order[0]]
stays.bar(lengths, hsmm.durations_[hsmm_order[0]], color="tab:red", label="HSMM (Poisson)")
stays.plot(lengths, stay ** (lengths - 1) * (1 - stay), color="k", lw=0.8, marker=".",
           label="HMM (geometric)")
stays.set_xlim(0, 16)
stays.set_xlabel("stay, quarters")
stays.set_title("the falling state's stays", fontsize=10)
stays.legend(fontsize=7)
fig.tight_layout()
fig.savefig(work / "durations.png", dpi=100)
print("figures:", work / "regimes.png", work / "durations.png")

# %%
# Coming from hmmlearn
# --------------------
# The everyday calls and their equivalents are the hmmlearn table of
# :doc:`/getting-started` (section "Coming from another tool"): the import changes, the calls do
# not. What maps: ``GaussianHMM``, ``GMMHMM``, ``PoissonHMM``, ``CategoricalHMM`` with
# hmmlearn's parameters (``n_components``, ``covariance_type``, ``min_covar``, the priors,
# ``n_iter``, ``tol``, ``params`` / ``init_params`` letters) and learned attributes in hmmlearn's
# shapes (``startprob_``, ``transmat_``, ``means_``, ``covars_`` per covariance type,
# ``lambdas_``, ``emissionprob_``, ``monitor_``); ``fit(X, lengths)``, ``score``,
# ``score_samples``, ``decode(algorithm="viterbi" | "map")``, ``predict``, ``predict_proba``,
# ``sample``, ``aic``, ``bic``. Same parameters give the same ``score``, ``predict_proba``,
# ``decode`` and one EM step as hmmlearn 0.3.3, to 1e-13 relative on the tests' instances.
#
# What differs:
#
# * Constructor parameters are keyword-only: ``GaussianHMM(n_components=3)``, not
#   ``GaussianHMM(3)``. ``implementation`` is accepted and ignored (the engine chooses its scaled
#   or log-space path).
# * Initialisation and sampling use NumPy ``Generator`` streams (seeded k-means++ in NumPy for
#   the means): the same ``random_state`` does not give hmmlearn's start or samples.
# * ``min_covar`` floors the variances after every M-step too (hmmlearn: at initialisation
#   only); identical whenever no variance falls below it. Spherical ``covars_`` stay (K,) where
#   hmmlearn's M-step leaves a (K, D) array behind.
# * A state that receives no posterior mass keeps its transition row (hmmlearn leaves a zero row
#   and warns); ``CategoricalHMM`` learns ``n_features_`` when ``n_features`` is None.
# * Models are saved as npz + JSON (``save`` / ``GaussianHMM.load``, checked in full on load),
#   not pickled; ``history_`` records the log-likelihood and the log-posterior per iteration
#   beside hmmlearn's ``monitor_``.
# * New here: ``predict_proba(X, filtered=True)`` and fixed-lag ``predict_proba(X, lag=h)``;
#   ``fit(X, lengths, sample_weight=)``; NaN entries of ``X`` marginalised out of a Gaussian's
#   or a Gaussian mixture's density;
#   zeros of ``startprob_`` / ``transmat_`` that stay zero through EM; exact ``kbest_paths`` and
#   posterior ``sample_paths``; explicit-duration ``GaussianHSMM`` / ``PoissonHSMM``; the
#   ``varorder hmm`` command line.
# * Not here (yet): ``n_jobs`` for these models; hmmlearn's
#   ``MultinomialHMM`` and variational models.
#
# hmmlearn's tutorial "Sampling and decoding" runs with only its import changed: set a
# four-state model's parameters by hand, sample 500 points, fit a fresh model to them.
gen = GaussianHMM(n_components=4, covariance_type="full")
gen.startprob_ = np.array([0.6, 0.3, 0.1, 0.0])
gen.transmat_ = np.array([[0.7, 0.2, 0.0, 0.1], [0.3, 0.5, 0.2, 0.0],
                          [0.0, 0.3, 0.5, 0.2], [0.2, 0.0, 0.2, 0.6]])
gen.means_ = np.array([[0.0, 0.0], [0.0, 11.0], [9.0, 10.0], [11.0, -1.0]])
gen.covars_ = 0.5 * np.tile(np.identity(2), (4, 1, 1))
points, truth = gen.sample(500, random_state=1)
fresh = GaussianHMM(n_components=4, covariance_type="full", n_iter=100, random_state=0)
fresh.fit(points)
decoded = fresh.predict(points)
# each fitted state's most frequent true state: EM's labels are a permutation
label = np.array([np.bincount(truth[decoded == k], minlength=4).argmax() for k in range(4)])
print(f"log-likelihood: fitted {fresh.score(points):.1f}, generating {gen.score(points):.1f}; "
      f"states recovered {np.mean(label[decoded] == truth):.1%}")
print("fitted means, in the generator's order:", fresh.means_[np.argsort(label)].round(2).tolist())

# %%
# Measured
# --------
# One EM iteration and ``score`` against hmmlearn's two implementations in interleaved rounds
# (speed-ups in CPU time, higher is better; ``benchmarks/peers/hmm_emissions.py``).
#
# .. varorder-results:: Dense-chain engine
#    :systems: GaussianHMM; GaussianHSMM

# %%
# Limits
# ------
# * One short series: the regimes are a description of these 202 quarters, not a forecast
#   model; a different seed can land EM in another local optimum (compare ``score``), as in
#   hmmlearn — fit a few seeds and keep the best.
# * The HSMM ends each sequence at a segment boundary (no right-censoring of the last stay) and
#   has no filtered probabilities; its negative-binomial durations fit by a numerical M-step
#   that costs more per iteration than the nonparametric and Poisson ones.
