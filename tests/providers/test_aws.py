"""AWS spot prices through botocore against a real loopback server speaking EC2's query/XML protocol."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from urllib.parse import parse_qs

import botocore.session
import pytest

from scalar.domain.market import CapacityRequest
from scalar.domain.tier import Tier
from scalar.providers.aws import AwsSettings, AwsSpotPrices, PlacementScore, aws_settings_from_env
from scalar.providers.base import Provider, ProviderError, WorkRunner
from scalar.providers.catalog import INTERRUPTION_RATE_BY_RANGE, load_catalog
from scalar.providers.http import HttpStatusError
from tests.providers.fakeserver import FakeServer, Reply, Request

SAMPLES = Path(__file__).parent / "samples" / "aws"
PAGE1 = (SAMPLES / "aws_describe_spot_price_history_page1.xml").read_text()
PAGE2 = (SAMPLES / "aws_describe_spot_price_history_page2.xml").read_text()
ERROR = (SAMPLES / "aws_error_response.xml").read_text()
SCORES = (SAMPLES / "aws_get_spot_placement_scores.xml").read_text()
ADVISOR = json.loads((SAMPLES / "aws_spot_advisor_sample.json").read_text())
PAGE1_TOKEN = "eyJ2IjoiMiIsImMiOiJGeE1hQ2hJZ0FBQUEiLCJzIjoxfQ=="
NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
EMPTY_PAGE = """<?xml version="1.0" encoding="UTF-8"?>
<DescribeSpotPriceHistoryResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">
    <requestId>e0</requestId>
    <spotPriceHistorySet/>
    <nextToken>{token}</nextToken>
</DescribeSpotPriceHistoryResponse>
"""


@pytest.fixture(autouse=True)
def _no_ambient_aws_config(monkeypatch: pytest.MonkeyPatch) -> None:
    """botocore also reads the process environment: keep a developer's AWS setup out of these tests."""
    for key in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_EC2"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/scalar-test-aws-config")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/scalar-test-aws-credentials")


def xml(text: str, status: int = 200, delay_s: float = 0.0) -> Reply:
    return Reply.text(text, status, content_type="text/xml;charset=UTF-8", delay_s=delay_s)


def form(request: Request) -> dict[str, list[str]]:
    return parse_qs(request.body.decode())


def two_pages(request: Request) -> Reply:
    """The real two sample pages: page 2 when the request carries page 1's NextToken."""
    token = form(request).get("NextToken", [""])[0]
    return xml(PAGE2 if token == PAGE1_TOKEN else PAGE1)


@pytest.fixture(scope="module")
def _server() -> Iterator[FakeServer]:
    # One server for the module: stopping a server waits for its poll loop (up to 0.5 s).
    with FakeServer() as server:
        yield server


@pytest.fixture
def ec2(_server: FakeServer) -> FakeServer:
    """The loopback EC2, serving the two sample pages, with no requests recorded yet."""
    _server.requests.clear()
    _server.route("POST", "/", two_pages)
    return _server


_SESSIONS: list[botocore.session.Session] = []


def shared_session() -> botocore.session.Session:
    """One botocore session for the module: loading EC2's service model once keeps the suite fast."""
    if not _SESSIONS:
        _SESSIONS.append(botocore.session.get_session())
    return _SESSIONS[0]


def client(server: FakeServer, **kw: object) -> AwsSpotPrices:
    settings = AwsSettings(
        regions=kw.pop("regions", ("us-east-1",)),  # type: ignore[arg-type]
        endpoint_url=server.url,
        access_key_id="AKIDSCALARTEST",
        secret_access_key="not-a-secret",
        max_pages=kw.pop("max_pages", 5),  # type: ignore[arg-type]
    )
    kw.setdefault("max_attempts", 1)
    kw.setdefault("session_factory", shared_session)
    return AwsSpotPrices(settings, **kw)  # type: ignore[arg-type]


def test_two_sample_pages_become_exact_spot_offers_with_catalog_specs(ec2: FakeServer) -> None:
    offers = client(ec2).list_offers(NOW)
    by_zone = {(o.instance_type, o.availability_zone): o for o in offers}
    assert len(offers) == 5 and len(ec2.requests) == 2
    p5 = by_zone[("p5.48xlarge", "use1-az2")]
    # <spotPrice>19.253100</spotPrice> for the whole 8-GPU box, exactly.
    assert p5.price_per_hour == Decimal("19.253100")
    assert p5.price_per_gpu_hour == Decimal("19.2531") / 8 == Decimal("2.4066375")
    spec = load_catalog().spec("aws", "p5.48xlarge")
    assert spec is not None
    assert (p5.gpu_model, p5.gpu_count, p5.gpu_memory_gb, p5.vcpu, p5.memory_gb) == (
        spec.gpu_model,
        spec.gpu_count,
        spec.gpu_memory_gb,
        spec.vcpu,
        spec.memory_gb,
    )
    assert (p5.provider, p5.region, p5.spot, p5.observed_at) == ("aws", "us-east-1", True, NOW)
    # The last page's item arrived too (page 2 of the sample).
    assert by_zone[("p4d.24xlarge", "use1-az4")].price_per_hour == Decimal("8.120300")


def test_interruption_rates_follow_the_spot_advisor_buckets(ec2: FakeServer) -> None:
    offers = client(ec2).list_offers(NOW)
    advice = ADVISOR["spot_advisor"]["us-east-1"]["Linux"]
    for offer in offers:
        bucket = advice[offer.instance_type]["r"]
        assert offer.interruption_rate == INTERRUPTION_RATE_BY_RANGE[bucket]


def test_request_asks_for_catalog_gpu_types_linux_and_start_time_and_follows_next_token(
    ec2: FakeServer,
) -> None:
    aws = client(ec2)
    aws.list_offers(NOW)
    first, second = (form(r) for r in ec2.requests)
    assert first["Action"] == ["DescribeSpotPriceHistory"] and first["Version"] == ["2016-11-15"]
    asked = {values[0] for key, values in first.items() if key.startswith("InstanceType.")}
    assert asked == set(aws.instance_types) and "p5.48xlarge" in asked
    assert first["ProductDescription.1"] == ["Linux/UNIX"]
    assert datetime.fromisoformat(first["StartTime"][0].replace("Z", "+00:00")) == NOW
    assert "NextToken" not in first and second["NextToken"] == [PAGE1_TOKEN]
    # botocore signs every request (the fake ignores the signature).
    assert ec2.requests[0].headers["authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDSCALARTEST/")
    assert aws.last_report is not None and aws.last_report.pages == 2 and aws.last_report.rows == 5


def test_latest_price_per_type_and_zone_wins(ec2: FakeServer) -> None:
    older = PAGE2.replace("8.120300", "9.000000").replace("2025-06-01T08:44:19", "2025-05-01T08:44:19")
    page = PAGE2.replace("<spotPriceHistorySet>", "<spotPriceHistorySet>" + _items(older))
    ec2.route("POST", "/", xml(page))
    offers = client(ec2).list_offers(NOW)
    assert [o.price_per_hour for o in offers] == [Decimal("8.120300")]


def _items(page: str) -> str:
    start = page.index("<item>")
    end = page.rindex("</item>") + len("</item>")
    return page[start:end]


def test_unknown_instance_types_are_skipped_and_counted_windows_rows_excluded(ec2: FakeServer) -> None:
    assert load_catalog().spec("aws", "p3.2xlarge") is None
    page = PAGE1.replace("p4d.24xlarge", "p3.2xlarge").replace(
        "<productDescription>Linux/UNIX</productDescription>\n            <spotPrice>21.154300",
        "<productDescription>Windows</productDescription>\n            <spotPrice>21.154300",
    )
    page = page.replace(f"<nextToken>{PAGE1_TOKEN}</nextToken>", "<nextToken/>")
    ec2.route("POST", "/", xml(page))
    aws = client(ec2)
    offers = aws.list_offers(NOW)
    assert sorted(o.availability_zone or "" for o in offers) == ["use1-az2", "use1-az6"]
    report = aws.last_report
    assert report is not None
    assert report.skipped == {"instance types the catalog does not know (no specs; not guessed)": 1}
    assert "p3.2xlarge" in report.warnings[0] and report.excluded == {
        "product Windows (only Linux/UNIX is read)": 1
    }


def test_zones_of_another_region_are_not_reported_as_this_region(ec2: FakeServer) -> None:
    aws = client(ec2, regions=("us-west-2",))
    assert aws.list_offers(NOW) == []
    assert (
        aws.last_report is not None
        and "zones outside the region asked (us-west-2)" in aws.last_report.skipped
    )


def test_empty_page_with_a_token_is_followed(ec2: FakeServer) -> None:
    def pages(request: Request) -> Reply:
        token = form(request).get("NextToken", [""])[0]
        return xml(PAGE2 if token == "more" else EMPTY_PAGE.format(token="more"))

    ec2.route("POST", "/", pages)
    offers = client(ec2).list_offers(NOW)
    assert len(ec2.requests) == 2 and [o.price_per_hour for o in offers] == [Decimal("8.120300")]


def test_an_empty_last_page_gives_no_offers(ec2: FakeServer) -> None:
    ec2.route("POST", "/", xml(EMPTY_PAGE.format(token="")))
    assert client(ec2).list_offers(NOW) == []


def test_paging_past_the_cap_is_an_error_naming_the_cap(ec2: FakeServer) -> None:
    ec2.route("POST", "/", xml(EMPTY_PAGE.format(token="again")))
    with pytest.raises(ProviderError, match="after 3 pages") as err:
        client(ec2, max_pages=3).list_offers(NOW)
    assert not err.value.retryable and len(ec2.requests) == 3
    assert "SCALAR_AWS_MAX_PAGES" in str(err.value)


def test_ec2_error_xml_becomes_a_provider_error_with_code_and_message(ec2: FakeServer) -> None:
    ec2.route("POST", "/", xml(ERROR, 400))
    with pytest.raises(HttpStatusError) as err:
        client(ec2).list_offers(NOW)
    assert err.value.status == 400 and err.value.retryable  # RequestLimitExceeded is throttling
    assert "RequestLimitExceeded: Request limit exceeded." in str(err.value)


def test_auth_failure_is_not_retryable_and_says_what_to_check(ec2: FakeServer) -> None:
    body = ERROR.replace("RequestLimitExceeded", "AuthFailure").replace(
        "Request limit exceeded.", "AWS was not able to validate the provided access credentials"
    )
    ec2.route("POST", "/", xml(body, 401))
    with pytest.raises(HttpStatusError) as err:
        client(ec2).list_offers(NOW)
    assert err.value.status == 401 and not err.value.retryable
    assert "AuthFailure" in str(err.value) and "AWS_PROFILE" in str(err.value)


def test_server_error_without_xml_is_retryable_with_its_status(ec2: FakeServer) -> None:
    ec2.route("POST", "/", Reply.text("upstream exploded", 500))
    with pytest.raises(HttpStatusError) as err:
        client(ec2).list_offers(NOW)
    assert err.value.status == 500 and err.value.retryable


def test_throttled_429_then_200_succeeds_through_botocore_retries(ec2: FakeServer) -> None:
    ec2.route("POST", "/", [xml(ERROR, 429), xml(PAGE2)])
    offers = client(ec2, max_attempts=2).list_offers(NOW)
    assert len(ec2.requests) == 2 and [o.price_per_hour for o in offers] == [Decimal("8.120300")]


def test_read_timeout_is_a_retryable_provider_error(ec2: FakeServer) -> None:
    ec2.route("POST", "/", xml(PAGE2, delay_s=1.0))
    with pytest.raises(ProviderError, match="timed out") as err:
        client(ec2, read_timeout_s=0.2).list_offers(NOW)
    assert err.value.retryable


def test_malformed_xml_is_a_clear_error(ec2: FakeServer) -> None:
    ec2.route("POST", "/", xml(PAGE2[:300]))
    with pytest.raises(ProviderError, match="malformed XML"):
        client(ec2).list_offers(NOW)


@pytest.mark.parametrize(
    ("drop", "named"),
    [
        ("<spotPrice>8.120300</spotPrice>", "spotPrice"),
        ("<instanceType>p4d.24xlarge</instanceType>", "instanceType"),
        ("<timestamp>2025-06-01T08:44:19.000Z</timestamp>", "timestamp"),
    ],
)
def test_an_item_missing_a_field_is_an_error_naming_it(drop: str, named: str, ec2: FakeServer) -> None:
    ec2.route("POST", "/", xml(PAGE2.replace(drop, "")))
    with pytest.raises(ProviderError, match=f"item 1.* has no {named}"):
        client(ec2).list_offers(NOW)


def test_a_page_without_its_price_set_is_an_error(ec2: FakeServer) -> None:
    start = PAGE2.index("<spotPriceHistorySet>")
    end = PAGE2.index("</spotPriceHistorySet>") + len("</spotPriceHistorySet>")
    ec2.route("POST", "/", xml(PAGE2[:start] + PAGE2[end:]))
    with pytest.raises(ProviderError, match="no spotPriceHistorySet"):
        client(ec2).list_offers(NOW)


def test_placement_scores_best_first(ec2: FakeServer) -> None:
    ec2.route("POST", "/", xml(SCORES))
    scores = client(ec2).placement_scores(["p5.48xlarge", "p4d.24xlarge"], target_capacity=2)
    sent = form(ec2.requests[0])
    assert scores == (
        PlacementScore("us-east-1", 9, "use1-az6"),
        PlacementScore("us-east-1", 7, "use1-az2"),
        PlacementScore("us-east-1", 3, "use1-az4"),
    )
    assert sent["Action"] == ["GetSpotPlacementScores"] and sent["TargetCapacity"] == ["2"]
    assert sent["InstanceType.1"] == ["p5.48xlarge"] and sent["RegionName.1"] == ["us-east-1"]
    assert sent["SingleAvailabilityZone"] == ["true"]


def test_placement_score_out_of_range_is_an_error(ec2: FakeServer) -> None:
    ec2.route("POST", "/", xml(SCORES.replace("<score>9</score>", "<score>11</score>")))
    with pytest.raises(ProviderError, match="score 11"):
        client(ec2).placement_scores(["p5.48xlarge"], target_capacity=1)


def test_it_sells_nothing_and_says_so(ec2: FakeServer) -> None:
    aws = client(ec2)
    assert isinstance(aws, Provider)
    request = CapacityRequest("aws", "p5.48xlarge", 1, 3600, None, Tier.FLEX, spot=True)
    with pytest.raises(ProviderError, match="launching EC2 capacity is not supported yet") as err:
        aws.buy(request, "key-1", NOW)
    assert not err.value.retryable
    with pytest.raises(ProviderError, match="Scalar reads AWS spot prices"):
        aws.release("b1", NOW)
    assert not isinstance(aws, WorkRunner)  # work on its nodes runs through the node agent
    assert aws.orderbook("p5.48xlarge", NOW) is None and aws.get_order("key-1", NOW) is None
    assert aws.events_since(7, NOW) == ((), 7)
    assert ec2.requests == []


def test_settings_from_an_env_mapping() -> None:
    off = aws_settings_from_env({})
    assert not off.enabled and off.disabled_reason is not None and "AWS_PROFILE" in off.disabled_reason
    half = aws_settings_from_env({"AWS_ACCESS_KEY_ID": "AKID", "AWS_ENDPOINT_URL_EC2": "http://x"})
    assert not half.enabled and "AWS_SECRET_ACCESS_KEY" in (half.disabled_reason or "")
    on = aws_settings_from_env(
        {
            "AWS_ACCESS_KEY_ID": "AKID",
            "AWS_SECRET_ACCESS_KEY": "s",
            "AWS_ENDPOINT_URL_EC2": "http://127.0.0.1:9",
            "SCALAR_AWS_REGIONS": "us-east-1, eu-west-1",
            "SCALAR_AWS_MAX_PAGES": "7",
        }
    )
    assert on.enabled and on.endpoint_url == "http://127.0.0.1:9"
    assert on.regions == ("us-east-1", "eu-west-1") and on.max_pages == 7
    assert "secret_access_key=" not in repr(on)
    assert aws_settings_from_env({"SCALAR_AWS_ENABLED": "1"}).enabled


def test_endpoint_and_credentials_from_an_env_mapping_reach_the_server(ec2: FakeServer) -> None:
    env = {"AWS_ACCESS_KEY_ID": "AKIDENV", "AWS_SECRET_ACCESS_KEY": "s", "AWS_ENDPOINT_URL_EC2": ec2.url}
    settings = aws_settings_from_env({**env, "SCALAR_AWS_REGIONS": "us-east-1"})
    assert len(AwsSpotPrices(settings, max_attempts=1, session_factory=shared_session).list_offers(NOW)) == 5
    assert "Credential=AKIDENV/" in ec2.requests[0].headers["authorization"]


def test_botocore_itself_honours_aws_endpoint_url_ec2(
    ec2: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_EC2", ec2.url)
    settings = AwsSettings(regions=("us-east-1",), access_key_id="AKID", secret_access_key="s")
    assert len(AwsSpotPrices(settings, max_attempts=1).list_offers(NOW)) == 5
