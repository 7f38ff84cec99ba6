#!/usr/bin/env python3
"""The coefficients of the CPU kernel's GELU (src/cpu/gelu.rs): erf(z) ~ z P(z^2) / Q(z^2) on
[0, 3.9], P of degree 6, Q of degree 4 with Q(0) = 1, fitted for the smallest largest error by
Lawson's iteration (weighted least squares of the linearised problem) in float64. Prints the
coefficients as f32 and GELU's worst error when they are evaluated in f32 as the kernel does
(multiplies and adds rounded one at a time, z clamped to [-4, 4] and the quotient to [-1, 1]:
in f32 the quotient passes 1 between 3.9 and 4, so every larger input gets exactly 1 and a
very negative x exactly 0), relative to max(1, |x|), on a grid of 1e-5; and the quotient at
the clamp, which must reach 1.
Needs numpy: scripts/install-tools.sh puts it in ~/.cache/headlab-tools/venv.
    ~/.cache/headlab-tools/venv/bin/python scripts/fit-erf.py
"""
from math import erf, sqrt

import numpy as np

P_DEGREE, Q_DEGREE, Z_MAX, CLAMP = 6, 4, 3.9, 4.0
verf = np.vectorize(erf)


def fit(iterations=150):
    z = np.unique(np.concatenate([np.linspace(0, Z_MAX, 20001),
                                  np.cos(np.linspace(0, np.pi, 4001)) * Z_MAX / 2 + Z_MAX / 2]))
    w, f = z * z, verf(z)
    weight, q_value, best = np.ones_like(z), np.ones_like(z), None
    for _ in range(iterations):
        # z P(w) - f (Q(w) - 1) = f, each row divided by the last Q(w).
        a = np.hstack([z[:, None] * w[:, None] ** np.arange(P_DEGREE + 1),
                       -f[:, None] * w[:, None] ** np.arange(1, Q_DEGREE + 1)])
        scale = (weight / q_value)[:, None]
        c, *_ = np.linalg.lstsq(a * scale, f * scale[:, 0], rcond=None)
        p, q = c[:P_DEGREE + 1], np.concatenate([[1.0], c[P_DEGREE + 1:]])
        q_value = np.polyval(q[::-1], w)
        error = z * np.polyval(p[::-1], w) / q_value - f
        worst = np.abs(error).max()
        if best is None or worst < best[0]:
            best = (worst, p.copy(), q.copy())
        weight = weight * (np.abs(error) / worst + 1e-3)
        weight /= weight.mean()
    return best


def gelu_f32(x, p, q):
    f = np.float32
    e = np.clip(erf_f32(np.clip((x * f(1 / sqrt(2))).astype(f), f(-CLAMP), f(CLAMP)), p, q), f(-1), f(1))
    return (f(0.5) * x * (f(1) + e)).astype(f)


def erf_f32(z, p, q):
    f = np.float32
    w = (z * z).astype(f)
    pv, qv = p[-1], q[-1]
    for c in p[-2::-1]:
        pv = (pv * w + c).astype(f)
    for c in q[-2::-1]:
        qv = (qv * w + c).astype(f)
    return ((z * pv).astype(f) / qv).astype(f)


def gelu_error(x, want, p, q):
    return np.abs(gelu_f32(x, p, q) - want) / np.maximum(1, np.abs(x))


worst, p, q = fit()
p32, q32 = p.astype(np.float32), q.astype(np.float32)
x = np.linspace(-12, 12, 2_400_001).astype(np.float32)
want = 0.5 * x.astype(np.float64) * (1 + verf(x.astype(np.float64) / sqrt(2)))
error = gelu_error(x, want, p32, q32)
print(f"erf's largest error in float64: {worst:.1e}")
print(f"GELU in f32: worst {error.max():.2e} of max(1, |x|) at x = {x[error.argmax()]:g}")
print(f"the quotient at z = {CLAMP}: {float(erf_f32(np.float32(CLAMP), p32, q32))!r} (at least 1)")
print("P:", ", ".join(repr(float(v)) for v in p32))
print("Q:", ", ".join(repr(float(v)) for v in q32))
