"""An S3 endpoint for tests: moto's server mode on 127.0.0.1, with IAM enforced.

`running()` runs moto in a thread of the test process (`ThreadedMotoServer`, port 0 = a free
one), creates a bucket and two IAM users — `rw` (every S3 action) and `ro` (read and list
only) — and then switches moto's request authorization on (`POST /moto-api/reset-auth`
with 0: from then on every request must be signed by a known key and be allowed by that
key's policies). Before that switch moto accepts anything, which is how the users and the
bucket get created. moto needs one fix for that (`_raw_query_signed`, getmoto/moto#5948).

edgebuild takes credentials only from fsspec's and AWS's usual configuration, so the
endpoint and the keys are handed over as environment variables alone
(`S3Server.env(...)`): `FSSPEC_S3_ENDPOINT_URL` (fsspec reads `FSSPEC_<PROTOCOL>_<KWARG>`
into `fsspec.config.conf` when `fsspec.config` is first imported; s3fs gets it as the
`endpoint_url` argument) and `AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY` /
`AWS_DEFAULT_REGION` (botocore's environment provider). A subprocess started with that
environment (an `edgebuild` run) sees the same S3. In this process fsspec has long read
its configuration, so `configure(env)` also re-reads it and drops s3fs's cached instances.
"""

from __future__ import annotations

import json
import logging
import os
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

BUCKET = "edgebuild-remote"
REGION = "us-east-1"

READ_ONLY_POLICY = {
    "Version": "2012-10-17",
    "Statement": [{"Effect": "Allow", "Action": ["s3:GetObject", "s3:ListBucket",
                                                 "s3:GetBucketLocation"],
                   "Resource": [f"arn:aws:s3:::{BUCKET}", f"arn:aws:s3:::{BUCKET}/*"]}],
}
FULL_POLICY = {
    "Version": "2012-10-17",
    "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}],
}
# The variables `configure` owns: set from the env it is given, removed otherwise (a
# developer's own AWS profile or fsspec S3 settings must not leak into the tests).
OWNED_PREFIXES = ("FSSPEC_S3", "AWS_")


def owned() -> dict[str, str]:
    return {name: value for name, value in os.environ.items()
            if name.startswith(OWNED_PREFIXES)}


@dataclass(frozen=True)
class Keys:
    key: str
    secret: str


@dataclass(frozen=True)
class S3Server:
    endpoint: str
    bucket_url: str  # s3://BUCKET
    rw: Keys
    ro: Keys

    def env(self, keys: Keys | None = None) -> dict[str, str]:
        """The environment an edgebuild process needs to use this S3 with `keys`
        (default: the read-write user)."""
        keys = keys or self.rw
        return {"FSSPEC_S3_ENDPOINT_URL": self.endpoint, "AWS_ACCESS_KEY_ID": keys.key,
                "AWS_SECRET_ACCESS_KEY": keys.secret, "AWS_DEFAULT_REGION": REGION,
                # no ~/.aws of whoever runs the tests, no wait for EC2's metadata service
                "AWS_SHARED_CREDENTIALS_FILE": os.devnull, "AWS_CONFIG_FILE": os.devnull,
                "AWS_EC2_METADATA_DISABLED": "true"}


@contextmanager
def running() -> Iterator[S3Server]:
    """A moto S3 server with the bucket and both users, IAM enforced; stopped on exit."""
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        found = _populate(endpoint)
        with _raw_query_signed():
            _set_auth(endpoint, 0)
            try:
                yield found
            finally:
                _set_auth(endpoint, float("inf"))  # moto's settings are this process's
    finally:
        server.stop()


@contextmanager
def _raw_query_signed() -> Iterator[None]:
    """Work around getmoto/moto#5948: with IAM enforced, moto's server mode rejects every
    listing whose query has a `/` (`prefix=a%2Fb`, `delimiter=%2F`: all of s3fs's) as
    SignatureDoesNotMatch, because it re-signs werkzeug's `request.url`, which has `%2F`
    decoded to `/`, while the client signed the encoded query. For the block, moto's
    authenticator (only it) sees the request line as sent (`RAW_URI`)."""
    from moto.core.responses import ActionAuthenticatorMixin

    original = ActionAuthenticatorMixin._authenticate_and_authorize_action

    def authenticate(self: Any, iam_request_cls: type, resource: str = "*") -> None:
        environ = getattr(getattr(self, "request", None), "environ", None) or {}
        raw = environ.get("RAW_URI")
        if not raw:
            return original(self, iam_request_cls, resource)
        decoded, self.uri = self.uri, f"http://moto{raw}"  # only path and query are read
        try:
            return original(self, iam_request_cls, resource)
        finally:
            self.uri = decoded

    ActionAuthenticatorMixin._authenticate_and_authorize_action = authenticate
    try:
        yield
    finally:
        ActionAuthenticatorMixin._authenticate_and_authorize_action = original


def _populate(endpoint: str) -> S3Server:
    import boto3

    _reset(endpoint)  # moto's backends are per process: a server started earlier in this
    # pytest process (another test module) left its bucket and users behind

    session = boto3.session.Session(aws_access_key_id="setup", aws_secret_access_key="setup",
                                    region_name=REGION)
    session.client("s3", endpoint_url=endpoint).create_bucket(Bucket=BUCKET)
    iam = session.client("iam", endpoint_url=endpoint)
    users = {name: _user(iam, name, policy)
             for name, policy in (("rw", FULL_POLICY), ("ro", READ_ONLY_POLICY))}
    return S3Server(endpoint, f"s3://{BUCKET}", users["rw"], users["ro"])


def _user(iam: Any, name: str, policy: dict) -> Keys:
    iam.create_user(UserName=name)
    iam.put_user_policy(UserName=name, PolicyName=f"{name}-s3", PolicyDocument=json.dumps(policy))
    created = iam.create_access_key(UserName=name)["AccessKey"]
    return Keys(created["AccessKeyId"], created["SecretAccessKey"])


def _reset(endpoint: str) -> None:
    with urllib.request.urlopen(urllib.request.Request(f"{endpoint}/moto-api/reset",
                                                       data=b"", method="POST"),
                                timeout=10) as response:
        response.read()


def _set_auth(endpoint: str, free_requests: float) -> None:
    """moto checks signatures and policies once it has served `free_requests` requests."""
    request = urllib.request.Request(f"{endpoint}/moto-api/reset-auth",
                                     data=str(free_requests).encode(), method="POST",
                                     # not a form: moto reads the raw body
                                     headers={"Content-Type": "text/plain"})
    with urllib.request.urlopen(request, timeout=10) as response:
        response.read()


def configure(env: Mapping[str, str]) -> None:
    """Make this process use `env` (see `S3Server.env`) as a fresh edgebuild would:
    environment, fsspec's configuration re-read, no cached s3fs instance."""
    for name in owned():
        del os.environ[name]
    os.environ.update(env)
    refresh_fsspec()


def refresh_fsspec() -> None:
    """Re-read fsspec's configuration and drop the cached S3 filesystems, whose botocore
    clients hold the credentials they were made with — unless the variables that matter
    are the ones they were made with (a new client costs 0.3 s)."""
    import fsspec.config
    import s3fs

    global _applied
    snapshot = owned()
    if snapshot == _applied:
        return
    fsspec.config.conf.clear()
    fsspec.config.set_conf_files(fsspec.config.conf_dir, fsspec.config.conf)
    fsspec.config.set_conf_env(fsspec.config.conf)
    s3fs.S3FileSystem.clear_instance_cache()
    _applied = snapshot


_applied: dict[str, str] | None = None  # what the cached clients were made with


@contextmanager
def configured(env: Mapping[str, str]) -> Iterator[None]:
    """`configure(env)` for the block, then the environment as it was."""
    saved = owned()
    configure(env)
    try:
        yield
    finally:
        configure(saved)
