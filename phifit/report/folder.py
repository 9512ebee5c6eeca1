"""The report folder, written whole or not at all.

A report is written into a folder beside its target, on the same file system, and moved into
place once every file is in it::

    reports/.NAME.phifit-partial-PID-XXXXXXXX/    the report being written (PID: the writer's)
    reports/NAME/                                  the target: absent, or the previous folder

A fresh target is the partial folder renamed.  An existing one is swapped with it in one step
where the kernel can (Linux's ``renameat2(RENAME_EXCHANGE)``), else by two renames (the previous
folder moved aside to ``.NAME.phifit-old-PID-XXXXXXXX``, the new one moved in); the previous folder
is deleted afterwards.  Before the swap the files in the previous folder that phifit did not write
(anything but ``index.html``, ``results.json``, ``posterior.nc``, the figures it draws and the
files its ``results.json`` lists) are hard-linked (or copied) into the new one, so they stay, as
they always did.  SIGINT and SIGTERM are held for the swap's few system calls.

So the target holds either the previous folder or the new report, never a mix of two tables'
outputs, whatever ends the writer.  A writer killed (SIGKILL) before the swap leaves its partial
folder beside the target, and one killed between the two renames leaves the previous folder
aside and the target absent: the next report into the same target puts that folder back, then
deletes the leftovers of writers that no longer run (their PID is in the name).  Leftovers are
hidden and git-ignored (``.*phifit-partial-*``, ``.*phifit-old-*``).

Where the target cannot be renamed (it is, or holds, this process's working folder, so that a
rename would leave the shell in a deleted folder; or it is a mount point; or its parent is not
writable) the partial folder is made inside the target (``NAME/.phifit-partial-PID-XXXXXXXX``)
and its files are moved in one by one: the previous page first out, the new page last in.  Killed
there, the target holds figures but no page, which the next report accepts as phifit's own.

A folder is written only when it is absent, empty, holds a previous phifit report (its
``results.json`` says ``"generator": "phifit"``) or holds nothing but the figures and temporary
files of a phifit report that was stopped before its ``results.json`` was written, unless
``force=True`` (:func:`check_report_dir`).
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import re
import secrets
import shutil
import signal
import sys
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from ..result import GENERATOR

#: Files of a report at the top of its folder (``posterior.nc`` with ``bayes=True``).
OWN_FILES = ("index.html", "results.json", "posterior.nc")
#: The name of a partial or an aside folder: its kind, the writer's PID and a random tag.
_LEFTOVER = re.compile(r"phifit-(partial|old)-(\d+)-[0-9a-f]+$")
#: A temporary file of :func:`write_text`: NAME.tmp-PID.
_TMP = re.compile(r"\.tmp-\d+$")


def check_report_dir(out_dir: str | os.PathLike, figure_names: Iterable[str], force: bool = False) -> None:
    """Refuse a non-empty folder that holds neither a previous phifit report nor only the partial
    output of one (figures named in ``figure_names``; unless force).  A target moved aside by a
    writer killed mid-swap is judged by that folder (the next writer puts it back)."""
    path = Path(out_dir)
    if path.exists() and not path.is_dir():
        raise NotADirectoryError(f"{path}: exists and is not a directory")
    current = path if path.exists() else _moved_aside(_real(path))
    if current is None or force or not any(current.iterdir()):
        return  # a new folder (parents included) is created when the report is written
    if listed_files(current) is None and not _only_partial_output(current, tuple(figure_names)):
        raise FileExistsError(
            f"{path}: not empty and holds no phifit report (no results.json "
            f"written by phifit); choose another folder or pass force=True (--force)"
        )


def listed_files(path: Path) -> set[str] | None:
    """The files (relative, '/'-separated) the phifit report in ``path`` lists in its
    ``results.json``; None if ``path`` holds no phifit report."""
    try:
        previous = json.loads((path / "results.json").read_text(encoding="utf-8"))
        if previous.get("generator") != GENERATOR:
            return None
        return {str(rel) for rel in previous.get("files", [])}
    except (OSError, ValueError, AttributeError, TypeError):
        return None


def is_own(rel: str, figure_names: Iterable[str], listed: Iterable[str] = ()) -> bool:
    """Whether ``rel`` (relative to a report folder, '/'-separated) is a file phifit writes there:
    a page, its data or posterior (:data:`OWN_FILES`), a figure (``figures/NAME.png`` or ``.svg``
    for a name of ``figure_names``), one of ``listed`` (what the previous report's
    ``results.json`` lists), a temporary file of one of these, or a partial folder of its own."""
    base = _TMP.sub("", rel)
    if base in OWN_FILES or base in set(listed):
        return True
    if "/" not in rel and _LEFTOVER.match(rel.lstrip(".")):
        return True
    folder, _, name = base.partition("/")
    stem, _, ext = name.rpartition(".")
    return folder == "figures" and "/" not in name and ext in ("png", "svg") and stem in set(figure_names)


@contextmanager
def staged(out_dir: str | os.PathLike, figure_names: Iterable[str]) -> Iterator[Path]:
    """A new, empty folder to write the report into, installed as ``out_dir`` when the block
    ends without an exception and deleted when it raises (module docstring).  On entry it puts
    back a target a killed writer moved aside and deletes the leftovers of writers that no longer
    run.  Check the target first (:func:`check_report_dir`)."""
    target = _real(Path(out_dir))
    names = tuple(figure_names)
    _put_back(target)
    _remove_leftovers(target)
    inside = _renaming_is_unsafe(target)
    stage = _new_folder(target if inside else target.parent, "" if inside else f".{target.name}.")
    try:
        yield stage
        if inside:
            _move_in(stage, target, names)
        else:
            _install(stage, target, names)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise


def write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file beside it (``NAME.tmp-PID``)."""
    tmp = path.with_name(f"{path.name}.tmp-{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


# ------------------------------------------------------------------------------ leftovers
def _real(path: Path) -> Path:
    """``path`` with its links resolved (a linked target is replaced where the link points, and
    the link kept) and made absolute."""
    return Path(os.path.realpath(path))


def _leftovers(target: Path, kind: str) -> list[tuple[Path, int]]:
    """(folder, PID) of the partial ("partial") or aside ("old") folders beside ``target`` and,
    for "partial", inside it, oldest first."""
    found = []
    for folder, prefix in ((target.parent, f".{target.name}."), (target, ".")):
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            match = _LEFTOVER.match(entry.name[len(prefix) :]) if entry.name.startswith(prefix) else None
            if match and match.group(1) == kind and entry.is_dir(follow_symlinks=False):
                mtime = entry.stat(follow_symlinks=False).st_mtime
                found.append((Path(entry.path), int(match.group(2)), mtime))
    return [(path, pid) for path, pid, _ in sorted(found, key=lambda item: item[2])]


def _running(pid: int) -> bool:
    """Whether another process with this PID runs (this process's own leftovers are stale: its
    writers delete their folders on any exception)."""
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _moved_aside(target: Path) -> Path | None:
    """The previous folder a writer killed between its two renames left aside, if the target is
    absent (the newest such folder)."""
    if target.exists():
        return None
    aside = [path for path, pid in _leftovers(target, "old") if not _running(pid)]
    return aside[-1] if aside else None


def _put_back(target: Path) -> None:
    """Move a folder left aside back to the absent target (:func:`_moved_aside`)."""
    aside = _moved_aside(target)
    if aside is not None:
        os.rename(aside, target)


def _remove_leftovers(target: Path) -> None:
    """Delete the partial and aside folders of writers that no longer run."""
    for kind in ("partial", "old"):
        for path, pid in _leftovers(target, kind):
            if not _running(pid):
                shutil.rmtree(path, ignore_errors=True)


def _new_folder(parent: Path, prefix: str) -> Path:
    """A new folder ``PARENT/PREFIXphifit-partial-PID-TAG`` (parents created; permissions from
    the umask, as any folder the report makes)."""
    parent.mkdir(parents=True, exist_ok=True)
    while True:
        path = parent / f"{prefix}phifit-partial-{os.getpid()}-{secrets.token_hex(4)}"
        try:
            path.mkdir()
            return path
        except FileExistsError:  # pragma: no cover - a tag drawn twice
            continue


def _only_partial_output(path: Path, figure_names: tuple[str, ...]) -> bool:
    """Whether ``path`` holds nothing but what a phifit report writes before its
    ``results.json`` (figures, a posterior, temporary files) and phifit's partial folders, with
    a ``figures`` folder or a partial folder among them."""
    top = {entry.name: entry for entry in os.scandir(path)}
    if "results.json" in top or "index.html" in top:
        return False
    if "figures" not in top and not any(_LEFTOVER.match(name.lstrip(".")) for name in top):
        return False
    files = [name for name in top if name != "figures"]
    figures = top.get("figures")
    if figures is not None:
        if not figures.is_dir(follow_symlinks=False):
            return False
        files += [f"figures/{entry.name}" for entry in os.scandir(figures.path)]
    return all(is_own(rel, figure_names) for rel in files)


# ------------------------------------------------------------------------------- install
def _renaming_is_unsafe(target: Path) -> bool:
    """Whether the target must be written into rather than swapped: it is or holds this
    process's working folder, it is a mount point, or its parent is not writable."""
    if not target.exists():
        return False
    cwd = _real(Path.cwd())
    return (
        cwd == target
        or target in cwd.parents
        or os.path.ismount(target)
        or not os.access(target.parent, os.W_OK | os.X_OK)
    )


def _install(stage: Path, target: Path, figure_names: tuple[str, ...]) -> None:
    """Move the written report ``stage`` to ``target``: renamed if the target is absent, else
    swapped with it (the target's files that phifit did not write carried over first)."""
    if not target.exists():
        with _signals_held():
            os.rename(stage, target)
        return
    _carry(target, stage, figure_names)
    shutil.copymode(target, stage)
    with _signals_held():
        if _exchange(stage, target):
            previous = stage
        else:
            previous = target.parent / f".{target.name}.phifit-old-{os.getpid()}-{secrets.token_hex(4)}"
            os.rename(target, previous)
            os.rename(stage, target)
    shutil.rmtree(previous, ignore_errors=True)


def _carry(old: Path, new: Path, figure_names: tuple[str, ...]) -> None:
    """Hard-link (or copy) into ``new`` every file and folder of ``old`` that phifit did not
    write (:func:`is_own`, with what ``old``'s report lists)."""
    listed = listed_files(old) or set()
    for entry in os.scandir(old):
        if entry.name == "figures" and entry.is_dir(follow_symlinks=False):
            for inner in os.scandir(entry.path):
                if not is_own(f"figures/{inner.name}", figure_names, listed):
                    (new / "figures").mkdir(exist_ok=True)
                    _link(Path(inner.path), new / "figures" / inner.name)
        elif not is_own(entry.name, figure_names, listed):
            _link(Path(entry.path), new / entry.name)


def _link(src: Path, dst: Path) -> None:
    """``src`` at ``dst`` too: a link as a link, a folder's files hard-linked (or copied)."""
    if src.is_symlink():
        os.symlink(os.readlink(src), dst)
    elif src.is_dir():
        shutil.copytree(src, dst, symlinks=True, copy_function=_link_file)
    else:
        _link_file(src, dst)


def _link_file(src: str | os.PathLike, dst: str | os.PathLike) -> None:
    try:
        os.link(src, dst)
    except OSError:  # a file system without hard links
        shutil.copy2(src, dst)


#: renameat2's flag that swaps two paths (linux/fs.h), and "relative to the working folder".
RENAME_EXCHANGE, AT_FDCWD = 2, -100


def _exchange(a: Path, b: Path) -> bool:
    """Swap two folders in one step (Linux's ``renameat2`` with ``RENAME_EXCHANGE``); False
    where the kernel, the C library or the file system cannot (then nothing has moved)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    if renameat2(AT_FDCWD, os.fsencode(a), AT_FDCWD, os.fsencode(b), RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EPERM, errno.ENOTSUP, errno.EXDEV):
        return False
    raise OSError(err, os.strerror(err), str(b))


def _move_in(stage: Path, target: Path, figure_names: tuple[str, ...]) -> None:
    """Replace the report in ``target`` file by file with the one written in ``stage`` (a
    partial folder inside it): the previous page and data out first, then the other files phifit
    wrote there, the new figures and posterior in, then the data, the page last."""
    listed = listed_files(target) or set()
    for name in ("index.html", "results.json"):
        (target / name).unlink(missing_ok=True)
    figures = target / "figures"
    previous = [f"figures/{p.name}" for p in figures.iterdir()] if figures.is_dir() else []
    for rel in sorted({*listed, *previous, "posterior.nc"}):
        path = target / rel
        if is_own(rel, figure_names, listed) and path.is_file() and not path.is_symlink():
            path.unlink()
    figures.mkdir(exist_ok=True)
    for path in sorted((stage / "figures").iterdir()):
        os.replace(path, figures / path.name)
    for name in ("posterior.nc", "results.json", "index.html"):
        if (stage / name).exists():
            os.replace(stage / name, target / name)
    shutil.rmtree(stage, ignore_errors=True)


@contextmanager
def _signals_held() -> Iterator[None]:
    """SIGINT and SIGTERM held back (delivered when the block ends) in the main thread."""
    if not hasattr(signal, "pthread_sigmask") or threading.current_thread() is not threading.main_thread():
        yield
        return
    held = {signal.SIGINT, signal.SIGTERM}
    before = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


__all__ = ["OWN_FILES", "check_report_dir", "is_own", "listed_files", "staged", "write_text"]
