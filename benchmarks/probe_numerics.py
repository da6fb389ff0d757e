"""Digests of the kernels whose last bits decide whether another machine reuses this project's cells.

Cells are reused by input keys that hash their input files (``tasks/numerics.py``), so a kernel
that sums in another order on another CPU changes an output's bytes and every key downstream.
This probe computes a few fixed, seeded products with the kernels the stages use, in a fresh
process that imports :mod:`tasks` first (its code-path pins apply, as in every stage process), and
writes the SHA-256 of each result's bytes beside the CPU's identity::

    python benchmarks/probe_numerics.py [--out reports/bench/numerics_probe.json] [--set VAR=VALUE ...]

Run it on two machines and compare the ``digests``: a kernel whose digest differs is one whose
results the pins do not make machine-independent. ``--set`` adds an environment variable before
anything loads (e.g. ``--set MKL_CBWR=COMPATIBLE``), to try another pin.

Kernels (float32 for torch, as the GCA models and the sentence encoder run; float64 for numpy):

* ``openblas_gemm``: numpy ``A @ B``, A 257 × 300, B 300 × 129 (OpenBLAS dgemm);
* ``openblas_svd``: ``numpy.linalg.svd`` of A (LAPACK through OpenBLAS: the PCA embedding's path);
* ``torch_mm``: ``torch.mm`` of the float32 copies (MKL sgemm);
* ``torch_linear``: ``torch.nn.functional.linear`` (x W^T + b), the layers of the models;
* ``torch_softmax``, ``torch_tanh``, ``torch_layer_norm``: ATen's vectorised kernels;
* ``torch_mlp_step``: one forward and backward pass of a 300-64-300 MLP (the gradient's bytes).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

#: the probe itself, run in a fresh interpreter (the pins must precede numpy and torch)
_CHILD = r"""
import hashlib, json, os, sys
sys.path.insert(0, sys.argv[1])
import tasks  # noqa: F401 - first: pins the CPU code paths (tasks.numerics)
import numpy as np
import torch

torch.set_num_threads(1)

def digest(a) -> str:
    a = a.detach().numpy() if isinstance(a, torch.Tensor) else a
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()

rng = np.random.default_rng(0)
a, b = rng.standard_normal((257, 300)), rng.standard_normal((300, 129))
ta, tb = torch.from_numpy(a.astype(np.float32)), torch.from_numpy(b.astype(np.float32))
gen = torch.Generator().manual_seed(0)
w, bias = torch.randn(64, 300, generator=gen), torch.randn(64, generator=gen)
mlp = torch.nn.Sequential(torch.nn.Linear(300, 64), torch.nn.ReLU(), torch.nn.Linear(64, 300))
with torch.no_grad():
    for p in mlp.parameters():
        p.copy_(torch.randn(p.shape, generator=gen) * 0.1)
loss = ((mlp(ta) - ta) ** 2).mean()
loss.backward()
out = {
    "openblas_gemm": digest(a @ b),
    "openblas_svd": digest(np.linalg.svd(a, full_matrices=False)[1]),
    "torch_mm": digest(torch.mm(ta, tb)),
    "torch_linear": digest(torch.nn.functional.linear(ta, w, bias)),
    "torch_softmax": digest(torch.softmax(ta, dim=1)),
    "torch_tanh": digest(torch.tanh(ta)),
    "torch_layer_norm": digest(torch.nn.functional.layer_norm(ta, (300,))),
    "torch_mlp_step": digest(torch.cat([p.grad.flatten() for p in mlp.parameters()])),
}
from tasks.numerics import AVX2_CODE_PATHS, RESULT_THREADS

pins = (*AVX2_CODE_PATHS, *RESULT_THREADS)
print(json.dumps({"digests": out, "environment": {k: os.environ.get(k) for k in pins},
                  "torch": torch.__version__, "numpy": np.__version__}))
"""


def cpu_identity() -> dict:
    """The CPU's vendor, model name and the vector extensions that select kernels (Linux's
    /proc/cpuinfo; ``platform.processor()`` elsewhere)."""
    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        return {"model": platform.processor(), "machine": platform.machine()}
    first = info.split("\n\n", 1)[0]  # the first processor's block
    fields = dict(line.split(":", 1) for line in first.splitlines() if ":" in line)
    fields = {k.strip(): v.strip() for k, v in fields.items()}
    flags = set(fields.get("flags", "").split())
    return {"vendor": fields.get("vendor_id"), "model": fields.get("model name"), "machine": platform.machine(),
            "avx2": "avx2" in flags, "avx512f": "avx512f" in flags}


def probe(extra_env: dict[str, str] | None = None) -> dict:
    """The digests of :data:`_CHILD` run in a fresh interpreter with ``extra_env`` added."""
    env = {**os.environ, **(extra_env or {})}
    proc = subprocess.run([sys.executable, "-c", _CHILD, str(REPO)], env=env, capture_output=True, text=True,
                          timeout=300)
    if proc.returncode != 0:
        raise RuntimeError(f"the numerics probe failed:\n{proc.stderr[-3000:]}")
    return {**json.loads(proc.stdout.strip().splitlines()[-1]), "cpu": cpu_identity(), "set": extra_env or {}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "reports" / "bench" / "numerics_probe.json")
    parser.add_argument("--set", action="append", default=[], metavar="VAR=VALUE",
                        help="an environment variable for the probe (repeatable)")
    args = parser.parse_args(argv)
    extra = {}
    for item in args.set:
        name, sep, value = item.partition("=")
        if not sep or not name:
            parser.error(f"--set: expected VAR=VALUE, got {item!r}")
        extra[name] = value
    result = probe(extra)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    cpu = result["cpu"]
    print(f"{cpu.get('vendor')} {cpu.get('model')} (avx2 {cpu.get('avx2')}, avx512f {cpu.get('avx512f')}); "
          f"torch {result['torch']}, numpy {result['numpy']}; set {extra or 'nothing'} -> {args.out}")
    for kernel, value in result["digests"].items():
        print(f"  {kernel:18s} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
