"""The folder ``export_causal_lm`` writes: built in a temp folder beside it, swapped in whole.

``.<out>.jax2onnx-tmp-<owner>-<random>`` is written; at the end ``out`` (an earlier export) is moved
aside to ``.<out>.jax2onnx-old-<owner>-<random>``, the temp folder renamed to ``out``, the old one
removed. ``<owner>`` is core's (:func:`jax2onnx.frontend.claim_temp_token`: host, pid, start
time), so what a killed export left is told apart from what a running one (another process, or a
thread of this one) is writing: the next export into ``out`` removes the dead one's temp folder, and
a previous export that a kill between the swap's two renames left moved aside goes back to ``out``.

A failed or interrupted export (an error, Ctrl-C) removes its temp folder and leaves ``out`` as it
was; a full disk is one error naming the folder.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import shutil
from collections.abc import Iterator

from jax2onnx.frontend import claim_temp_token, disk_full_error, folder_lock, is_abandoned, remove_entry

from .errors import OptionError
from .genai_config import FILE as GENAI_CONFIG_FILE

TEMP, ASIDE = "jax2onnx-tmp-", "jax2onnx-old-"


@contextlib.contextmanager
def staging(out: pathlib.Path, marker: str = GENAI_CONFIG_FILE) -> Iterator[pathlib.Path]:
    """A temp folder beside ``out`` that replaces it when the body succeeds and vanishes when not;
    an existing ``out`` is replaced only when it holds ``marker`` (an earlier export's file)."""
    if out.exists() and not out.is_dir():
        raise OptionError(f"out_dir {str(out)!r} is a file; give a folder path")
    out.parent.mkdir(parents=True, exist_ok=True)
    with claim_temp_token() as token:
        with folder_lock(out.parent):
            clean_stale(out)
        if out.is_dir() and any(out.iterdir()) and not (out / marker).exists():
            raise OptionError(
                f"out_dir {str(out)!r} holds files but no {marker}: it is not an earlier export, so it is "
                "not replaced; give an empty or new folder"
            )
        temp = out.parent / f".{out.name}.{TEMP}{token}"
        aside = out.parent / f".{out.name}.{ASIDE}{token}"
        try:
            temp.mkdir()
            yield temp
            with folder_lock(out.parent):  # one swap at a time (threads, processes exporting to out)
                _swap(temp, out, aside)
        except BaseException as exc:
            shutil.rmtree(temp, ignore_errors=True)
            full = disk_full_error(exc, out.parent, f"the model folder {out.name!r}")
            if full is None:
                raise
            raise full from exc
        shutil.rmtree(aside, ignore_errors=True)


def _swap(temp: pathlib.Path, out: pathlib.Path, aside: pathlib.Path) -> None:
    moved = False
    try:
        if out.exists():
            out.rename(aside)
            moved = True
        temp.rename(out)
    except BaseException:
        if moved and not out.exists():  # interrupted between the renames: the previous export goes back
            aside.rename(out)
        raise


def clean_stale(out: pathlib.Path) -> list[str]:
    """Remove what exports into ``out`` that were killed left beside it (their temp folders, a
    previous export moved aside), returning the names; when ``out`` itself is missing (a kill
    between the swap's renames), the newest previous export moved aside is put back instead.
    Entries of running exports are left alone. Call it holding ``folder_lock(out.parent)``."""
    removed, aside = [], []
    try:
        names = os.listdir(out.parent)
    except OSError:
        return removed
    for name in names:
        for kind in (TEMP, ASIDE):
            prefix = f".{out.name}.{kind}"
            if name.startswith(prefix) and is_abandoned(out.parent / name, name[len(prefix) :]):
                (aside if kind == ASIDE else removed).append(name)
    if aside and not out.exists():
        newest = max(aside, key=lambda name: _mtime(out.parent / name))
        with contextlib.suppress(OSError):
            (out.parent / newest).rename(out)
            aside.remove(newest)
    removed += aside
    return [name for name in removed if remove_entry(str(out.parent / name))]


def _mtime(path: pathlib.Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0
