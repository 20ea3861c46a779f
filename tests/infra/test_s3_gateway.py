"""The S3 gateway used by the test suite enforces SigV4: signatures, secrets and presigned-URL expiry.

These properties are why the suite runs against OpenStack Swift's s3api (infra/swift/start.sh) rather than
moto, whose server accepts bad signatures and expired URLs.
"""

import os
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import boto3
import botocore.auth
import pytest
import urllib3
from botocore.client import BaseClient
from botocore.config import Config
from botocore.exceptions import ClientError

pytestmark = pytest.mark.s3

BUCKET = os.environ.get("CERES_S3_BUCKET_CAPTURES", "ceres-captures")


def s3_client(secret: str | None = None) -> BaseClient:
    endpoint = os.environ.get("CERES_S3_ENDPOINT_URL")
    if not endpoint:
        pytest.skip("CERES_S3_ENDPOINT_URL is not set; start the gateway with infra/swift/start.sh")
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name=os.environ.get("CERES_S3_REGION", "us-east-1"),
        aws_access_key_id=os.environ.get("CERES_S3_ACCESS_KEY_ID", "test:tester"),
        aws_secret_access_key=secret or os.environ.get("CERES_S3_SECRET_ACCESS_KEY", "testing"),
        config=Config(signature_version="s3v4", s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
    )


@pytest.fixture
def s3() -> BaseClient:
    return s3_client()


@pytest.fixture
def stored_object(s3: BaseClient) -> Iterator[tuple[str, bytes]]:
    key = f"tests/infra/{uuid.uuid4().hex}"
    body = os.urandom(256)
    s3.put_object(Bucket=BUCKET, Key=key, Body=body)
    yield key, body
    s3.delete_object(Bucket=BUCKET, Key=key)


def has_s3_error(response: urllib3.BaseHTTPResponse, code: str) -> bool:
    return f"<Code>{code}</Code>".encode() in response.data


def test_wrong_secret_is_refused(stored_object: tuple[str, bytes]) -> None:
    key, _ = stored_object
    intruder = s3_client(secret="not-the-secret")
    with pytest.raises(ClientError) as refused:
        intruder.get_object(Bucket=BUCKET, Key=key)
    assert refused.value.response["Error"]["Code"] == "SignatureDoesNotMatch"
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403


def test_presigned_get_serves_the_object_and_only_that_object(s3: BaseClient, stored_object: tuple[str, bytes]) -> None:
    key, body = stored_object
    url = s3.generate_presigned_url("get_object", Params={"Bucket": BUCKET, "Key": key}, ExpiresIn=60)

    response = urllib3.request("GET", url)
    assert response.status == 200
    assert response.data == body

    # The signature covers the path: the same query string cannot fetch another key.
    tampered = urllib3.request("GET", url.replace(key, key + "-other"))
    assert tampered.status == 403
    assert has_s3_error(tampered, "SignatureDoesNotMatch")


def presigned_in_the_past(s3: BaseClient, key: str, signed_at: datetime, expires_in: int) -> str:
    """A GET link as the client would have signed it at ``signed_at`` (botocore's signing clock set back)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(botocore.auth, "get_current_datetime", lambda remove_tzinfo=True: signed_at)
        url = s3.generate_presigned_url("get_object", Params={"Bucket": BUCKET, "Key": key}, ExpiresIn=expires_in)
    assert f"X-Amz-Date={signed_at:%Y%m%dT%H%M%SZ}" in url and f"X-Amz-Expires={expires_in}" in url
    return url


def test_expired_presigned_url_is_refused(s3: BaseClient, stored_object: tuple[str, bytes]) -> None:
    """Signed ten minutes ago for one minute: expired by the gateway's own clock, without waiting for it."""
    key, _ = stored_object
    signed_at = datetime.now(UTC).replace(tzinfo=None, microsecond=0) - timedelta(minutes=10)
    url = presigned_in_the_past(s3, key, signed_at, expires_in=60)

    response = urllib3.request("GET", url)
    assert response.status == 403
    assert has_s3_error(response, "AccessDenied")
    assert b"expired" in response.data
