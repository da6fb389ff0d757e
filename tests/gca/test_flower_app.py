"""The optional Flower module must import without Flower installed (every flwr import is lazy)."""

import importlib


def test_flower_module_imports_lazily():
    module = importlib.import_module("veilbench.gca.flower_app")
    assert callable(module.run_flower_simulation)
    assert callable(module.make_gca_apps) and callable(module.make_fedavg_apps)
