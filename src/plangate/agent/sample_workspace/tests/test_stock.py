import pytest
from inventory import OutOfStock, Stock


def test_restock_adds_units():
    stock = Stock({"widget": 2})
    assert stock.restock("widget", 3) == 5
    assert stock.restock("gadget", 1) == 1


def test_restock_rejects_non_positive_quantity():
    with pytest.raises(ValueError):
        Stock().restock("widget", 0)


def test_reserve_takes_units():
    stock = Stock({"widget": 10})
    assert stock.reserve("widget", 3) == 7
    assert stock.available("widget") == 7


def test_reserve_can_take_everything_on_hand():
    stock = Stock({"widget": 5})
    assert stock.reserve("widget", 5) == 0


def test_reserve_more_than_on_hand_raises():
    stock = Stock({"widget": 2})
    with pytest.raises(OutOfStock):
        stock.reserve("widget", 3)
    assert stock.available("widget") == 2
