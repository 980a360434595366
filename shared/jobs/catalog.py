"""Every job of the fleet (DESIGN §2). Producers import these; workers bind handlers to them.

The jobs of the original domains are declared here, on the kernel's contracts; a domain that
brings its own declarations names them in its registration (`Domain.jobs`, shared/domains.py)
and they join `ALL`, `BY_NAME` and `QUEUES` when this module is first imported.
"""

from __future__ import annotations

from ..contracts import ai, chain, doc, email, export
from .ids import ChainJobId
from .requires import Requires
from .spec import JobSpec

EMAIL_SEND = JobSpec(email.EMAIL_SEND, queue="email", entity_type="scheduled_email")
EMAIL_SEQ_RUN_DUE = JobSpec(
    email.EMAIL_SEQ_RUN_DUE, queue="email", entity_type="email_sequence_slot"
)
AI_RUN = JobSpec(ai.AI_RUN, queue="ai", entity_type="ai_task")
EXPORT_BUILD = JobSpec(
    export.EXPORT_BUILD, queue="export", entity_type="export", time_limit_ms=3_600_000
)
#: A document's jobs need its stored bytes: only the upload creates its row.
_DOCUMENT = Requires("documents", made_by="the doc client's ingest_document")
DOC_INGEST = JobSpec(doc.DOC_INGEST, queue="doc", entity_type="document", requires=_DOCUMENT)
DOC_OCR = JobSpec(doc.DOC_OCR, queue="doc", entity_type="document", requires=_DOCUMENT)
DOC_EXTRACT_STRUCTURED = JobSpec(
    doc.DOC_EXTRACT_STRUCTURED, queue="doc", entity_type="document", requires=_DOCUMENT
)
DOC_INDEX_SEARCH = JobSpec(
    doc.DOC_INDEX_SEARCH, queue="doc", entity_type="document", requires=_DOCUMENT
)
CHAIN_MINT_BADGE = JobSpec(
    chain.CHAIN_MINT_BADGE,
    queue="chain-actions",
    entity_type="lottery_round",
    custom_id=ChainJobId("MINT_BADGE", "player"),
)
CHAIN_CLAIM_PRIZE = JobSpec(
    chain.CHAIN_CLAIM_PRIZE,
    queue="chain-actions",
    entity_type="lottery_round",
    custom_id=ChainJobId("CLAIM_PRIZE", "winner"),
)
CHAIN_CLAIM_REFUND = JobSpec(
    chain.CHAIN_CLAIM_REFUND,
    queue="chain-actions",
    entity_type="lottery_round",
    custom_id=ChainJobId("CLAIM_REFUND", "payer"),
)


def _registered() -> tuple[JobSpec, ...]:  # type: ignore[type-arg]
    from ..domains import job_specs

    return tuple(job_specs())


ALL: tuple[JobSpec, ...] = (  # type: ignore[type-arg]
    EMAIL_SEND,
    EMAIL_SEQ_RUN_DUE,
    AI_RUN,
    EXPORT_BUILD,
    DOC_INGEST,
    DOC_OCR,
    DOC_EXTRACT_STRUCTURED,
    DOC_INDEX_SEARCH,
    CHAIN_MINT_BADGE,
    CHAIN_CLAIM_PRIZE,
    CHAIN_CLAIM_REFUND,
    *_registered(),
)
BY_NAME: dict[str, JobSpec] = {spec.name: spec for spec in ALL}  # type: ignore[type-arg]
if len(BY_NAME) != len(ALL):
    _names = [spec.name for spec in ALL]
    raise ValueError(f"job declared twice: {sorted({n for n in _names if _names.count(n) > 1})}")
QUEUES: tuple[str, ...] = tuple(dict.fromkeys(spec.queue for spec in ALL))


def get(name: str) -> JobSpec:  # type: ignore[type-arg]
    from ..errors import UnknownJob

    try:
        return BY_NAME[name]
    except KeyError:
        raise UnknownJob(f"unknown job {name!r}; known: {', '.join(sorted(BY_NAME))}") from None
