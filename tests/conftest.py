import pytest
import torch

from tf_compat_grad._torch_internals import DYNAMO_TRACES_WATCHER


@pytest.fixture(scope="module")
def terminal_report(request):
    """A function that prints lines on the terminal, past output capture (for the figures a
    module reports once it has run)."""

    def write(lines):
        plugins = request.config.pluginmanager
        reporter = plugins.get_plugin("terminalreporter")
        capture = plugins.get_plugin("capturemanager")
        if reporter is None or capture is None:
            return
        with capture.global_and_fixture_disabled():
            reporter.write_line("")
            for line in lines:
                reporter.write_line(line)

    return write


def pytest_collection_modifyitems(config, items):
    """Version-dependent expectations in one place: `@pytest.mark.traced_compile` tests need a
    torch whose Dynamo traces a decorated call in one graph (Note [compile on older torch]).
    Also the doctest of `testing.check`, which runs every check, is `slow`."""
    for item in items:
        if item.nodeid.endswith("testing.py::tf_compat_grad.testing.check"):
            item.add_marker(pytest.mark.slow)
    if DYNAMO_TRACES_WATCHER:
        return
    skip = pytest.mark.skip(
        reason=f"torch {torch.__version__} runs decorated calls outside torch.compile"
    )
    for item in items:
        if item.get_closest_marker("traced_compile") is not None:
            item.add_marker(skip)


@pytest.fixture
def dynamo():
    """Dynamo's caches and counters reset before and after a compile test."""
    import torch._dynamo
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    yield
    torch._dynamo.reset()
    counters.clear()
