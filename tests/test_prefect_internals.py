"""The Prefect internals that the tests' shared Prefect server relies on (``tests/e2e_root.py``,
``tests/conftest.py::prefect_server``) are still there: this fails loudly, naming what moved,
when a Prefect upgrade changes them (``pyproject.toml`` pins Prefect exactly for this reason)."""

from __future__ import annotations

import inspect


def test_the_prefect_internals_the_shared_test_server_uses_are_there() -> None:
    import prefect
    import prefect.context
    import prefect.server.api.server as server
    import prefect.testing.utilities as harness

    assert prefect.__version__ == "3.9.1", f"prefect {prefect.__version__}: recheck tests/e2e_root.py's server start"
    assert callable(getattr(prefect.context, "_temporary_global_settings_context", None)), \
        "prefect.context._temporary_global_settings_context is gone (used by conftest.prefect_server)"
    assert callable(getattr(server, "create_app", None)), "prefect.server.api.server.create_app is gone (uvicorn factory)"
    create_app = inspect.getsource(server.create_app)
    assert "PREFECT__SERVER_EPHEMERAL" in create_app and "PREFECT__SERVER_FINAL" in create_app, \
        "create_app no longer reads PREFECT__SERVER_EPHEMERAL / PREFECT__SERVER_FINAL"
    assert "_temporary_global_settings_context" in inspect.getsource(harness.prefect_test_harness), \
        "prefect_test_harness no longer sets the global settings context the way conftest.prefect_server copies"
