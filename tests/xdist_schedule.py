"""The test files handed to pytest-xdist's workers one at a time, as each worker runs out.

pytest-xdist's ``--dist loadfile`` scheduler (:class:`xdist.scheduler.LoadFileScheduling`) gives a
worker its next test file as soon as at most **two** of its tests are pending. Most end-to-end files
here hold one to three long tests, so the worker that starts one of them at once reserves the next
file as well, and the one after: the files that follow the session's reproduced project in the
queue (:func:`tests.conftest.pytest_collection_modifyitems`) all landed on the worker that built it
and ran one after another there, while the other workers had finished theirs (observed: that worker
ending 45 s after the others).

:class:`OneFileAhead` hands out the next file when at most **one** test is pending: the least a
worker needs, since it holds back the last test it has until it knows the next one (pytest runs a
test knowing the next, to tear down module fixtures). A worker thus reserves a file only when it is
about to start its last test, and a long file goes to whichever worker is free first.

This subclasses pytest-xdist's scheduler and reads its internals (``_pending_of``,
``assigned_work``, ``workqueue``): the package is pinned exactly (``pyproject.toml``), and
``tests/test_xdist_schedule.py`` fails if the pin or these internals change.
"""

from __future__ import annotations

from xdist.scheduler import LoadFileScheduling

#: A worker gets its next test file when at most this many of its tests are pending (xdist's own: 2).
PENDING_WATERMARK = 1


class OneFileAhead(LoadFileScheduling):
    """:class:`~xdist.scheduler.LoadFileScheduling` with a next file handed out at
    :data:`PENDING_WATERMARK` pending tests instead of two."""

    def _reschedule(self, node) -> None:  # noqa: ANN001 - xdist's WorkerController
        if self.workqueue and not node.shutting_down and self._pending_of(self.assigned_work[node]) > PENDING_WATERMARK:
            return
        super()._reschedule(node)
