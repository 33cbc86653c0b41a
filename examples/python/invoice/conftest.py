import pytest

from invoice.catalogue import load_prices


@pytest.fixture(scope="session")
def prices():
    return load_prices()
