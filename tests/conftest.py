import pytest


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
