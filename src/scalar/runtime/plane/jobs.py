"""``JobService``: jobs in and out of the control plane: submit (checked, into the durable inbox), cancel,
read, list, preview, and the leader's explanation and the stored story of one job.

A job is answered as ``wire/jobs.py``'s ``JobOut`` (the model ``GET /jobs/{id}`` sends), a page of them as a
list; the preview as ``wire/views.py``'s ``PreviewOut``. The serverless endpoints, which run their workers as
jobs inside the runtime, read the stored job documents instead (``JobDocuments``: ``runtime/jobs.py``'s job
dicts, with what the API never shows, such as ``endpoint_id`` and sealed ``env`` values).

Any process may accept a job (``store.accept``); the leader's controller consumes the inbox. A submission
is judged on the offers the leader last published (``_validation_offers``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from scalar.domain.offers import Offer
from scalar.domain.reasons import Reason
from scalar.engine import JobCancelRequested, JobSubmitted
from scalar.engine.codec import event_to_dict
from scalar.engine.validation import validate_job_spec
from scalar.runtime import auth as auth_mod
from scalar.runtime import preview as job_preview
from scalar.runtime import secrets as secrets_mod
from scalar.runtime.agents import allocated_ports
from scalar.runtime.feed import PriceCollector
from scalar.runtime.jobs import ACCEPTED_REASON, new_job_id, spec_dict, spec_from_fields
from scalar.runtime.leader import PUBLISHED_OFFERS, decode_offers
from scalar.runtime.plane.core import PlaneCore
from scalar.runtime.views import LEADER_WAIT_S
from scalar.store import CANCEL, SUBMIT, Decision
from scalar.wire.jobs import JobOut
from scalar.wire.views import PreviewOut

PUBLISHED_OFFERS_FRESH_S = (
    1.0  # how long an API replica reuses the leader's stored offers before reading again
)


class JobRejectedError(Exception):
    """A submission refused at once; ``reasons`` name the field or resource and how to fix it."""

    def __init__(self, reasons: list[Reason]) -> None:
        self.reasons = list(reasons)
        super().__init__("job refused: " + "; ".join(r.message for r in self.reasons))


class JobService:
    """The job calls of one control-plane process, over its ``PlaneCore``. ``secret_box`` gives the key
    secret env values are sealed with (``AccessService.secret_box``)."""

    def __init__(self, core: PlaneCore, secret_box: Callable[[], secrets_mod.SecretBox]) -> None:
        self._core = core
        self._secret_box = secret_box
        self._offers_cache: tuple[float, tuple[Offer, ...]] | None = None

    def _validation_offers(self, now: datetime) -> tuple[Offer, ...]:
        """The offers a submission is judged on: the leader's (in its process, published after each step; in
        an API replica, stored with its last market step), else a recent collection of our own."""
        _, leader = self._core.opened()
        offers = leader.published_offers  # swapped in after each step: read without waiting for one
        if offers:
            return offers
        cached = self._offers_cache
        if cached is not None and time.monotonic() - cached[0] < PUBLISHED_OFFERS_FRESH_S:
            return cached[1]
        store, _ = (
            self._core.opened()
        )  # an API replica: the offers the leader stored with its last market step
        with store.read() as tx:
            offers = decode_offers(tx.get_state(PUBLISHED_OFFERS))
        if offers:
            self._offers_cache = (time.monotonic(), offers)
            return offers
        cached = self._offers_cache
        if cached is not None and time.monotonic() - cached[0] < self._core.settings.price_interval_s:
            return cached[1]
        collected, _, _ = PriceCollector(self._core.providers, self._core.settings.controller).collect(now)
        self._offers_cache = (time.monotonic(), collected)
        return collected

    def submit_document(self, fields: Mapping[str, Any]) -> dict[str, Any]:
        """Validate and accept a job into the durable inbox (any process may); returns the stored job
        document (state PENDING). Raises ``JobRejectedError`` with every reason, writing nothing."""
        store, _ = self._core.opened()
        now = self._core.clock()
        fields, sealing = secrets_mod.seal_job_fields(fields, self._secret_box)  # docs/security.md
        if sealing:
            raise JobRejectedError(sealing)
        spec, problems = spec_from_fields(fields, new_job_id(now), now)
        if spec is not None:
            problems = validate_job_spec(spec, self._core.settings.controller, self._validation_offers(now))
        if spec is None or problems:
            raise JobRejectedError(problems)
        job = spec_dict(spec, "PENDING", ACCEPTED_REASON, "accepted")
        with store.accept() as tx:
            tx.add_inbox(SUBMIT, spec.job_id, event_to_dict(JobSubmitted("inbox", spec)), now=now)
            tx.upsert_projection("jobs", spec.job_id, "PENDING", job, at=now)
        return job

    def submit_job(self, fields: Mapping[str, Any]) -> JobOut:
        """``submit_document``'s job as ``POST /jobs`` sends it (state PENDING)."""
        return JobOut.model_validate(self.submit_document(fields))

    def cancel_document(self, job_id: str, tenant: str | None = None) -> dict[str, Any]:
        """Request cancellation (durable inbox); the stored job document with ``cancel_requested``.
        ``KeyError`` if the job is unknown (or, with ``tenant``, another tenant's)."""
        store, _ = self._core.opened()
        now = self._core.clock()
        with store.accept() as tx:
            row = tx.get_projection("jobs", job_id)
            if row is None or (tenant is not None and auth_mod.owner_of(row.data) != tenant):
                raise KeyError(job_id)
            tx.add_inbox(CANCEL, job_id, event_to_dict(JobCancelRequested("inbox", job_id)), now=now)
        return {**row.data, "cancel_requested": True}

    def cancel_job(self, job_id: str, tenant: str | None = None) -> JobOut:
        """``cancel_document``'s job as ``DELETE /jobs/{id}`` sends it."""
        return JobOut.model_validate(self.cancel_document(job_id, tenant))

    def get_document(self, job_id: str, tenant: str | None = None) -> dict[str, Any] | None:
        """The stored job document (with the ports its agent allocated), or ``None`` if unknown (or, with
        ``tenant``, another tenant's)."""
        store, _ = self._core.opened()
        with store.read() as tx:
            row = tx.get_projection("jobs", job_id)
            ports = None if row is None else allocated_ports(tx.conn, row.data)
        if row is None or (tenant is not None and auth_mod.owner_of(row.data) != tenant):
            return None
        return dict(row.data) if ports is None else {**row.data, "allocated_ports": ports}

    def get_job(self, job_id: str, tenant: str | None = None) -> JobOut | None:
        """The job as ``GET /jobs/{id}`` sends it, or ``None`` if unknown (or, with ``tenant``, another
        tenant's)."""
        document = self.get_document(job_id, tenant)
        return None if document is None else JobOut.model_validate(document)

    def list_jobs(
        self,
        state: str | None = None,
        limit: int = 100,
        offset: int = 0,
        tenant: str | None = None,
        newest_first: bool = False,
        after: str | None = None,
    ) -> list[JobOut]:
        """Jobs in submission order (ids sort by submission time; ``newest_first``: the other way),
        optionally only those in ``state`` (and, with ``tenant``, only that tenant's); ``after``: only the
        jobs past that id in this order (keyset paging, ``api/paging.py``). Each as ``GET /jobs`` lists it."""
        store, _ = self._core.opened()
        wanted = state.upper() if state else None
        with store.read() as tx:
            if tenant is not None:
                documents = auth_mod.list_jobs_of_tenant(
                    tx, tenant, wanted, limit, offset, newest_first, after
                )
            else:
                rows = tx.list_projection(
                    "jobs", wanted, limit=limit, offset=offset, descending=newest_first, after=after
                )
                documents = [r.data for r in rows]
        return [JobOut.model_validate(d) for d in documents]

    def documents(self) -> JobDocuments:
        """These jobs as stored documents, for the serverless endpoints' workers (``JobDocuments``)."""
        return JobDocuments(self)

    def preview_job(self, fields: Mapping[str, Any]) -> PreviewOut:
        """What submitting ``fields`` would cost and whether it needs a purchase (runtime/preview.py), as
        ``POST /jobs/preview`` sends it; raises ``JobRejectedError`` as ``submit_job`` would. Writes nothing."""
        store, _ = self._core.opened()
        now = self._core.clock()
        offers = self._validation_offers(now)
        spec, problems = job_preview.checked_spec(fields, self._core.settings, offers, now)
        if spec is None or problems:
            raise JobRejectedError(problems)
        return PreviewOut.model_validate(job_preview.preview(store, self._core.settings, spec, now))

    def explain_job(self, job_id: str) -> list[str] | None:
        """The leader's explanation lines (``None`` on a follower, for an unknown job, or while a step is
        being computed: never waits for one)."""
        _, leader = self._core.opened()
        if not leader.lock.acquire(timeout=LEADER_WAIT_S):  # a step is being computed: never wait for it
            return None
        try:
            if leader.controller is None:
                return None
            explanation = leader.controller.explain(job_id)
        finally:
            leader.lock.release()
        return None if explanation is None else list(explanation.lines)

    def story(self, entity_id: str, limit: int | None = 100) -> list[Decision]:
        """The stored decisions about ``entity_id``, oldest first (any process)."""
        store, _ = self._core.opened()
        with store.read() as tx:
            return tx.story(entity_id, limit=limit)


class JobDocuments:
    """The job calls the serverless endpoints use to run their workers as jobs (``EndpointService``'s
    ``JobsPort``), answering the stored job documents (``runtime/jobs.py``): a worker reads keys the API
    never shows (its job's ``endpoint_id``, sealed ``env`` values handed to the worker process). Renderers
    read ``JobService``'s ``JobOut`` answers instead."""

    def __init__(self, jobs: JobService) -> None:
        self._jobs = jobs

    def submit_job(self, fields: Mapping[str, Any]) -> dict[str, Any]:
        return self._jobs.submit_document(fields)

    def cancel_job(self, job_id: str) -> dict[str, Any]:
        return self._jobs.cancel_document(job_id)

    def get_job(self, job_id: str) -> dict[str, Any] | None:
        return self._jobs.get_document(job_id)
