"""What numpy's transparent-huge-page hint costs on this machine: ``NUMPY_MADVISE_HUGEPAGE`` 1 against 0.

numpy asks the kernel for transparent huge pages on every large allocation (``madvise(MADV_HUGEPAGE)``,
on by default on Linux). Where ``/sys/kernel/mm/transparent_hugepage/defrag`` is ``madvise`` the
kernel then compacts memory synchronously on the first touch of such a region, so a fresh large
array can cost far more to fill than the arithmetic that fills it. The Makefile sets
``NUMPY_MADVISE_HUGEPAGE=0`` for ``make run`` and ``make test``; this benchmark is the measurement
behind it. The hint changes where memory comes from, never a computed bit.

Each measurement runs in a fresh interpreter (numpy reads the variable when it loads; the stage
and test processes are short-lived, so a process's first touch of new memory is what they pay), one
BLAS thread, process CPU time: ``first_astype_seconds`` is the process's first ``uint8 → float64``
copy of an n × 784 array (Fashion-MNIST's 70 000 × 784), the allocation a loader makes;
``second_astype_seconds`` the same copy again once the first is freed (memory the process already
touched); ``in_place_seconds`` is the unit, one in-place multiply of that float64 array (the same
arithmetic volume, no allocation). Medians, ranges and means over ``--repeats`` interpreters per
setting: whether a first touch is slow depends on how fragmented the machine's free memory is at
that moment, so the mean (what many short processes pay) is the figure to compare.

Run: ``python benchmarks/bench_hugepages.py [--out FILE]`` → ``reports/bench/numpy_hugepages.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

_CHILD = textwrap.dedent("""
    import json, sys, time
    import numpy as np
    n = int(sys.argv[1])
    x = np.random.default_rng(0).integers(0, 256, (n, 784), dtype=np.uint8)
    out = {}
    for name in ("first", "second"):
        c = time.process_time(); a = x.astype(np.float64); out[name] = time.process_time() - c
        c = time.process_time(); np.multiply(a, 1.0 / 255.0, out=a); out["in_place"] = time.process_time() - c
        del a
    print(json.dumps(out))
""")


def _kernel(name: str) -> str | None:
    path = Path("/sys/kernel/mm/transparent_hugepage") / name
    return path.read_text().strip() if path.is_file() else None


def measure(setting: str, n: int, repeats: int) -> dict:
    env = {**os.environ, "NUMPY_MADVISE_HUGEPAGE": setting, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    runs = [json.loads(subprocess.run([sys.executable, "-c", _CHILD, str(n)], env=env, capture_output=True,
                                      text=True, check=True).stdout) for _ in range(repeats)]
    row: dict = {"numpy_madvise_hugepage": setting, "repeats": repeats}
    for key in ("first", "second", "in_place"):
        values = sorted(r[key] for r in runs)
        name = "in_place_seconds" if key == "in_place" else f"{key}_astype_seconds"
        row[name], row[f"{name}_range"] = values[len(values) // 2], [values[0], values[-1]]
        row[f"{name}_mean"] = sum(values) / len(values)
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=70_000, help="rows of the n × 784 array")
    parser.add_argument("--repeats", type=int, default=15, help="fresh interpreters per setting")
    parser.add_argument("--out", type=Path, default=REPO / "reports" / "bench" / "numpy_hugepages.json")
    args = parser.parse_args()
    import numpy

    load = os.getloadavg()
    rows = [measure(s, args.records, args.repeats) for s in ("1", "0")]
    on, off = rows
    result = {
        "benchmark": "numpy_hugepages",
        "shape": [args.records, 784],
        "numpy": numpy.__version__,
        "transparent_hugepage": {"enabled": _kernel("enabled"), "defrag": _kernel("defrag")},
        "rows": rows,
        "first_astype_mean_ratio_hint_on_over_off": on["first_astype_seconds_mean"] / off["first_astype_seconds_mean"],
        "timing": "process CPU time, one BLAS thread, median over repeats fresh interpreters per setting",
        "load_average": [list(load), list(os.getloadavg())],
        "cpu_count": os.cpu_count(),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
