"""Parsing and writing times as text (scalar.domain.timefmt)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal

import pytest

from scalar.domain.timefmt import exact_seconds, iso_z, parse_iso, parse_time

AT = datetime(2026, 11, 26, 20, 31, 5, tzinfo=UTC)


@pytest.mark.parametrize(
    "text",
    ["2026-11-26T20:31:05Z", "2026-11-26T20:31:05+00:00", "2026-11-26T20:31:05", "2026-11-26T22:31:05+02:00"],
)
def test_iso_text_is_an_aware_utc_time(text: str) -> None:
    moment = parse_time(text)
    assert moment == AT and moment is not None and moment.tzinfo is UTC


@pytest.mark.parametrize("value", [None, "", "soon", True, False, 0, 1.5, [], {}])
def test_what_is_not_a_time_is_none(value: object) -> None:
    assert parse_time(value) is None


def test_epoch_seconds_only_when_asked() -> None:
    assert parse_time(AT.timestamp(), epoch=True) == AT
    assert parse_time(0, epoch=True) == datetime(1970, 1, 1, tzinfo=UTC)
    assert parse_time(True, epoch=True) is None
    assert parse_time("x", epoch=True) is None


def test_datetimes_pass_through_in_utc() -> None:
    assert parse_time(AT.replace(tzinfo=None)) == AT
    east = AT.astimezone(timezone(timedelta(hours=3)))
    assert parse_time(east) == AT and parse_time(east).tzinfo is UTC  # type: ignore[union-attr]


def test_parse_iso_is_strict_and_keeps_what_was_stored() -> None:
    assert parse_iso(None) is None and parse_iso("") is None and parse_iso(5) is None
    naive = parse_iso("2026-11-26T20:31:05")
    assert naive == datetime(2026, 11, 26, 20, 31, 5) and naive is not None and naive.tzinfo is None
    assert parse_iso("2026-11-26T22:31:05+02:00") == AT
    with pytest.raises(ValueError):
        parse_iso("soon")


def test_iso_z() -> None:
    assert iso_z(AT) == "2026-11-26T20:31:05Z"
    assert iso_z(AT.replace(microsecond=120000).astimezone(timezone(timedelta(hours=-5)))) == (
        "2026-11-26T20:31:05.120000Z"
    )


def test_exact_seconds_keeps_microseconds() -> None:
    assert exact_seconds(timedelta(days=1, seconds=5, microseconds=250)) == Decimal("86405.000250")
    assert exact_seconds(timedelta(microseconds=-1)) == Decimal("-0.000001")
    assert exact_seconds(timedelta(0)) == 0
