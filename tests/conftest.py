import pytest

from t3.config.hardware import load_hardware


@pytest.fixture(scope="session")
def paper_hw():
    return load_hardware("paper-80cu")
