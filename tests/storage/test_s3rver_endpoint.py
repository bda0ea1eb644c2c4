"""What the s3rver fixture is: a second S3 implementation lacking the optional features listed here.

The storage and service suites run on it to show that correctness does not depend on these features; if
an s3rver upgrade adds one of them, these tests say so and the fixture's description must change.
"""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.fixtures.s3 import S3Location
from tests.fixtures.s3rver import S3rverEndpoint

pytestmark = pytest.mark.s3

MiB = 1024 * 1024


def _code(error: pytest.ExceptionInfo[ClientError]) -> str:
    return str(error.value.response["Error"]["Code"])


def test_s3rver_answers_upload_part_copy_with_not_implemented(
    s3rver_client: Any, s3rver_location: S3Location, s3rver_endpoint: S3rverEndpoint
) -> None:
    bucket, source, target = s3rver_location.bucket, "t/source", "t/target"
    s3rver_client.put_object(Bucket=bucket, Key=source, Body=b"s" * MiB)
    upload = s3rver_client.create_multipart_upload(Bucket=bucket, Key=target)["UploadId"]
    with pytest.raises(ClientError) as error:
        s3rver_client.upload_part_copy(
            Bucket=bucket, Key=target, UploadId=upload, PartNumber=1, CopySource=f"{bucket}/{source}"
        )
    assert _code(error) == "NotImplemented"
    assert len(s3rver_endpoint.pending_upload_dirs(bucket)) == 1


def test_s3rver_cannot_abort_or_list_multipart_uploads(
    s3rver_client: Any, s3rver_location: S3Location, s3rver_endpoint: S3rverEndpoint
) -> None:
    bucket, key = s3rver_location.bucket, "t/object"
    upload = s3rver_client.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    with pytest.raises(ClientError) as aborted:
        s3rver_client.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload)
    assert _code(aborted) == "MethodNotAllowed"
    with pytest.raises(ClientError) as listed:
        s3rver_client.list_multipart_uploads(Bucket=bucket)
    assert _code(listed) == "NotImplemented"
    assert [path.name for path in s3rver_endpoint.pending_upload_dirs(bucket)] == [upload]


def test_s3rver_overwrites_despite_if_none_match(s3rver_client: Any, s3rver_location: S3Location) -> None:
    bucket, key = s3rver_location.bucket, "t/object"
    s3rver_client.put_object(Bucket=bucket, Key=key, Body=b"first")
    s3rver_client.put_object(Bucket=bucket, Key=key, Body=b"second", IfNoneMatch="*")
    assert s3rver_client.get_object(Bucket=bucket, Key=key)["Body"].read() == b"second"


def test_s3rver_completes_multipart_uploads_of_uploaded_parts(
    s3rver_client: Any, s3rver_location: S3Location, s3rver_endpoint: S3rverEndpoint
) -> None:
    bucket, key = s3rver_location.bucket, "t/object"
    upload = s3rver_client.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    parts = []
    for number, fill in ((1, b"a"), (2, b"b")):
        size = 5 * MiB if number == 1 else 10
        etag = s3rver_client.upload_part(
            Bucket=bucket, Key=key, UploadId=upload, PartNumber=number, Body=fill * size
        )["ETag"]
        parts.append({"PartNumber": number, "ETag": etag})
    s3rver_client.complete_multipart_upload(
        Bucket=bucket, Key=key, UploadId=upload, MultipartUpload={"Parts": parts}
    )
    assert s3rver_client.get_object(Bucket=bucket, Key=key)["Body"].read() == b"a" * 5 * MiB + b"b" * 10
    assert s3rver_endpoint.pending_upload_dirs(bucket) == []
