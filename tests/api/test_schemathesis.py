"""Property-based fuzzing of the live API from its own OpenAPI schema (schemathesis): no request, valid or
not, gets a 500, and every answer is documented: its status code, its media type (problem+json for
errors), its body's schema, and the ``Allow`` header of a 405.

Runs against a real control plane (SQLite, built-in market; opened, no leader threads) with
authentication on, over real HTTP, as an admin (so every route is reachable). Bounded: a few examples per
operation, no shrinking, well under a minute on 2 cores.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.result import Ok
from schemathesis.specs.openapi.checks import (
    allow_header_conformance,
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from scalar.api.app import create_app
from scalar.runtime import ControlPlane
from tests.api.live_server import serve
from tests.runtime.helpers import Clock, settings_for

pytestmark = pytest.mark.slow  # schemathesis over the whole API

# Examples per operation: valid requests (POSITIVE) and invalid ones (NEGATIVE: wrong types, out-of-range
# values, missing fields): every parameter's edges a few times; ~30 s for ~45 operations on 2 cores.
EXAMPLES = {GenerationMode.POSITIVE: 4, GenerationMode.NEGATIVE: 3}
# Revoking tokens: fuzzing it could revoke the fuzzer's own token (tests/security covers it).
SKIPPED = {("DELETE", "/tokens/{token_id}")}


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    tmp: Path = tmp_path_factory.mktemp("fuzz")
    cp = ControlPlane(settings_for(f"sqlite:///{tmp / 'fuzz.db'}", tmp, auth_required=True), clock=Clock())
    cp.open()
    try:
        token = cp.create_token("default", "admin", "fuzzer").token
        app = create_app(cp)
        app.state.rate_limiter.rate_per_s = app.state.rate_limiter.burst = 1e9  # the fuzzer is no abuser
        failures = app.state.agent_failure_limiter  # (its bogus agent credentials are not a flood either)
        failures.rate_per_s = failures.burst = 1e9
        with serve(app) as url:
            yield url, token
    finally:
        cp.stop()


def _fuzz(operation: Any, mode: GenerationMode, url: str, token: str, failures: list[str]) -> None:
    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=EXAMPLES[mode],
        deadline=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
        derandomize=True,
        database=None,
    )
    def run(case: Any) -> None:
        case.call_and_validate(
            base_url=url,
            headers={"Authorization": f"Bearer {token}"},
            checks=[
                not_a_server_error,
                status_code_conformance,
                content_type_conformance,
                response_schema_conformance,
                allow_header_conformance,
            ],
            timeout=30,
        )

    try:
        run()
    except Unsatisfiable:  # nothing invalid to send (an operation without parameters)
        pass
    except (Exception, BaseExceptionGroup) as exc:  # collect every failure, then fail once with all
        failures.append(f"{operation.label} ({mode.value}): {exc}"[:3000])


def test_no_500_and_no_schema_violation(live: tuple[str, str]) -> None:
    url, token = live
    schema = schemathesis.openapi.from_url(f"{url}/openapi.json")  # public: it holds no data
    results = list(schema.get_all_operations())
    invalid = [r.err() for r in results if not isinstance(r, Ok)]
    assert not invalid, invalid  # every operation of the schema can be tested
    operations = [r.ok() for r in results if isinstance(r, Ok)]
    assert len(operations) >= 8  # the jobs, market and auth routes at least
    failures: list[str] = []
    started = time.monotonic()
    for operation in operations:
        if (operation.method.upper(), operation.path) in SKIPPED:
            continue
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            _fuzz(operation, mode, url, token, failures)
    assert not failures, "\n\n".join(failures)
    assert time.monotonic() - started < 300, "the fuzz run is bounded by its examples, not time"
