"""alkstore's stored ``last_error`` text read back as Django's ``TaskError``."""

from __future__ import annotations

import traceback

import pytest

from tests.django_backend.conftest import Django


def _stored(exc: BaseException) -> str:
    """The worker's ``last_error`` format: ``Type: message`` then the traceback."""
    return f"{type(exc).__name__}: {exc}\n" + "".join(traceback.format_exception(exc))


class Declined(Exception):
    pass


def _raised(exc: BaseException) -> BaseException:
    try:
        raise exc
    except BaseException as e:
        return e


@pytest.mark.parametrize(
    ("exc", "path"),
    [
        (ValueError("bad: value"), "builtins.ValueError"),
        (Declined("card\ndeclined"), f"{__name__}.Declined"),
        (TimeoutError(), "builtins.TimeoutError"),
    ],
)
def test_an_exceptions_error_names_its_class_and_keeps_its_traceback(
    django_project: Django, exc: BaseException, path: str
) -> None:
    from alkstore.contrib.django.calls import error_of

    error = error_of(_stored(_raised(exc)))
    assert error.exception_class_path == path
    assert error.traceback.startswith("Traceback (most recent call last):")
    assert issubclass(error.exception_class, type(exc))


def test_a_chained_exception_is_named_by_the_one_raised_last(django_project: Django) -> None:
    from alkstore.contrib.django.calls import error_of

    try:
        try:
            raise KeyError("inner")
        except KeyError as inner:
            raise Declined("outer") from inner
    except Declined as e:
        error = error_of(_stored(e))
    assert error.exception_class_path == f"{__name__}.Declined"
    assert "KeyError" in error.traceback


@pytest.mark.parametrize(
    "text", ["max attempts exceeded", "expired", "unknown task 'x' (this worker knows: none)"]
)
def test_a_reason_that_no_exception_raised_reads_as_job_dead(
    django_project: Django, text: str
) -> None:
    from alkstore.contrib.django.calls import error_of
    from alkstore.errors import JobDeadError

    error = error_of(text)
    assert error.exception_class is JobDeadError and error.traceback == text
