#!/usr/bin/env python3
"""The coefficients of the CPU kernel's GELU (src/cpu/gelu.rs): erf(z) ~ z P(z^2) / Q(z^2) on
[0, 3.9], P of degree 6 and Q of degree 5 with Q(0) = 1, by Lawson's iteration (weighted least
squares of the linearised problem) in float64. Of the 25 iterates with the smallest largest
error in float64, keeps the one whose GELU, evaluated in f32 as the kernel does, has the
smallest worst error on a grid of 1e-5 (relative to max(1, |x|); the kernel's test asks below
2e-7), and prints that error and the coefficients as f32.
The kernel's evaluation: multiplies and adds rounded one at a time, z clamped to [-4, 4],
h = (1 - min(|quotient|, 1)) / 2 (the normal tail beyond |x|, exact in f32 once |quotient| >=
1/2), and GELU = x h below zero, x - x h above, so that neither side adds a rounding near 1.
Needs numpy: scripts/install-tools.sh puts it in ~/.cache/headlab-tools/venv.
    ~/.cache/headlab-tools/venv/bin/python scripts/fit-erf.py
"""
from math import erf, sqrt

import numpy as np

P_DEGREE, Q_DEGREE, Z_MAX, CLAMP = 6, 5, 3.9, 4.0
f32 = np.float32
verf = np.vectorize(erf)


def iterates(count=150):
    z = np.unique(np.concatenate([np.linspace(0, Z_MAX, 20001),
                                  np.cos(np.linspace(0, np.pi, 4001)) * Z_MAX / 2 + Z_MAX / 2]))
    w, f = z * z, verf(z)
    weight, q_value, kept = np.ones_like(z), np.ones_like(z), []
    for _ in range(count):
        # z P(w) - f (Q(w) - 1) = f, each row divided by the last Q(w).
        a = np.hstack([z[:, None] * w[:, None] ** np.arange(P_DEGREE + 1),
                       -f[:, None] * w[:, None] ** np.arange(1, Q_DEGREE + 1)])
        scale = (weight / q_value)[:, None]
        c, *_ = np.linalg.lstsq(a * scale, f * scale[:, 0], rcond=None)
        p, q = c[:P_DEGREE + 1], np.concatenate([[1.0], c[P_DEGREE + 1:]])
        q_value = np.polyval(q[::-1], w)
        error = z * np.polyval(p[::-1], w) / q_value - f
        worst = np.abs(error).max()
        kept.append((worst, p.astype(f32), q.astype(f32)))
        weight = weight * (np.abs(error) / worst + 1e-3)
        weight /= weight.mean()
    return sorted(kept, key=lambda t: t[0])[:25]


def horner(c, w):
    v = c[-1]
    for k in c[-2::-1]:
        v = f32(f32(v * w) + k)
    return v


def gelu_f32(x, p, q):
    z = np.clip(f32(x * f32(1 / sqrt(2))), f32(-CLAMP), f32(CLAMP))
    w = f32(z * z)
    quotient = f32(f32(z * horner(p, w)) / horner(q, w))
    h = f32(f32(f32(1) - np.minimum(np.abs(quotient), f32(1))) * f32(0.5))
    t = f32(x * h)
    return np.where(x < 0, t, f32(x - t)).astype(f32)


def worst_error(x, p, q):
    want = 0.5 * x.astype(np.float64) * (1 + verf(x.astype(np.float64) / sqrt(2)))
    error = np.abs(gelu_f32(x, p, q) - want) / np.maximum(1, np.abs(x))
    return error.max(), x[error.argmax()]


grid = np.linspace(-12, 12, 2_400_001).astype(f32)
(fine, at), worst, p, q = min((worst_error(grid, p, q), worst, p, q) for worst, p, q in iterates())
print(f"erf's largest error in float64: {worst:.1e}")
print(f"GELU in f32: worst {fine:.3e} of max(1, |x|) at x = {at:g}")
print("P:", ", ".join(repr(float(v)) for v in p))
print("Q:", ", ".join(repr(float(v)) for v in q))
