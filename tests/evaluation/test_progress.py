"""Eval progress: a bar on a terminal, plain lines every ``every_s`` seconds elsewhere."""

from __future__ import annotations

import io

from shortrun.evaluation.progress import Progress


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_without_a_tty_a_line_every_interval_and_a_done_line():
    out, clock = io.StringIO(), Clock()
    p = Progress(out, tty=False, every_s=10, clock=clock)
    with p.group("mse"), p.task("reconstructing", 1000, "images") as tick:
        tick(100)  # 0 s since the group started: quiet
        clock.now = 11
        tick(100)
        clock.now = 15
        tick(100)  # 4 s since the last line: quiet
        clock.now = 25
        tick(200)
    assert out.getvalue().splitlines() == [
        "eval: mse: reconstructing 200/1000 images (20%)",
        "eval: mse: reconstructing 500/1000 images (50%)",
        "eval: mse done in 25 s",
    ]


def test_short_groups_print_nothing_without_a_tty():
    out = io.StringIO()
    p = Progress(out, tty=False, every_s=30, clock=Clock())
    with p.group("fd"), p.task("sampling", 10, "samples") as tick:
        tick(10)
    assert out.getvalue() == ""


def test_a_tty_gets_a_bar_naming_the_group_and_task():
    out = io.StringIO()
    p = Progress(out, tty=True)
    with p.group("fd"), p.task("sampling", 4, "samples") as tick:
        tick(4)
    assert "fd: sampling" in out.getvalue() and "/4" in out.getvalue()


def test_off_is_silent_and_the_stream_decides_by_default():
    out = io.StringIO()
    p = Progress(out, enabled=False, tty=False, every_s=0)
    with p.group("x"), p.task("t", 1) as tick:
        tick(1)
    assert out.getvalue() == ""
    assert Progress(io.StringIO()).tty is False  # StringIO is no terminal
