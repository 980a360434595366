"""S3-compatible backend (AWS S3, Cloudflare R2, MinIO, ... by endpoint URL), with boto3.

A writer buffers one part (`part_size`, at least 5 MiB as S3 requires of every part but the
last). An object smaller than one part is stored with a single PUT on commit; a larger one
becomes a multipart upload, started when the first part is full, each part sent as soon as it
is complete (memory stays at one part). `commit()` completes the upload; any failure, `abort()`
or leaving the `with` block on an exception aborts it, so no part lingers (billed and invisible
otherwise). A writer's `resume_token` names its upload so that another process can abort it
after a crash (`discard`). Links are presigned GET URLs.
"""

from __future__ import annotations

from typing import IO, TYPE_CHECKING, Any

from ..backend import ObjectNotFound, ObjectWriter, StorageBackend, StorageError, check_key

if TYPE_CHECKING:
    from shared.config import Settings

PROVIDER = "S3"
MIN_PART_SIZE = 5 * 1024 * 1024


class S3Writer(ObjectWriter):
    def __init__(self, backend: S3Backend, key: str, content_type: str) -> None:
        super().__init__(PROVIDER, backend.bucket, key, content_type)
        self._backend = backend
        self._client = backend.client
        self._buffer = bytearray()
        self._upload_id: str | None = None
        self._parts: list[dict[str, Any]] = []

    @property
    def resume_token(self) -> dict[str, Any]:
        return {"key": self.key, "upload_id": self._upload_id}

    @property
    def upload_id(self) -> str | None:
        return self._upload_id

    def _write(self, data: memoryview) -> None:
        self._buffer += data
        part_size = self._backend.part_size
        while len(self._buffer) >= part_size:
            chunk = bytes(self._buffer[:part_size])
            del self._buffer[:part_size]
            self._guarded(self._send_part, chunk)

    def _send_part(self, chunk: bytes) -> None:
        if self._upload_id is None:
            started = self._client.create_multipart_upload(
                Bucket=self.bucket, Key=self.key, ContentType=self.content_type
            )
            self._upload_id = started["UploadId"]
            self._token_changed()
        number = len(self._parts) + 1
        answer = self._client.upload_part(
            Bucket=self.bucket,
            Key=self.key,
            UploadId=self._upload_id,
            PartNumber=number,
            Body=chunk,
        )
        self._parts.append({"PartNumber": number, "ETag": answer["ETag"]})

    def _guarded(self, step: Any, *args: Any) -> None:
        """Run one upload step; on failure abort the upload at once and raise `StorageError`."""
        try:
            step(*args)
        except Exception as exc:
            self.abort()
            raise StorageError(f"upload of {self.key} failed: {type(exc).__name__}: {exc}") from exc

    def _commit(self) -> None:
        if self._upload_id is None:
            body = bytes(self._buffer)
            self._guarded(
                lambda: self._client.put_object(
                    Bucket=self.bucket, Key=self.key, Body=body, ContentType=self.content_type
                )
            )
        else:
            if self._buffer:
                self._guarded(self._send_part, bytes(self._buffer))
            self._guarded(
                lambda: self._client.complete_multipart_upload(
                    Bucket=self.bucket,
                    Key=self.key,
                    UploadId=self._upload_id,
                    MultipartUpload={"Parts": self._parts},
                )
            )
        self._buffer = bytearray()

    def _abort(self) -> None:
        self._buffer = bytearray()
        if self._upload_id is not None:
            upload_id, self._upload_id = self._upload_id, None
            self._backend.abort_upload(self.key, upload_id)


class S3Backend(StorageBackend):
    provider = PROVIDER

    def __init__(self, client: Any, bucket: str, *, part_size: int = 8 * 1024 * 1024) -> None:
        if part_size < MIN_PART_SIZE:
            raise ValueError(f"part_size must be at least {MIN_PART_SIZE} bytes (S3 rule)")
        self.client = client
        self.bucket = bucket
        self.part_size = part_size

    @classmethod
    def from_settings(cls, settings: Settings) -> S3Backend:
        import boto3
        from botocore.config import Config

        secret = settings.storage_s3_secret_access_key
        client = boto3.client(
            "s3",
            endpoint_url=settings.storage_s3_endpoint_url,
            region_name=settings.storage_s3_region,
            aws_access_key_id=settings.storage_s3_access_key_id,
            aws_secret_access_key=secret.get_secret_value() if secret else None,
            config=Config(
                signature_version="s3v4",
                s3={"addressing_style": settings.storage_s3_addressing_style},
                retries={"mode": "standard", "max_attempts": 3},
            ),
        )
        return cls(
            client, settings.storage_bucket, part_size=settings.storage_part_size_mb * 1024 * 1024
        )

    def abort_upload(self, key: str, upload_id: str) -> None:
        from botocore.exceptions import ClientError

        try:
            self.client.abort_multipart_upload(Bucket=self.bucket, Key=key, UploadId=upload_id)
        except ClientError as exc:
            if _code(exc) not in ("NoSuchUpload", "404"):
                raise

    def open_writer(self, key: str, content_type: str) -> S3Writer:
        return S3Writer(self, key, content_type)

    def discard(self, token: dict[str, Any]) -> None:
        upload_id = token.get("upload_id")
        if upload_id:
            self.abort_upload(check_key(str(token["key"])), str(upload_id))

    def open(self, key: str) -> IO[bytes]:
        from botocore.exceptions import ClientError

        try:
            answer = self.client.get_object(Bucket=self.bucket, Key=check_key(key))
        except ClientError as exc:
            if _code(exc) in ("NoSuchKey", "404"):
                raise ObjectNotFound(f"no object {key!r}") from None
            raise
        body: IO[bytes] = answer["Body"]
        return body

    def exists(self, key: str) -> bool:
        from botocore.exceptions import ClientError

        try:
            self.client.head_object(Bucket=self.bucket, Key=check_key(key))
        except ClientError as exc:
            if _code(exc) in ("NoSuchKey", "404", "NotFound"):
                return False
            raise
        return True

    def delete(self, key: str) -> None:
        self.client.delete_object(Bucket=self.bucket, Key=check_key(key))

    def list_keys(self, prefix: str) -> list[str]:
        pages = self.client.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=check_key(prefix) + "/" if prefix else ""
        )
        return sorted(obj["Key"] for page in pages for obj in page.get("Contents", ()))

    def pending(self) -> list[dict[str, Any]]:
        answer = self.client.list_multipart_uploads(Bucket=self.bucket)
        return [{"key": u["Key"], "upload_id": u["UploadId"]} for u in answer.get("Uploads", ())]

    def signed_url(self, key: str, *, expires_in: int, filename: str | None = None) -> str:
        params: dict[str, Any] = {"Bucket": self.bucket, "Key": check_key(key)}
        if filename:
            params["ResponseContentDisposition"] = f'attachment; filename="{filename}"'
        url: str = self.client.generate_presigned_url(
            "get_object", Params=params, ExpiresIn=expires_in
        )
        return url


def _code(exc: Any) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))
