#!/usr/bin/python3
"""Generate tests/data/pytorch_distributions_reference.json: torch.distributions' Normal,
Uniform, Exponential, Laplace, Gamma, Chi2, Beta, Dirichlet, StudentT, Poisson, Bernoulli,
Categorical,
Independent, MixtureSameFamily, MultivariateNormal, Cauchy, HalfNormal, LogNormal, Gumbel,
Geometric and OneHotCategorical —
log_prob, cdf, icdf, entropy, moments — and
kl_divergence between each pair ferry has a closed form for, with the gradient of every
floating input (tests/test_distributions.cpp).

Regenerate (from the repository root), as tools/gen_math_reference.py:

    /usr/bin/python3 tools/gen_distributions_reference.py

Format: that of tools/gen_conv_reference.py (reference_common.op_case). The op names the
distribution and the method; attrs say which parameter a Bernoulli or Categorical is given
(param: probs or logits), Independent's reinterpreted dims (ndims), and a value through which
PyTorch has no gradient (value, value_shape: a Uniform's log_prob, a Bernoulli's 0/1), and
the matrix a MultivariateNormal is given (matrix: covariance_matrix, precision_matrix or
scale_tril).
"""

import os
import sys

import torch
from torch import distributions as D

from reference_common import Gen

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_reference as ref  # noqa: E402  (leaf_case, write_case_file)

OUT_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data",
                        "pytorch_distributions_reference.json")
TOL = {"rtol": 1e-4, "atol": 1e-5}
CASES = []


def case(name, op, inputs, fn, **attrs):
    """inputs: tensors (floating ones are made leaves requiring grad) or (shape, lo, hi)."""
    ref.leaf_case(CASES, name, op, inputs, fn, TOL, attrs)


def value_attrs(t):
    return {"value": t.reshape(-1).tolist(), "value_shape": list(t.shape)}


def make(kind, param, p):
    return kind(probs=p) if param == "probs" else kind(logits=p)


def main():
    i64 = lambda v: torch.tensor(v, dtype=torch.int64)  # noqa: E731
    # Normal: broadcasting parameters and values, every method.
    case("normal_log_prob", "normal_log_prob", [([3, 4], -1, 1), ([3, 4], 0.5, 2), ([3, 4], -3, 3)],
         lambda m, s, v: D.Normal(m, s).log_prob(v))
    case("normal_log_prob_broadcast", "normal_log_prob", [([4], -1, 1), ([3, 1], 0.5, 2),
                                                          ([2, 3, 4], -3, 3)],
         lambda m, s, v: D.Normal(m, s).log_prob(v))
    case("normal_cdf", "normal_cdf", [([5], -1, 1), ([5], 0.5, 2), ([2, 5], -3, 3)],
         lambda m, s, v: D.Normal(m, s).cdf(v))
    case("normal_icdf", "normal_icdf", [([5], -1, 1), ([5], 0.5, 2), ([2, 5], 0.02, 0.98)],
         lambda m, s, v: D.Normal(m, s).icdf(v))
    # Entropies do not depend on loc (PyTorch gives it no gradient): loc is 0 there.
    case("normal_entropy", "normal_entropy", [([2, 3], 0.1, 3)],
         lambda s: D.Normal(torch.zeros_like(s), s).entropy())
    # Uniform: values inside [low, high) (PyTorch gives log_prob no gradient in the value).
    v = Gen("uniform_value").uniform([2, 3], -0.9, 0.9)
    case("uniform_log_prob", "uniform_log_prob", [([3], -2, -1), ([3], 1, 2)],
         lambda lo, hi: D.Uniform(lo, hi).log_prob(v), **value_attrs(v))
    case("uniform_cdf", "uniform_cdf", [([3], -2, -1), ([3], 1, 2), ([2, 3], -2.5, 2.5)],
         lambda lo, hi, x: D.Uniform(lo, hi, validate_args=False).cdf(x), validate=False)
    case("uniform_icdf", "uniform_icdf", [([3], -2, -1), ([3], 1, 2), ([2, 3], 0, 1)],
         lambda lo, hi, x: D.Uniform(lo, hi).icdf(x))
    case("uniform_entropy", "uniform_entropy", [([4], -2, -1), ([4], 1, 2)],
         lambda lo, hi: D.Uniform(lo, hi).entropy())
    # Exponential and Laplace.
    case("exponential_log_prob", "exponential_log_prob", [([4], 0.5, 3), ([3, 4], 0, 4)],
         lambda r, x: D.Exponential(r).log_prob(x))
    case("exponential_cdf", "exponential_cdf", [([4], 0.5, 3), ([3, 4], 0, 4)],
         lambda r, x: D.Exponential(r).cdf(x))
    case("exponential_icdf", "exponential_icdf", [([4], 0.5, 3), ([3, 4], 0, 0.99)],
         lambda r, x: D.Exponential(r).icdf(x))
    case("exponential_entropy", "exponential_entropy", [([4], 0.1, 5)],
         lambda r: D.Exponential(r).entropy())
    case("exponential_moments", "exponential_moments", [([4], 0.1, 5)],
         lambda r: torch.stack([D.Exponential(r).mean, D.Exponential(r).variance]))
    case("laplace_log_prob", "laplace_log_prob", [([4], -1, 1), ([2, 1], 0.5, 2), ([2, 4], -3, 3)],
         lambda m, b_, x: D.Laplace(m, b_).log_prob(x))
    case("laplace_cdf", "laplace_cdf", [([4], -1, 1), ([4], 0.5, 2), ([2, 4], -3, 3)],
         lambda m, b_, x: D.Laplace(m, b_).cdf(x))
    case("laplace_icdf", "laplace_icdf", [([4], -1, 1), ([4], 0.5, 2), ([2, 4], 0.02, 0.98)],
         lambda m, b_, x: D.Laplace(m, b_).icdf(x))
    case("laplace_entropy", "laplace_entropy", [([4], 0.1, 3)],
         lambda b_: D.Laplace(torch.zeros_like(b_), b_).entropy())
    # The Gamma family and Poisson (PyTorch gives a Poisson's log_prob no gradient in the value).
    case("gamma_log_prob", "gamma_log_prob", [([4], 0.3, 4), ([3, 1], 0.5, 2), ([3, 4], 0.05, 6)],
         lambda c, r, x: D.Gamma(c, r).log_prob(x))
    case("gamma_entropy", "gamma_entropy", [([5], 0.2, 8), ([5], 0.5, 3)],
         lambda c, r: D.Gamma(c, r).entropy())
    case("gamma_moments", "gamma_moments", [([5], 0.2, 8), ([5], 0.5, 3)],
         lambda c, r: torch.stack([D.Gamma(c, r).mean, D.Gamma(c, r).variance]))
    case("beta_log_prob", "beta_log_prob", [([4], 0.5, 4), ([4], 0.5, 4), ([2, 4], 0.02, 0.98)],
         lambda a, b_, x: D.Beta(a, b_).log_prob(x))
    case("beta_entropy", "beta_entropy", [([5], 0.3, 5), ([5], 0.3, 5)],
         lambda a, b_: D.Beta(a, b_).entropy())
    case("beta_moments", "beta_moments", [([5], 0.3, 5), ([5], 0.3, 5)],
         lambda a, b_: torch.stack([D.Beta(a, b_).mean, D.Beta(a, b_).variance]))
    simplex = torch.softmax(Gen("dirichlet_value").uniform([3, 4], -2, 2), -1)
    case("dirichlet_log_prob", "dirichlet_log_prob", [([2, 1, 4], 0.3, 4), simplex],
         lambda c, x: D.Dirichlet(c).log_prob(x))
    case("dirichlet_entropy", "dirichlet_entropy", [([2, 5], 0.3, 4)],
         lambda c: D.Dirichlet(c).entropy())
    case("dirichlet_moments", "dirichlet_moments", [([2, 5], 0.3, 4)],
         lambda c: torch.stack([D.Dirichlet(c).mean, D.Dirichlet(c).variance]))
    case("chi2_log_prob", "chi2_log_prob", [([4], 0.5, 9), ([3, 4], 0.05, 12)],
         lambda k, x: D.Chi2(k).log_prob(x))
    case("chi2_entropy", "chi2_entropy", [([4], 0.5, 9)], lambda k: D.Chi2(k).entropy())
    case("studentt_log_prob", "studentt_log_prob",
         [([4], 0.5, 12), ([4], -1, 1), ([3, 1], 0.5, 2), ([3, 4], -4, 4)],
         lambda df, m, s, x: D.StudentT(df, m, s).log_prob(x))
    case("studentt_entropy", "studentt_entropy", [([5], 0.5, 12), ([5], 0.5, 2)],
         lambda df, s: D.StudentT(df, torch.zeros_like(s), s).entropy())
    # df on both sides of 1 and 2: the mean NaN below 1, the variance inf below 2.
    dfs = torch.tensor([0.5, 1.5, 2.5, 8.0])
    case("studentt_moments", "studentt_moments", [([4], -1, 1), ([4], 0.5, 2)],
         lambda m, s: torch.stack([D.StudentT(dfs, m, s).mean, D.StudentT(dfs, m, s).variance]),
         df=dfs.tolist())
    counts = torch.tensor([[0.0, 1.0, 3.0, 7.0], [2.0, 0.0, 12.0, 30.0]])
    case("poisson_log_prob", "poisson_log_prob", [([4], 0.2, 20)],
         lambda r: D.Poisson(r).log_prob(counts), **value_attrs(counts))
    # Bernoulli from probabilities and from logits.
    b = torch.tensor([[0.0, 1.0, 1.0, 0.0], [1.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 1.0]])
    for param, lo, hi in [("probs", 0.05, 0.95), ("logits", -4, 4)]:
        case(f"bernoulli_log_prob_{param}", "bernoulli_log_prob", [([3, 4], lo, hi)],
             lambda p, param=param: make(D.Bernoulli, param, p).log_prob(b), param=param,
             **value_attrs(b))
        case(f"bernoulli_entropy_{param}", "bernoulli_entropy", [([5], lo, hi)],
             lambda p, param=param: make(D.Bernoulli, param, p).entropy(), param=param)
    # Categorical: unnormalized probabilities, logits, values broadcast against the batch.
    for param, lo, hi in [("probs", 0.05, 1), ("logits", -3, 3)]:
        case(f"categorical_log_prob_{param}", "categorical_log_prob",
             [([3, 5], lo, hi), i64([[0, 4, 2], [1, 1, 3]])],
             lambda p, x, param=param: make(D.Categorical, param, p).log_prob(x), param=param)
        case(f"categorical_entropy_{param}", "categorical_entropy", [([2, 3, 4], lo, hi)],
             lambda p, param=param: make(D.Categorical, param, p).entropy(), param=param)
    # Independent: a diagonal Gaussian over the last dim, and over the last two.
    for n in [1, 2]:
        case(f"independent_normal_log_prob_{n}", "independent_normal_log_prob",
             [([2, 3, 4], -1, 1), ([2, 3, 4], 0.5, 2), ([5, 2, 3, 4], -3, 3)],
             lambda m, s, x, n=n: D.Independent(D.Normal(m, s), n).log_prob(x), ndims=n)
    case("independent_normal_entropy", "independent_normal_entropy",
         [([2, 3], 0.5, 2)],
         lambda s: D.Independent(D.Normal(torch.zeros_like(s), s), 1).entropy(), ndims=1)
    # Mixtures of 3 scalar Normals (batch [2]) and of 3 diagonal Gaussians over 2-vectors.
    case("mixture_normal_log_prob", "mixture_normal_log_prob",
         [([2, 3], -2, 2), ([2, 3], -1, 1), ([2, 3], 0.5, 1.5), ([4, 2], -3, 3)],
         lambda w, m, s, x: D.MixtureSameFamily(D.Categorical(logits=w),
                                                D.Normal(m, s)).log_prob(x))
    case("mixture_normal_cdf", "mixture_normal_cdf",
         [([2, 3], -2, 2), ([2, 3], -1, 1), ([2, 3], 0.5, 1.5), ([4, 2], -3, 3)],
         lambda w, m, s, x: D.MixtureSameFamily(D.Categorical(logits=w), D.Normal(m, s)).cdf(x))
    case("mixture_normal_moments", "mixture_normal_moments",
         [([2, 3], -2, 2), ([2, 3], -1, 1), ([2, 3], 0.5, 1.5)],
         lambda w, m, s: torch.stack([
             D.MixtureSameFamily(D.Categorical(logits=w), D.Normal(m, s)).mean,
             D.MixtureSameFamily(D.Categorical(logits=w), D.Normal(m, s)).variance]))
    case("mixture_independent_log_prob", "mixture_independent_log_prob",
         [([3], -2, 2), ([3, 2], -1, 1), ([3, 2], 0.5, 1.5), ([5, 2], -3, 3)],
         lambda w, m, s, x: D.MixtureSameFamily(D.Categorical(logits=w),
                                                D.Independent(D.Normal(m, s), 1)).log_prob(x))
    case("mixture_independent_moments", "mixture_independent_moments",
         [([3], -2, 2), ([3, 2], -1, 1), ([3, 2], 0.5, 1.5)],
         lambda w, m, s: torch.stack([
             D.MixtureSameFamily(D.Categorical(logits=w), D.Independent(D.Normal(m, s), 1)).mean,
             D.MixtureSameFamily(D.Categorical(logits=w),
                                 D.Independent(D.Normal(m, s), 1)).variance]))
    # KL divergences.
    case("kl_normal_normal", "kl_normal_normal",
         [([4], -1, 1), ([4], 0.5, 2), ([3, 4], -1, 1), ([3, 4], 0.5, 2)],
         lambda m1, s1, m2, s2: D.kl_divergence(D.Normal(m1, s1), D.Normal(m2, s2)))
    # q's interval holds p's in the first two columns, not in the last two (inf).
    lo1, hi1 = torch.tensor([-1.0, -0.5, -1.0, -3.0]), torch.tensor([1.0, 0.5, 1.0, 0.0])
    lo2, hi2 = torch.tensor([-2.0, -0.7, -0.5, -4.0]), torch.tensor([1.5, 0.9, 2.0, -1.0])
    case("kl_uniform_uniform", "kl_uniform_uniform", [lo1, hi1, lo2, hi2],
         lambda a, b_, c, d: D.kl_divergence(D.Uniform(a, b_), D.Uniform(c, d)))
    for param, lo, hi in [("probs", 0.05, 0.95), ("logits", -4, 4)]:
        case(f"kl_bernoulli_{param}", "kl_bernoulli", [([6], lo, hi), ([6], lo, hi)],
             lambda p, q, param=param: D.kl_divergence(make(D.Bernoulli, param, p),
                                                       make(D.Bernoulli, param, q)),
             param=param)
        case(f"kl_categorical_{param}", "kl_categorical", [([3, 5], lo, hi), ([5], lo, hi)],
             lambda p, q, param=param: D.kl_divergence(make(D.Categorical, param, p),
                                                       make(D.Categorical, param, q)),
             param=param)
    case("kl_exponential", "kl_exponential", [([5], 0.2, 4), ([5], 0.2, 4)],
         lambda a, b_: D.kl_divergence(D.Exponential(a), D.Exponential(b_)))
    case("kl_laplace", "kl_laplace", [([5], -1, 1), ([5], 0.5, 2), ([5], -1, 1), ([5], 0.5, 2)],
         lambda m1, s1, m2, s2: D.kl_divergence(D.Laplace(m1, s1), D.Laplace(m2, s2)))
    case("kl_gamma", "kl_gamma", [([5], 0.3, 4), ([5], 0.5, 2), ([5], 0.3, 4), ([5], 0.5, 2)],
         lambda c1, r1, c2, r2: D.kl_divergence(D.Gamma(c1, r1), D.Gamma(c2, r2)))
    case("kl_beta", "kl_beta", [([5], 0.3, 4), ([5], 0.3, 4), ([5], 0.3, 4), ([5], 0.3, 4)],
         lambda a1, b1, a2, b2: D.kl_divergence(D.Beta(a1, b1), D.Beta(a2, b2)))
    case("kl_dirichlet", "kl_dirichlet", [([3, 4], 0.3, 4), ([4], 0.3, 4)],
         lambda c1, c2: D.kl_divergence(D.Dirichlet(c1), D.Dirichlet(c2)))
    case("kl_poisson", "kl_poisson", [([5], 0.2, 9), ([5], 0.2, 9)],
         lambda r1, r2: D.kl_divergence(D.Poisson(r1), D.Poisson(r2)))
    case("kl_independent_normal", "kl_independent_normal",
         [([2, 3], -1, 1), ([2, 3], 0.5, 2), ([2, 3], -1, 1), ([2, 3], 0.5, 2)],
         lambda m1, s1, m2, s2: D.kl_divergence(D.Independent(D.Normal(m1, s1), 1),
                                                D.Independent(D.Normal(m2, s2), 1)), ndims=1)
    # MultivariateNormal from each of its matrices; batch dims from loc, the matrix and the value.
    def spd(name, shape):
        x = Gen(name).uniform(shape, -1, 1)
        return torch.round((x @ x.transpose(-2, -1) + torch.eye(shape[-1])) * 1000) / 1000

    def lower(name, shape):
        a = torch.tril(Gen(name).uniform(shape, -1, 1), -1)
        return a + torch.diag_embed(Gen(name + "/d").uniform(shape[:-1], 0.5, 1.5))

    mvn = D.MultivariateNormal
    case("mvn_covariance_log_prob", "mvn_log_prob",
         [Gen("mvn_cov/loc").uniform([3], -1, 1), spd("mvn_cov/cov", [3, 3]),
          Gen("mvn_cov/value").uniform([4, 3], -2, 2)],
         lambda m, c, v: mvn(m, covariance_matrix=c).log_prob(v), matrix="covariance_matrix")
    case("mvn_precision_log_prob", "mvn_log_prob",
         [Gen("mvn_prec/loc").uniform([2, 3], -1, 1), spd("mvn_prec/p", [3, 3]),
          Gen("mvn_prec/value").uniform([3], -2, 2)],
         lambda m, p, v: mvn(m, precision_matrix=p).log_prob(v), matrix="precision_matrix")
    case("mvn_scale_tril_log_prob", "mvn_log_prob",
         [Gen("mvn_tril/loc").uniform([4], -1, 1), lower("mvn_tril/l", [2, 4, 4]),
          Gen("mvn_tril/value").uniform([5, 1, 4], -2, 2)],
         lambda m, l, v: mvn(m, scale_tril=l).log_prob(v), matrix="scale_tril")
    # (loc, which these do not depend on, is zeros of the matrix's batch shape and k.)
    def at_zero(c, **kw):
        return mvn(torch.zeros(c.shape[:-1]), **kw)

    case("mvn_entropy_moments", "mvn_entropy_moments", [spd("mvn_ent/cov", [2, 3, 3])],
         lambda c: torch.cat([at_zero(c, covariance_matrix=c).entropy(),
                              at_zero(c, covariance_matrix=c).variance.reshape(-1),
                              at_zero(c, covariance_matrix=c).precision_matrix.reshape(-1)]),
         matrix="covariance_matrix")
    case("mvn_precision_covariance", "mvn_covariance", [spd("mvn_pc/p", [3, 3])],
         lambda p: at_zero(p, precision_matrix=p).covariance_matrix, matrix="precision_matrix")
    case("kl_mvn", "kl_mvn",
         [Gen("kl_mvn/loc_p").uniform([3], -1, 1), spd("kl_mvn/cov_p", [3, 3]),
          Gen("kl_mvn/loc_q").uniform([2, 3], -1, 1), lower("kl_mvn/l_q", [3, 3])],
         lambda m1, c1, m2, l2: D.kl_divergence(mvn(m1, covariance_matrix=c1),
                                                mvn(m2, scale_tril=l2)))
    # Cauchy, HalfNormal, LogNormal, Gumbel: every method; Geometric, OneHotCategorical.
    for key, kind, lo, hi in [("cauchy", D.Cauchy, -4, 4), ("lognormal", D.LogNormal, 0.05, 5),
                              ("gumbel", D.Gumbel, -3, 4)]:
        params = [([3, 4], -1, 1), ([3, 4], 0.5, 2)]
        case(f"{key}_log_prob", f"{key}_log_prob", params + [([2, 3, 4], lo, hi)],
             lambda m, s_, v, kind=kind: kind(m, s_).log_prob(v))
        case(f"{key}_cdf", f"{key}_cdf", params + [([3, 4], lo, hi)],
             lambda m, s_, v, kind=kind: kind(m, s_).cdf(v))
        case(f"{key}_icdf", f"{key}_icdf", params + [([3, 4], 0.02, 0.98)],
             lambda m, s_, v, kind=kind: kind(m, s_).icdf(v))
    case("cauchy_entropy", "cauchy_entropy", [([5], 0.2, 3)],
         lambda s_: D.Cauchy(torch.zeros(5), s_).entropy())
    for key, kind in [("lognormal", D.LogNormal), ("gumbel", D.Gumbel)]:
        case(f"{key}_entropy_moments", f"{key}_entropy_moments", [([4], -1, 1), ([4], 0.3, 1.5)],
             lambda m, s_, kind=kind: torch.stack([kind(m, s_).entropy(), kind(m, s_).mean,
                                                   kind(m, s_).variance]))
    case("halfnormal_log_prob", "halfnormal_log_prob", [([5], 0.5, 2), ([2, 5], 0.01, 4)],
         lambda s_, v: D.HalfNormal(s_).log_prob(v))
    case("halfnormal_cdf", "halfnormal_cdf", [([5], 0.5, 2), ([5], 0.01, 4)],
         lambda s_, v: D.HalfNormal(s_).cdf(v))
    case("halfnormal_icdf", "halfnormal_icdf", [([5], 0.5, 2), ([5], 0.02, 0.98)],
         lambda s_, v: D.HalfNormal(s_).icdf(v))
    case("halfnormal_entropy_moments", "halfnormal_entropy_moments", [([4], 0.3, 3)],
         lambda s_: torch.stack([D.HalfNormal(s_).entropy(), D.HalfNormal(s_).mean,
                                 D.HalfNormal(s_).variance]))
    failures = torch.tensor([[0.0, 1.0, 4.0, 9.0], [3.0, 0.0, 0.0, 20.0]])
    for param, lo, hi in [("probs", 0.05, 0.95), ("logits", -4, 4)]:
        case(f"geometric_log_prob_{param}", "geometric_log_prob", [([4], lo, hi)],
             lambda p, param=param: make(D.Geometric, param, p).log_prob(failures), param=param,
             **value_attrs(failures))
        case(f"geometric_entropy_moments_{param}", "geometric_entropy_moments", [([5], lo, hi)],
             lambda p, param=param: torch.stack([make(D.Geometric, param, p).entropy(),
                                                 make(D.Geometric, param, p).mean,
                                                 make(D.Geometric, param, p).variance]),
             param=param)
    hot = torch.tensor([[[0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0], [1.0, 0.0, 0.0, 0.0]]] * 2)
    case("onehot_log_prob", "onehot_log_prob", [([3, 4], -2, 2)],
         lambda l: D.OneHotCategorical(logits=l).log_prob(hot), param="logits", **value_attrs(hot))
    case("onehot_entropy_moments", "onehot_entropy_moments", [([2, 3], 0.1, 2)],
         lambda p: torch.cat([D.OneHotCategorical(probs=p).entropy(),
                              D.OneHotCategorical(probs=p).mean.reshape(-1),
                              D.OneHotCategorical(probs=p).variance.reshape(-1)]))
    # Their KL divergences.
    for key, kind in [("lognormal", D.LogNormal), ("gumbel", D.Gumbel)]:
        case(f"kl_{key}", f"kl_{key}", [([5], -1, 1), ([5], 0.5, 2), ([5], -1, 1), ([5], 0.5, 2)],
             lambda m1, s1, m2, s2, kind=kind: D.kl_divergence(kind(m1, s1), kind(m2, s2)))
    case("kl_halfnormal", "kl_halfnormal", [([5], 0.3, 3), ([5], 0.3, 3)],
         lambda s1, s2: D.kl_divergence(D.HalfNormal(s1), D.HalfNormal(s2)))
    case("kl_geometric", "kl_geometric", [([5], 0.05, 0.95), ([5], 0.05, 0.95)],
         lambda p, q: D.kl_divergence(D.Geometric(p), D.Geometric(q)))
    case("kl_onehot", "kl_onehot", [([3, 4], -2, 2), ([4], -2, 2)],
         lambda p, q: D.kl_divergence(D.OneHotCategorical(logits=p), D.OneHotCategorical(logits=q)),
         param="logits")
    ref.write_case_file(OUT_PATH, CASES)


if __name__ == "__main__":
    sys.exit(main())
