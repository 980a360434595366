"""The storage port: both backends keep keys in their prefix, publish objects atomically, leave
nothing behind on failure, and sign links that expire."""

from __future__ import annotations

import hashlib
import os
import urllib.error
import urllib.request

import pytest

from shared.storage import InvalidKey, InvalidLink, LinkExpired, StorageError, object_key
from shared.storage.backends.local import LocalBackend
from shared.storage.backends.s3 import S3Backend
from tests.support.s3_server import S3Server
from tests.support.wait import wait_for

MiB = 1024 * 1024


@pytest.mark.parametrize(
    "key",
    [
        "../x",
        "/etc/passwd",
        "a/../../b",
        "a//b",
        "a/./b",
        "",
        "a/",
        ".hidden",
        "a/b\nc",
        "a\\..\\b",
    ],
)
def test_keys_that_could_escape_their_prefix_are_refused(
    local_storage: LocalBackend, key: str
) -> None:
    with pytest.raises(InvalidKey):
        local_storage.open_writer(key, "text/plain")
    with pytest.raises(InvalidKey):
        object_key("orgs", key)


def test_a_symlink_cannot_lead_a_key_out_of_the_bucket(
    local_storage: LocalBackend, tmp_path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, local_storage.base / "link")
    with pytest.raises(InvalidKey):
        local_storage.put("link/secret.txt", b"x", "text/plain")
    assert not list(outside.iterdir())


def test_local_object_is_invisible_until_commit_and_abort_leaves_nothing(
    local_storage: LocalBackend,
) -> None:
    key = object_key("orgs", "o1", "exports", "e1", "a.csv")
    with local_storage.open_writer(key, "text/csv") as writer:
        writer.write(b"a,b\r\n")
        assert not local_storage.exists(key) and len(local_storage.pending()) == 1
        stored = writer.commit()
    assert local_storage.read(key) == b"a,b\r\n"
    assert stored.sha256 == hashlib.sha256(b"a,b\r\n").hexdigest() and stored.size_bytes == 5

    with (
        pytest.raises(RuntimeError),
        local_storage.open_writer(object_key("orgs", "o1", "b.csv"), "text/csv") as w,
    ):
        w.write(b"partial")
        raise RuntimeError("boom")
    assert local_storage.pending() == [] and local_storage.list_keys("orgs") == [key]


def test_local_signed_link_resolves_and_refuses_tampering_and_expiry(
    local_storage: LocalBackend,
) -> None:
    key = object_key("orgs", "o1", "r.csv")
    local_storage.put(key, b"data", "text/csv")
    local_storage.clock = lambda: 1_000_000.0
    url = local_storage.signed_url(key, expires_in=60, filename="r.csv")
    assert local_storage.resolve_link(url, now=1_000_059.0).key == key
    with pytest.raises(LinkExpired):
        local_storage.resolve_link(url, now=1_000_060.0)
    with pytest.raises(InvalidLink):
        local_storage.resolve_link(url.replace("o1", "o2"), now=1_000_000.0)
    with pytest.raises(InvalidLink):
        local_storage.resolve_link(
            url.replace("expires=1000060", "expires=9000060"), now=1_000_000.0
        )


def test_s3_large_object_goes_up_in_parts_with_its_checksum(s3_storage: S3Backend) -> None:
    data = os.urandom(MiB) * 12  # 12 MiB: three parts of 5, 5 and 2 MiB
    key = object_key("orgs", "o1", "big.bin")
    with s3_storage.open_writer(key, "application/octet-stream") as writer:
        for i in range(0, len(data), 256 * 1024):
            writer.write(data[i : i + 256 * 1024])
        assert writer.upload_id is not None and not s3_storage.exists(key)
        stored = writer.commit()
    assert stored.sha256 == hashlib.sha256(data).hexdigest() and stored.size_bytes == len(data)
    assert s3_storage.read(key) == data
    assert s3_storage.pending() == []


def test_s3_failed_part_aborts_the_upload_and_leaves_nothing(
    s3_storage: S3Backend, s3_server: S3Server
) -> None:
    s3_server.gate.failing_parts = {2}
    key = object_key("orgs", "o1", "broken.bin")
    with (
        pytest.raises(StorageError, match=r"upload of .* failed"),
        s3_storage.open_writer(key, "x/y") as writer,
    ):
        for _ in range(12):
            writer.write(b"z" * MiB)
        writer.commit()
    assert s3_server.gate.part_failures >= 1
    assert not s3_storage.exists(key) and s3_storage.pending() == []


def test_s3_discard_aborts_the_upload_of_a_writer_that_died(s3_storage: S3Backend) -> None:
    key = object_key("orgs", "o1", "orphan.bin")
    writer = s3_storage.open_writer(key, "x/y")
    tokens: list[dict[str, object]] = []
    writer.on_token = tokens.append
    writer.write(b"q" * (6 * MiB))  # the first part is sent: an upload now exists
    assert len(s3_storage.pending()) == 1 and tokens[-1]["upload_id"]
    s3_storage.discard(tokens[-1])  # what the next attempt does with the checkpointed token
    assert s3_storage.pending() == [] and not s3_storage.exists(key)


def test_s3_presigned_link_downloads_then_expires(s3_storage: S3Backend) -> None:
    key = object_key("orgs", "o1", "link.csv")
    s3_storage.put(key, b"a,b\r\n1,2\r\n", "text/csv")
    url = s3_storage.signed_url(key, expires_in=1, filename="link.csv")
    with urllib.request.urlopen(url) as answer:
        assert answer.read() == b"a,b\r\n1,2\r\n"
        assert "link.csv" in answer.headers["Content-Disposition"]

    def refused() -> int | None:
        try:
            urllib.request.urlopen(url).close()
        except urllib.error.HTTPError as exc:
            return exc.code
        return None

    assert wait_for(refused, timeout=5, interval=0.2, what="the presigned link to expire") == 403
