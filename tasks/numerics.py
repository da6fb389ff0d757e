"""One CPU code path for the numerical libraries, so that stage outputs, and the input keys that
hash them, are bit-identical on every x86-64 CPU with AVX2.

The libraries choose their kernels by CPU when they load: MKL (torch's BLAS) runs AVX-512 kernels
on Intel CPUs that have them and AVX2 kernels on AMD CPUs; ATen (torch's own kernels) runs AVX-512
or AVX2 kernels; OpenBLAS (numpy's BLAS) runs SkylakeX, Haswell or Zen kernels. Each kernel sums
in its own order, so the last bits of a float result depend on the CPU: the sentence embeddings
and the GCA federations (torch) and the PCA embedding (OpenBLAS) come out different on another
CPU, their digests change, and every cell downstream of them recomputes, with results that differ
in the 4th digit. OpenBLAS's thread count enters too: the PCA embedding computed with one and
with two OpenBLAS threads differs in its last bits. So does MKL's inside torch when two cells run
at once in threads: with ``MKL_NUM_THREADS=2`` a GCA cell run beside another one gives other bits
than the same cell run alone (``tests/gca/test_concurrency.py`` fails), although each cell runs
with one torch thread; with one MKL thread they agree.

:func:`pin_cpu_code_paths` fixes the AVX2 code path of each library through its documented
environment variable (``MKL_CBWR``: MKL's conditional numerical reproducibility; ``ATEN_CPU_CAPABILITY``;
``OPENBLAS_CORETYPE``; ``ONEDNN_MAX_CPU_ISA``) and one OpenBLAS and one MKL thread (``OPENBLAS_NUM_THREADS``, ``MKL_NUM_THREADS``;
cells already run with one BLAS thread each). They are read when a library loads, so the pin
must happen before numpy or torch is imported: importing :mod:`tasks` does it. A variable the
user already set is kept. On other architectures (arm64) nothing is set: results there are
reproducible on the same kind of machine only.
"""

from __future__ import annotations

import os
import platform
from collections.abc import MutableMapping

#: variable → value: the AVX2 code path of MKL, ATen, OpenBLAS and oneDNN.
AVX2_CODE_PATHS = {
    "MKL_CBWR": "AVX2",
    "ATEN_CPU_CAPABILITY": "avx2",
    "OPENBLAS_CORETYPE": "Haswell",
    "ONEDNN_MAX_CPU_ISA": "AVX2",
}

#: variable → value: thread counts that enter results.
RESULT_THREADS = {"OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def pin_cpu_code_paths(environ: MutableMapping[str, str] | None = None, machine: str | None = None) -> dict[str, str]:
    """Set :data:`RESULT_THREADS` and, on x86-64, :data:`AVX2_CODE_PATHS` in ``environ`` (default
    ``os.environ``) where unset; returns the variables set now."""
    environ = os.environ if environ is None else environ
    wanted = dict(RESULT_THREADS)
    if (machine or platform.machine()).lower() in ("x86_64", "amd64"):
        wanted.update(AVX2_CODE_PATHS)
    added = {k: v for k, v in wanted.items() if k not in environ}
    environ.update(added)
    return added
