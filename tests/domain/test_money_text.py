"""Every text form of a dollar amount Scalar writes, pinned byte for byte (scalar.domain.money)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from scalar.domain.money import (
    cents_text,
    micros_text,
    usd,
    usd_axis,
    usd_cents,
    usd_cents_plain,
    usd_exact,
    usd_fixed,
    usd_fixed_plain,
    usd_price,
    usd_price_signed,
    usd_signed,
    usd_text,
    usd_trimmed,
)

# amount, usd, usd_cents, usd_cents_plain, usd_exact, micros_text, usd_fixed
EXACT = [
    ("0", "$0.00", "$0.00", "$0.00", "$0", "0.000000", "$0.00"),
    ("-0", "$-0.00", "$-0.00", "$-0.00", "$-0", "-0.000000", "$-0.00"),
    ("1", "$1.00", "$1.00", "$1.00", "$1", "1.000000", "$1.00"),
    ("-1234.567", "$-1,234.567", "$-1,234.57", "$-1234.57", "$-1234.567", "-1234.567000", "$-1,234.57"),
    ("24.5", "$24.50", "$24.50", "$24.50", "$24.5", "24.500000", "$24.50"),
    ("2.315", "$2.315", "$2.32", "$2.32", "$2.315", "2.315000", "$2.32"),
    ("1234.5", "$1,234.50", "$1,234.50", "$1234.50", "$1234.5", "1234.500000", "$1,234.50"),
    ("0.005", "$0.005", "$0.00", "$0.00", "$0.005", "0.005000", "$0.00"),
    ("0.015", "$0.015", "$0.02", "$0.02", "$0.015", "0.015000", "$0.02"),
    ("0.0000005", "$0.0000005", "$0.00", "$0.00", "$0.0000005", "0.000000", "$0.00"),
    ("0.0000015", "$0.0000015", "$0.00", "$0.00", "$0.0000015", "0.000002", "$0.00"),
    (
        "123456789.125",
        "$123,456,789.125",
        "$123,456,789.12",
        "$123456789.12",
        "$123456789.125",
        "123456789.125000",
        "$123,456,789.12",
    ),
    ("1E+3", "$1,000.00", "$1,000.00", "$1000.00", "$1000", "1000.000000", "$1,000.00"),
    ("1E-9", "$0.000000001", "$0.00", "$0.00", "$0.000000001", "0.000000", "$0.00"),
    ("13.0", "$13.00", "$13.00", "$13.00", "$13", "13.000000", "$13.00"),
]


@pytest.mark.parametrize(("raw", "exact", "cents", "plain", "bare", "micros", "fixed"), EXACT)
def test_exact_amounts(
    raw: str, exact: str, cents: str, plain: str, bare: str, micros: str, fixed: str
) -> None:
    amount = Decimal(raw)
    assert usd(amount) == exact
    assert usd_cents(amount) == cents
    assert usd_cents_plain(amount) == plain
    assert usd_exact(amount) == bare
    assert micros_text(amount) == micros
    assert usd_fixed(amount) == fixed


# amount, usd_signed, usd_price_signed, usd_price, usd_trimmed, usd_axis, usd_fixed
FLOATS = [
    (0.0, "$0.00", "$0.0000", "$0.0000", "$0.00", "$0.00", "$0.00"),
    (-0.0, "$0.00", "$0.0000", "$-0.0000", "$-0.00", "$-0.00", "$-0.00"),
    (0.4035, "$0.40", "$0.4035", "$0.4035", "$0.4035", "$0.40", "$0.40"),
    (0.99995, "$1.00", "$1.0000", "$1.0000", "$1.00", "$1.00", "$1.00"),
    (-0.5, "-$0.50", "-$0.5000", "$-0.5000", "$-0.50", "$-0.50", "$-0.50"),
    (1.0, "$1.00", "$1.00", "$1.00", "$1.00", "$1.00", "$1.00"),
    (2.3, "$2.30", "$2.30", "$2.30", "$2.30", "$2.30", "$2.30"),
    (2.1875, "$2.19", "$2.19", "$2.19", "$2.1875", "$2.19", "$2.19"),
    (2.675, "$2.67", "$2.67", "$2.67", "$2.675", "$2.67", "$2.67"),
    (999.995, "$1,000.00", "$1,000.00", "$1,000.00", "$999.995", "$1,000.00", "$1,000.00"),
    (1000.0, "$1,000.00", "$1,000.00", "$1,000.00", "$1,000.00", "$1,000", "$1,000.00"),
    (-1234.5678, "-$1,234.57", "-$1,234.57", "$-1234.5678", "$-1,234.5678", "$-1,235", "$-1,234.57"),
    (1e-09, "$0.00", "$0.0000", "$0.0000", "$0.00", "$0.00", "$0.00"),
    (
        1e12,
        "$1,000,000,000,000.00",
        "$1,000,000,000,000.00",
        "$1,000,000,000,000.00",
        "$1,000,000,000,000.00",
        "$1,000,000,000,000",
        "$1,000,000,000,000.00",
    ),
]


@pytest.mark.parametrize(("amount", "signed", "price_signed", "price", "trimmed", "axis", "fixed"), FLOATS)
def test_amounts_read_from_json(
    amount: float, signed: str, price_signed: str, price: str, trimmed: str, axis: str, fixed: str
) -> None:
    assert usd_signed(amount) == signed
    assert usd_price_signed(amount) == price_signed
    assert usd_price(amount) == price
    assert usd_trimmed(amount) == trimmed
    assert usd_axis(amount) == axis
    assert usd_fixed(amount) == fixed


def test_places_and_input_types_are_kept() -> None:
    assert usd_fixed(Decimal("12.345678"), 3) == "$12.346"
    assert usd_fixed(1234.5, 0) == "$1,234"  # half-even on the float
    assert usd_fixed(Decimal("2.675")) == "$2.68"  # the decimal rounds half-even, the float 2.675 does not
    assert usd_fixed(2.675) == "$2.67"
    assert usd_signed(-12.5, 4) == "-$12.5000"
    assert usd_trimmed(Decimal("2.10")) == "$2.10"
    assert usd_trimmed(5000) == "$5,000.00"
    assert usd_price(5000) == "$5,000.00"
    assert usd_axis(-999) == "$-999.00"


def test_cents_text() -> None:
    assert [cents_text(Decimal(v)) for v in ("0", "12.345", "12.355", "-0.005", "1E+3")] == [
        "0.00",
        "12.34",
        "12.36",
        "-0.00",
        "1000.00",
    ]


def test_usd_fixed_plain() -> None:
    assert usd_fixed_plain(Decimal("1234.5678")) == "$1234.57"
    assert usd_fixed_plain(1234.5678, 4) == "$1234.5678"
    assert usd_fixed_plain(Decimal("-3")) == "$-3.00"
    assert usd_fixed_plain(0.0, 4) == "$0.0000"
    assert usd_fixed_plain(Decimal("2.675")) == "$2.68" and usd_fixed_plain(2.675) == "$2.67"
    assert usd_fixed_plain(1e12, 0) == "$1000000000000"


def test_usd_text_is_the_amounts_own_text() -> None:
    assert usd_text(Decimal("2.50")) == "$2.50"
    assert usd_text(Decimal("1E+1")) == "$1E+1"
    assert usd_text(Decimal("-0.000001")) == "$-0.000001"
    assert usd_text(0.1) == "$0.1" and usd_text(60) == "$60" and usd_text("12.345678") == "$12.345678"
