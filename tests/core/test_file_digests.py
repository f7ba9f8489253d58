"""The file digest cache: a file is hashed once while its path, size and mtime_ns stand; any mtime change rehashes;
a fresh (racy) file is never cached; a corrupt or unwritable cache is ignored, never an error. It serves planning
only: outside it (a job) ``FileDigests.under`` neither reads nor writes the cache file."""

from __future__ import annotations

import hashlib
import json
import os
import time

import pytest

from vertebrae.core.errors import ValidationError
from vertebrae.core.file_digests import CACHE_FILE, CACHE_SCHEMA, FileDigests, sha256_file
from vertebrae.core.out_folder import RESULTS, writing_to

HOUR_AGO_NS = time.time_ns() - 3600 * 10**9


@pytest.fixture(autouse=True)
def planning(request):
    """The cache is the planner's: these tests plan (``writing_to``), as ``vertebrae.planning.plan`` does, except
    those named for a job (``outside_planning``)."""
    if "outside_planning" in request.node.name:
        yield
        return
    with writing_to(RESULTS):
        yield


def _write(path, data: bytes, mtime_ns: int = HOUR_AGO_NS):
    path.write_bytes(data)
    os.utime(path, ns=(mtime_ns, mtime_ns))
    return path


def test_the_digest_is_the_sha256_of_the_bytes(tmp_path):
    data = os.urandom(3 * (1 << 20) + 17)  # several read chunks
    path = _write(tmp_path / "x.bin", data)
    assert sha256_file(path) == hashlib.sha256(data).hexdigest()
    assert FileDigests(None).digest(path) == hashlib.sha256(data).hexdigest()


def test_a_file_is_hashed_once_while_path_size_and_mtime_stand(tmp_path):
    path = _write(tmp_path / "x.npz", b"first content")
    cache = FileDigests.under(tmp_path)
    first = cache.digest(path)
    assert cache.hashed == [path.resolve()]
    cache.save()
    assert (tmp_path / RESULTS / CACHE_FILE).is_file()

    again = FileDigests.under(tmp_path)
    assert again.digest(path) == first and again.hashed == []  # from the cache file, the file unread

    # new bytes of the same size under the same mtime: the cache trusts the stat, so this is NOT noticed
    _write(path, b"other content")
    same_stat = FileDigests.under(tmp_path)
    assert same_stat.digest(path) == first and same_stat.hashed == []

    # a touch that moves the mtime (what any write does) rehashes: the new bytes are seen
    os.utime(path, ns=(HOUR_AGO_NS + 1, HOUR_AGO_NS + 1))
    touched = FileDigests.under(tmp_path)
    assert touched.digest(path) == hashlib.sha256(b"other content").hexdigest()
    assert touched.hashed == [path.resolve()]


def test_a_size_change_rehashes(tmp_path):
    path = _write(tmp_path / "x", b"abc")
    cache = FileDigests.under(tmp_path)
    cache.digest(path)
    cache.save()
    _write(path, b"abcd")  # same mtime, other size
    again = FileDigests.under(tmp_path)
    assert again.digest(path) == hashlib.sha256(b"abcd").hexdigest() and again.hashed == [path.resolve()]


def test_a_file_written_just_now_is_not_cached(tmp_path):
    # a second write within the same timestamp tick, of the same size, would look unchanged: never trust it
    path = tmp_path / "fresh.tsv"
    path.write_bytes(b"q1\tg1\n")
    cache = FileDigests.under(tmp_path)
    cache.digest(path)
    cache.save()
    again = FileDigests.under(tmp_path)
    again.digest(path)
    assert again.hashed == [path.resolve()]


def test_one_object_hashes_a_file_once(tmp_path):
    path = _write(tmp_path / "x", b"abc")
    cache = FileDigests(None)
    for _ in range(3):
        cache.digest(path)
    assert cache.hashed == [path.resolve()]


def test_entries_are_keyed_by_absolute_path(tmp_path, monkeypatch):
    path = _write(tmp_path / "x", b"abc")
    monkeypatch.chdir(tmp_path)
    cache = FileDigests.under(tmp_path)
    cache.digest("x")
    cache.save()
    stored = json.loads((tmp_path / RESULTS / CACHE_FILE).read_text())
    assert stored["schema"] == CACHE_SCHEMA
    assert stored["files"] == {str(path.resolve()): {"size": 3, "mtime_ns": HOUR_AGO_NS,
                                                     "sha256": hashlib.sha256(b"abc").hexdigest()}}


@pytest.mark.parametrize("text", [
    "{not json", "[]", json.dumps({"schema": "other/v9", "files": {}}), json.dumps({"schema": CACHE_SCHEMA}),
])
def test_a_corrupt_cache_is_ignored_and_rebuilt(tmp_path, text):
    path = _write(tmp_path / "x", b"abc")
    (tmp_path / RESULTS / CACHE_FILE).parent.mkdir(parents=True)
    (tmp_path / RESULTS / CACHE_FILE).write_text(text)
    cache = FileDigests.under(tmp_path)
    assert cache.digest(path) == hashlib.sha256(b"abc").hexdigest()
    cache.save()
    assert str(path.resolve()) in json.loads((tmp_path / RESULTS / CACHE_FILE).read_text())["files"]


def test_a_malformed_entry_is_dropped_not_trusted(tmp_path):
    path = _write(tmp_path / "x", b"abc")
    stat = path.stat()
    bad = {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": "not-a-digest"}
    (tmp_path / RESULTS / CACHE_FILE).parent.mkdir(parents=True)
    (tmp_path / RESULTS / CACHE_FILE).write_text(json.dumps({"schema": CACHE_SCHEMA, "files": {str(path.resolve()): bad}}))
    cache = FileDigests.under(tmp_path)
    assert cache.digest(path) == hashlib.sha256(b"abc").hexdigest() and cache.hashed == [path.resolve()]


def test_save_merges_with_what_another_process_wrote(tmp_path):
    a, b = _write(tmp_path / "a", b"a"), _write(tmp_path / "b", b"b")
    first, second = FileDigests.under(tmp_path), FileDigests.under(tmp_path)  # both read the (empty) cache
    first.digest(a)
    second.digest(b)
    first.save()
    second.save()
    stored = json.loads((tmp_path / RESULTS / CACHE_FILE).read_text())["files"]
    assert set(stored) == {str(a.resolve()), str(b.resolve())}


def test_an_unwritable_cache_is_skipped(tmp_path):
    path = _write(tmp_path / "x", b"abc")
    (tmp_path / "blocker").write_text("a file where the cache folder would go")
    cache = FileDigests(tmp_path / "blocker" / "digests.json")
    assert cache.digest(path) == hashlib.sha256(b"abc").hexdigest()
    cache.save()  # no error: the digest is simply recomputed next time


def test_a_missing_file_is_refused_naming_it(tmp_path):
    with pytest.raises(ValidationError, match="missing.npz"):
        FileDigests(None).digest(tmp_path / "missing.npz")


def test_a_remembered_digest_stands_for_its_file_only_while_unchanged(tmp_path, monkeypatch):
    """``remember_digest``: the whole bytes another reader holds give the digest without a second read, for the
    same file (device, inode, size, mtime) only; bytes of a file that changed while read are not kept, and a file
    written within the racy window is not cached, exactly as when hashed here."""
    from vertebrae.core import file_digests
    from vertebrae.core.file_digests import remember_digest

    path = _write(tmp_path / "x", b"abc")
    other = _write(tmp_path / "y", b"xyz")
    st = os.stat(path)
    remember_digest(st, st, b"abc")
    remember_digest(os.stat(other), os.stat(path), b"xyz")  # changed while read: not kept
    read = []
    monkeypatch.setattr(file_digests, "sha256_file", lambda p: read.append(p) or sha256_file(p))
    cache = FileDigests(tmp_path / "digests.json")
    assert cache.digest(path) == hashlib.sha256(b"abc").hexdigest() and read == []
    assert cache.digest(other) == hashlib.sha256(b"xyz").hexdigest() and read == [str(other.resolve())]
    assert cache.hashed == [path.resolve(), other.resolve()]
    _write(path, b"abd")  # rewritten in place: new bytes and a new mtime, so the remembered digest is not used
    os.utime(path, ns=(HOUR_AGO_NS + 1, HOUR_AGO_NS + 1))
    assert FileDigests(None).digest(path) == hashlib.sha256(b"abd").hexdigest()
    fresh = _write(tmp_path / "z", b"new", mtime_ns=time.time_ns())
    remember_digest(os.stat(fresh), os.stat(fresh), b"new")
    racy = FileDigests(tmp_path / "racy.json")
    assert racy.digest(fresh) == hashlib.sha256(b"new").hexdigest() and str(fresh.resolve()) not in racy._entries


def test_outside_planning_no_cache_is_read_or_written(tmp_path):
    """A job (no planning under way) hashes the file itself: a planted cache entry that lies is not believed, and
    nothing is written (a job reads and writes only its declared files)."""
    path = _write(tmp_path / "x", b"abc")
    cache_file = tmp_path / RESULTS / CACHE_FILE
    cache_file.parent.mkdir(parents=True)
    st = path.stat()
    lie = {str(path.resolve()): {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": "0" * 64}}
    cache_file.write_text(json.dumps({"schema": CACHE_SCHEMA, "files": lie}))
    with writing_to(RESULTS):
        assert FileDigests.under(tmp_path).digest(path) == "0" * 64  # the planner trusts its cache by the stat
    job = FileDigests.under(tmp_path)
    assert job.cache_path is None
    assert job.digest(path) == hashlib.sha256(b"abc").hexdigest() and job.hashed == [path.resolve()]
    job.save()
    assert json.loads(cache_file.read_text())["files"] == lie
