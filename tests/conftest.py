"""Settings shared by the test suites: the ``slow`` mark (tests left out of ``make check``)."""


def pytest_configure(config):
    """Register the marks of this project's tests."""
    config.addinivalue_line("markers", "slow: minutes of warm-up, install or subprocess runs; run by `make test`, "
                                       "left out of `make check`")
