"""redact_url (core/urls.py): a store URL as logs and messages may show it."""

from __future__ import annotations

import pytest

from alkstore.core.urls import redact_url


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (
            "postgresql://root:s3cret@127.0.0.1:5432/test",
            "postgresql://root:***@127.0.0.1:5432/test",
        ),
        ("postgresql://u:p%40ss@db/x?sslmode=require", "postgresql://u:***@db/x?sslmode=require"),
        ("postgresql://root@127.0.0.1/test", "postgresql://root@127.0.0.1/test"),
        ("sqlite:///alkstore.db", "sqlite:///alkstore.db"),
        ("sqlite:////tmp/a:b@c.db", "sqlite:////tmp/a:b@c.db"),
    ],
)
def test_redact_url_hides_only_the_password(url: str, shown: str) -> None:
    assert redact_url(url) == shown
