"""AWS EC2 spot prices through botocore (the real SDK): ``DescribeSpotPriceHistory`` and spot placement scores.

```python
aws = AwsSpotPrices(aws_settings_from_env(os.environ))
offers = aws.list_offers(now)                 # spot Offers per instance type and zone, all regions
scores = aws.placement_scores(["p5.48xlarge"], target_capacity=2)
```

For each configured region, ``DescribeSpotPriceHistory`` (API version 2016-11-15) is asked for the GPU
instance types the packaged catalog knows, ``ProductDescription=Linux/UNIX`` and ``StartTime=now`` (AWS
then returns the price in effect at ``now`` per type and zone, and any change after it), following
``NextToken`` until it is empty, up to a page cap. Each (instance type, zone) keeps its latest price.
Specs come from the catalog (types it does not know are skipped and counted, never guessed); interruption
rates come from the Spot Advisor data packaged with the catalog. See ``docs/providers-clouds.md``.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Any

import botocore.session
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectTimeoutError,
    EndpointConnectionError,
    NoCredentialsError,
    ParamValidationError,
    PartialCredentialsError,
    ProfileNotFound,
    ReadTimeoutError,
)
from botocore.parsers import ResponseParserError

from scalar.domain.offers import AWS, Offer
from scalar.providers.base import ProviderError
from scalar.providers.catalog import Catalog, interruption_rate, load_catalog, package_data_dir
from scalar.providers.catalog.sources import read_spot_advisor
from scalar.providers.http import HttpStatusError
from scalar.providers.price_only import (
    FetchReport,
    PriceOnlyProvider,
    env_flag,
    env_list,
    env_positive_int,
    page_cap_error,
)

logger = logging.getLogger(__name__)

DEFAULT_REGIONS = ("us-east-1", "us-east-2", "us-west-2")
DEFAULT_MAX_PAGES = 50
PRODUCT_DESCRIPTION = "Linux/UNIX"
PAGE_SIZE = 1000  # DescribeSpotPriceHistory's MaxResults upper bound

# Error codes EC2 uses when it throttles; retried (botocore's standard mode retries them too).
THROTTLING_CODES = frozenset(
    {
        "RequestLimitExceeded",
        "Throttling",
        "ThrottlingException",
        "RequestThrottled",
        "RequestThrottledException",
        "TooManyRequestsException",
        "EC2ThrottledException",
        "BandwidthLimitExceeded",
        "SlowDown",
    }
)
# Error codes that mean the credentials or their permissions are wrong: asking again will not help.
CREDENTIAL_CODES = frozenset(
    {
        "AuthFailure",
        "UnauthorizedOperation",
        "InvalidClientTokenId",
        "SignatureDoesNotMatch",
        "IncompleteSignature",
        "MissingAuthenticationToken",
        "ExpiredToken",
        "RequestExpired",
        "OptInRequired",
    }
)
CREDENTIAL_HINT = (
    "check the AWS credentials (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE) and that they "
    "allow ec2:DescribeSpotPriceHistory and ec2:GetSpotPlacementScores"
)


@dataclass(frozen=True, slots=True)
class AwsSettings:
    """How to reach EC2. Credentials left ``None`` come from botocore's standard chain."""

    regions: tuple[str, ...] = DEFAULT_REGIONS
    endpoint_url: str | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = field(default=None, repr=False)
    session_token: str | None = field(default=None, repr=False)
    profile: str | None = None
    max_pages: int = DEFAULT_MAX_PAGES
    enabled: bool = False
    disabled_reason: str | None = None


def _value(env: Mapping[str, str], key: str) -> str | None:
    raw = (env.get(key) or "").strip()
    return raw or None


def aws_settings_from_env(env: Mapping[str, str]) -> AwsSettings:
    """Read AWS settings from ``env`` (``os.environ`` or a plain dict).

    AWS's own variables: ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``/``AWS_SESSION_TOKEN``,
    ``AWS_PROFILE``, ``AWS_ENDPOINT_URL_EC2`` (or ``AWS_ENDPOINT_URL``). Scalar's: ``SCALAR_AWS_REGIONS``
    (comma list), ``SCALAR_AWS_MAX_PAGES``, ``SCALAR_AWS_ENABLED=1`` (for credentials botocore finds
    elsewhere, such as an instance role). Enabled when credentials, a profile, an endpoint or the switch is
    set; never by default.
    """
    access = _value(env, "AWS_ACCESS_KEY_ID")
    secret = _value(env, "AWS_SECRET_ACCESS_KEY")
    profile = _value(env, "AWS_PROFILE")
    endpoint = _value(env, "AWS_ENDPOINT_URL_EC2") or _value(env, "AWS_ENDPOINT_URL")
    enabled = bool((access and secret) or profile or endpoint or env_flag(env, "SCALAR_AWS_ENABLED"))
    reason = None
    if bool(access) != bool(secret):
        missing = "AWS_SECRET_ACCESS_KEY" if access else "AWS_ACCESS_KEY_ID"
        enabled = False
        reason = f"aws cannot work: {missing} is not set while its pair is; set both or use AWS_PROFILE"
    elif not enabled:
        reason = (
            "aws is off: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, AWS_ENDPOINT_URL_EC2, "
            "or SCALAR_AWS_ENABLED=1 (credentials from botocore's chain) to enable it"
        )
    return AwsSettings(
        regions=env_list(env, "SCALAR_AWS_REGIONS", DEFAULT_REGIONS),
        endpoint_url=endpoint,
        access_key_id=access if secret else None,
        secret_access_key=secret if access else None,
        session_token=_value(env, "AWS_SESSION_TOKEN"),
        profile=profile,
        max_pages=env_positive_int(env, "SCALAR_AWS_MAX_PAGES", DEFAULT_MAX_PAGES),
        enabled=enabled,
        disabled_reason=reason,
    )


@dataclass(frozen=True, slots=True)
class PlacementScore:
    """How likely a spot request of the asked size succeeds in a region (or zone): 1 (unlikely) to 10."""

    region: str
    score: int
    availability_zone_id: str | None = None


@functools.lru_cache(maxsize=1)
def spot_advisor() -> Mapping[tuple[str, str], int]:
    """(region, instance type) -> Spot Advisor interruption range index, from the packaged catalog data."""
    return read_spot_advisor(package_data_dir())


def _client_error(error: ClientError, what: str) -> HttpStatusError:
    """An EC2 ``<Response><Errors><Error><Code/><Message/>`` answer as a ``ProviderError``."""
    detail = error.response.get("Error", {})
    code = str(detail.get("Code") or "Unknown")
    message = str(detail.get("Message") or "no message")
    status = int(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
    retryable = code in THROTTLING_CODES or status == 429 or status >= 500
    hint = f"; {CREDENTIAL_HINT}" if code in CREDENTIAL_CODES else ""
    return HttpStatusError(AWS, status, f"{what}: {code}: {message}{hint}", retryable)


def _require(item: Mapping[str, Any], key: str, xml_name: str, where: str) -> Any:
    value = item.get(key)
    if value is None or value == "":
        raise ProviderError(AWS, f"{where} has no {xml_name}")
    return value


def _spot_price(text: str, where: str) -> Decimal:
    try:
        price = Decimal(text)
    except InvalidOperation:
        raise ProviderError(AWS, f"{where} has spotPrice {text!r}, not a number") from None
    if not price.is_finite():
        raise ProviderError(AWS, f"{where} has spotPrice {text!r}, not a finite number")
    return price


class AwsSpotPrices(PriceOnlyProvider):
    """EC2 spot prices as Offers, through botocore. Sells nothing (see ``PriceOnlyProvider``).

    ``max_attempts`` is botocore's total attempts per call (standard retry mode: throttling, 5xx and
    connection errors, with backoff and jitter); ``connect_timeout_s``/``read_timeout_s`` bound each one.
    """

    name = AWS
    refusal = "Scalar reads AWS spot prices; launching EC2 capacity is not supported yet"

    def __init__(
        self,
        settings: AwsSettings,
        *,
        catalog: Catalog | None = None,
        max_attempts: int = 3,
        connect_timeout_s: float = 5.0,
        read_timeout_s: float = 20.0,
        session_factory: Callable[[], botocore.session.Session] = botocore.session.get_session,
    ) -> None:
        if not settings.regions:
            raise ValueError("AwsSettings.regions is empty: name at least one region, such as us-east-1")
        self.settings = settings
        self.catalog = catalog or load_catalog()
        self.last_report: FetchReport | None = None
        self._config = Config(
            retries={"total_max_attempts": max_attempts, "mode": "standard"},
            connect_timeout=connect_timeout_s,
            read_timeout=read_timeout_s,
            user_agent_extra="scalar",
        )
        self._session_factory = session_factory
        self._session: botocore.session.Session | None = None
        self._clients: dict[str, Any] = {}
        self._last_status: dict[str, int] = {}

    def close(self) -> None:
        """Close the HTTP connections of every region's botocore client."""
        for client in self._clients.values():
            client.close()
        self._clients.clear()

    # -- the catalog's view ---------------------------------------------------------------------------
    @property
    def instance_types(self) -> tuple[str, ...]:
        """The GPU instance types asked for: every AWS type the catalog holds specs for."""
        return tuple(sorted(t for (provider, t) in self.catalog.specs if provider == AWS))

    # -- botocore -------------------------------------------------------------------------------------
    def _client(self, region: str) -> Any:
        client = self._clients.get(region)
        if client is None:
            if self._session is None:
                self._session = self._session_factory()
                if self.settings.profile:
                    self._session.set_config_variable("profile", self.settings.profile)
            kwargs: dict[str, Any] = {}
            if self.settings.endpoint_url:
                kwargs["endpoint_url"] = self.settings.endpoint_url
            if self.settings.access_key_id and self.settings.secret_access_key:
                kwargs["aws_access_key_id"] = self.settings.access_key_id
                kwargs["aws_secret_access_key"] = self.settings.secret_access_key
                kwargs["aws_session_token"] = self.settings.session_token
            client = self._session.create_client("ec2", region_name=region, config=self._config, **kwargs)
            client.meta.events.register("before-parse.ec2", functools.partial(self._record_status, region))
            self._clients[region] = client
        return client

    def _record_status(self, region: str, response_dict: Mapping[str, Any], **_: Any) -> None:
        """botocore hook: remember the HTTP status of the answer about to be parsed (for error messages)."""
        self._last_status[region] = int(response_dict.get("status_code") or 0)

    def _call(self, region: str, operation: str, what: str, **params: Any) -> Mapping[str, Any]:
        self._last_status.pop(region, None)
        try:
            answer: Mapping[str, Any] = getattr(self._client(region), operation)(**params)
        except ClientError as error:
            raise _client_error(error, what) from error
        except (ReadTimeoutError, ConnectTimeoutError) as error:
            raise ProviderError(AWS, f"{what}: timed out ({error})") from error
        except EndpointConnectionError as error:
            raise ProviderError(AWS, f"{what}: cannot reach EC2 ({error})") from error
        except (NoCredentialsError, PartialCredentialsError, ProfileNotFound) as error:
            raise ProviderError(AWS, f"{what}: {error}; {CREDENTIAL_HINT}", retryable=False) from error
        except ResponseParserError as error:
            detail = str(error).splitlines()[0]
            status = self._last_status.get(region, 0)
            if status >= 300:
                raise HttpStatusError(
                    AWS,
                    status,
                    f"{what}: the error answer is not EC2 XML ({detail})",
                    status == 429 or status >= 500,
                ) from error
            raise ProviderError(AWS, f"{what}: malformed XML answer ({detail})") from error
        except ParamValidationError as error:
            raise ProviderError(AWS, f"{what}: {error}", retryable=False) from error
        except BotoCoreError as error:
            raise ProviderError(AWS, f"{what}: {error}") from error
        return answer

    # -- spot prices ----------------------------------------------------------------------------------
    def list_offers(self, now: datetime) -> list[Offer]:
        """Every configured region's current spot prices, one Offer per instance type and zone."""
        report = FetchReport(AWS)
        offers: list[Offer] = []
        for region in self.settings.regions:
            offers.extend(self._region_offers(region, now, report))
        report.offers = len(offers)
        self.last_report = report
        report.log(logger)
        return offers

    def _history(self, region: str, now: datetime, report: FetchReport) -> list[Mapping[str, Any]]:
        """Every ``spotPriceHistorySet`` item of one region, all pages."""
        items: list[Mapping[str, Any]] = []
        token = ""
        pages = 0
        while True:
            params: dict[str, Any] = {
                "InstanceTypes": list(self.instance_types),
                "ProductDescriptions": [PRODUCT_DESCRIPTION],
                "StartTime": now,
                "MaxResults": PAGE_SIZE,
            }
            if token:
                params["NextToken"] = token
            what = f"DescribeSpotPriceHistory in {region} (page {pages + 1})"
            answer = self._call(region, "describe_spot_price_history", what, **params)
            pages += 1
            report.pages += 1
            page = answer.get("SpotPriceHistory")
            if not isinstance(page, list):
                raise ProviderError(AWS, f"{what}: the answer has no spotPriceHistorySet")
            items.extend(page)
            token = answer.get("NextToken") or ""
            if not token:
                return items
            if pages >= self.settings.max_pages:
                raise page_cap_error(
                    AWS,
                    f"DescribeSpotPriceHistory in {region}",
                    self.settings.max_pages,
                    "SCALAR_AWS_MAX_PAGES",
                )

    def _region_offers(self, region: str, now: datetime, report: FetchReport) -> list[Offer]:
        latest: dict[tuple[str, str], tuple[datetime, Offer]] = {}
        advice = spot_advisor()
        for index, item in enumerate(self._history(region, now, report)):
            report.rows += 1
            where = f"DescribeSpotPriceHistory in {region}: item {index + 1}"
            instance_type = str(_require(item, "InstanceType", "instanceType", where))
            where = f"{where} ({instance_type})"
            description = str(_require(item, "ProductDescription", "productDescription", where))
            price = _spot_price(str(_require(item, "SpotPrice", "spotPrice", where)), where)
            timestamp = _require(item, "Timestamp", "timestamp", where)
            zone_name = item.get("AvailabilityZone") or None
            zone = item.get("AvailabilityZoneId") or zone_name
            if zone is None:
                raise ProviderError(AWS, f"{where} has neither availabilityZone nor availabilityZoneId")
            if description != PRODUCT_DESCRIPTION:
                report.exclude(f"product {description} (only {PRODUCT_DESCRIPTION} is read)")
                continue
            if zone_name is not None and not str(zone_name).startswith(region):
                report.skip(f"zones outside the region asked ({region})", str(zone_name))
                continue
            spec = self.catalog.spec(AWS, instance_type)
            if spec is None:
                report.skip("instance types the catalog does not know (no specs; not guessed)", instance_type)
                continue
            if price <= 0:
                report.skip("rows with a spot price of 0 or less", f"{instance_type} {zone}")
                continue
            offer = spec.offer(
                region,
                price,
                now,
                spot=True,
                interruption_rate=interruption_rate(advice.get((region, instance_type))),
                availability_zone=str(zone),
            )
            key = (instance_type, str(zone))
            known = latest.get(key)
            if known is None or timestamp > known[0]:
                latest[key] = (timestamp, offer)
        return [offer for _, offer in latest.values()]

    # -- placement scores -----------------------------------------------------------------------------
    def placement_scores(
        self,
        instance_types: Sequence[str],
        target_capacity: int,
        *,
        regions: Sequence[str] | None = None,
        single_availability_zone: bool = True,
        capacity_unit: str = "units",
    ) -> tuple[PlacementScore, ...]:
        """``GetSpotPlacementScores``: how likely ``target_capacity`` spot instances (or vCPUs, or MiB, by
        ``capacity_unit``) of these types can be had, per region or per zone, best first."""
        if target_capacity < 1:
            raise ValueError(f"target_capacity must be at least 1, got {target_capacity}")
        if not instance_types:
            raise ValueError("name at least one instance type, such as p5.48xlarge")
        asked = list(regions or self.settings.regions)
        region = self.settings.regions[0]
        scores: list[PlacementScore] = []
        token = ""
        pages = 0
        while True:
            params: dict[str, Any] = {
                "InstanceTypes": list(instance_types),
                "TargetCapacity": target_capacity,
                "TargetCapacityUnitType": capacity_unit,
                "SingleAvailabilityZone": single_availability_zone,
                "RegionNames": asked,
                "MaxResults": PAGE_SIZE,
            }
            if token:
                params["NextToken"] = token
            what = f"GetSpotPlacementScores (page {pages + 1})"
            answer = self._call(region, "get_spot_placement_scores", what, **params)
            pages += 1
            page = answer.get("SpotPlacementScores")
            if not isinstance(page, list):
                raise ProviderError(AWS, f"{what}: the answer has no spotPlacementScoreSet")
            for index, item in enumerate(page):
                scores.append(_placement_score(item, f"{what}: item {index + 1}"))
            token = answer.get("NextToken") or ""
            if not token:
                break
            if pages >= self.settings.max_pages:
                raise page_cap_error(
                    AWS, "GetSpotPlacementScores", self.settings.max_pages, "SCALAR_AWS_MAX_PAGES"
                )
        return tuple(sorted(scores, key=lambda s: (-s.score, s.region, s.availability_zone_id or "")))


def _placement_score(item: Mapping[str, Any], where: str) -> PlacementScore:
    region = str(_require(item, "Region", "region", where))
    score = _require(item, "Score", "score", where)
    if not isinstance(score, int) or not 1 <= score <= 10:
        raise ProviderError(AWS, f"{where} has score {score!r}, not a whole number from 1 to 10")
    zone = item.get("AvailabilityZoneId") or None
    return PlacementScore(region=region, score=score, availability_zone_id=zone)
