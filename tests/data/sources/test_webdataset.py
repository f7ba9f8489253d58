"""webdataset sources: brace patterns, image and label keys (cls, txt, json field), sample keys as row ids, rows read
only from the shards that hold them; errors naming the shard and the key; identity following the shards."""

from __future__ import annotations

import pytest

from format_fixtures import CLASSES, image_features, tiny_images, write_tar_shards
from vertebrae.core.errors import ConfigError, ValidationError
from vertebrae.core.file_digests import FileDigests
from vertebrae.core.identity import DatasetIdentity
from vertebrae.data.sources import webdataset as wds_module
from vertebrae.data.labelled import BenchmarkDataset
from vertebrae.data.sources.files import source_files_recipe
from vertebrae.data.sources import load_source, source_row_count

PATTERN = "shards/train-{000000..000002}.tar"


@pytest.fixture(scope="module")
def rows():
    return tiny_images(13)


@pytest.mark.parametrize("label, extra", [("cls", {}), ("txt", {"label_key": "txt"}),
                                          ("json", {"label_key": "json", "label_field": "label"})])
def test_labels_ids_and_images(tmp_path, rows, label, extra):
    write_tar_shards(tmp_path / "shards", rows, label=label)
    decl = {"type": "webdataset", "path": PATTERN, **extra}
    data = load_source(decl, base_dir=tmp_path, where="source")
    assert data.row_ids == [rid for rid, _, _ in rows]
    names = [name for _, name, _ in rows]
    assert data.labels == ([CLASSES.index(n) for n in names] if label == "cls" else names)
    pixels = image_features(data.features)
    assert [CLASSES[int(p[:3].argmax())] for p in pixels] == names
    assert source_row_count(decl, base_dir=tmp_path, where="source") == 13


def test_a_row_range_reads_only_its_shards(tmp_path, rows, monkeypatch):
    paths = write_tar_shards(tmp_path / "shards", rows)  # 5 + 5 + 3 samples
    decl = {"type": "webdataset", "path": PATTERN}
    full = load_source(decl, base_dir=tmp_path, where="source")
    opened = []
    real_open = open

    def spying_open(path, *args, **kwargs):
        opened.append(str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(wds_module, "open", spying_open, raising=False)  # the reader's data reads, not its headers
    part = load_source(decl, base_dir=tmp_path, where="source", rows=(5, 9))
    assert part.row_ids == full.row_ids[5:9] and part.labels == full.labels[5:9]
    assert opened == [str(paths[1])]
    assert all(str(paths[1]) in value for value in part.features.values)


def test_missing_label_missing_shard_and_bad_image_are_named(tmp_path, rows):
    import io
    import tarfile

    write_tar_shards(tmp_path / "shards", rows)
    with tarfile.open(tmp_path / "shards" / "train-000000.tar", "a") as tar:
        info = tarfile.TarInfo("orphan.png")
        info.size = len(rows[0][2])
        tar.addfile(info, io.BytesIO(rows[0][2]))
    with pytest.raises(ValidationError, match=r"shard .*train-000000.tar, sample 'orphan': no label member "
                                              r"\(orphan.cls\); its members: png"):
        source_row_count({"type": "webdataset", "path": PATTERN}, base_dir=tmp_path, where="source")
    with pytest.raises(ConfigError, match=r"source.path: 1 of 4 shard\(s\) .* not found: .*train-000003.tar"):
        source_row_count({"type": "webdataset", "path": "shards/train-{000000..000003}.tar"}, base_dir=tmp_path,
                         where="source")
    write_tar_shards(tmp_path / "bad", [("k0", "red", b"garbage"), *rows[:2]])
    data = load_source({"type": "webdataset", "path": "bad/train-000000.tar"}, base_dir=tmp_path, where="source")
    with pytest.raises(ValidationError, match=r"row 'k0': cannot decode image .*bad/train-000000.tar \(member data"):
        image_features(data.features)


def test_identity_follows_the_shards_and_python_constructor(tmp_path, rows):
    write_tar_shards(tmp_path / "shards", rows, label="txt")
    decl = {"type": "webdataset", "path": str(tmp_path / PATTERN), "label_key": "txt"}

    def key():
        return DatasetIdentity.from_files(source_files_recipe(decl, base_dir=tmp_path, where="s",
                                                              digests=FileDigests(None))).key()

    first = key()
    dataset = BenchmarkDataset.from_webdataset(str(tmp_path / PATTERN), label_key="txt")
    assert dataset.identity.key() == first and dataset.n_rows == 13
    write_tar_shards(tmp_path / "shards", rows[::-1], label="txt")
    assert key() != first


def test_a_gzip_compressed_shard_is_refused_naming_the_file(tmp_path, rows):
    import gzip
    import shutil

    write_tar_shards(tmp_path / "shards", rows)
    with open(tmp_path / "shards" / "train-000001.tar", "rb") as src, gzip.open(tmp_path / "shards" / "train-000001.tar.gz", "wb") as dst:
        shutil.copyfileobj(src, dst)
    decl = {"type": "webdataset", "path": "shards/train-{000000.tar,000001.tar.gz}"}
    for read in (lambda: source_row_count(decl, base_dir=tmp_path, where="source"),
                 lambda: load_source(decl, base_dir=tmp_path, where="source")):
        with pytest.raises(ConfigError, match=r"source.path: shard .*train-000001.tar.gz is not an uncompressed .tar "
                                              r"file \(gzip-compressed: `gunzip` it"):
            read()


def test_segments_from_headers_are_where_the_rows_change_tar(tmp_path, rows):
    """The plan's segments (tar headers only) are the ones the in-process path finds in the rows' tar references:
    a labelled source, and both sides of a label_split over it; a shard named twice is refused."""
    from vertebrae.data.declared.retrieval import load_retrieval_source, retrieval_segments
    from vertebrae.data.sources.webdataset import source_segments
    from vertebrae.stages.common import tar_segments

    write_tar_shards(tmp_path / "shards", rows)  # 5 + 5 + 3 samples
    decl = {"type": "webdataset", "path": PATTERN}
    assert source_segments(decl, base_dir=tmp_path, where="source") == [0, 5, 10]
    assert tar_segments(load_source(decl, base_dir=tmp_path, where="source").features) == [0, 5, 10]
    split = {"type": "label_split", "query_every": 3, "source": decl}
    data = load_retrieval_source(split, base_dir=tmp_path, where="source")
    assert retrieval_segments(split, base_dir=tmp_path, where="source") == (
        tar_segments(data.queries), tar_segments(data.gallery)) == ([0, 2, 4], [0, 3, 6])
    assert source_segments({"type": "npz", "path": "x.npz"}, base_dir=tmp_path, where="source") is None
    with pytest.raises(ConfigError, match="more than once"):
        source_segments({"type": "webdataset", "path": "shards/train-{000000,000001,000000}.tar"}, base_dir=tmp_path,
                        where="source")


def test_planned_rows_open_only_their_shards_checked_against_the_plan(tmp_path, rows):
    """``read_planned_rows`` gives ``read_wds_rows``' rows from the recorded counts and digests alone: the other
    shards may be gone; a missing, edited or miscounted own shard, or a plan of another shard count, is refused."""
    import shutil

    from vertebrae.data.sources.webdataset import WebDatasetSpec, read_planned_rows, read_wds_rows, wds_tars

    write_tar_shards(tmp_path / "shards", rows)  # 5 + 5 + 3 samples
    decl = {"type": "webdataset", "path": PATTERN}
    digests = FileDigests(None)
    spec = WebDatasetSpec.from_decl(decl, base_dir=tmp_path, where="source")
    tars = wds_tars(spec, digests)
    assert [count for count, _ in tars] == [5, 5, 3]
    expected = read_wds_rows(spec, (5, 10))
    (tmp_path / "shards" / "train-000000.tar").unlink()
    (tmp_path / "shards" / "train-000002.tar").unlink()
    alone = WebDatasetSpec.from_decl(decl, base_dir=tmp_path, where="source", check_files=False)
    got = read_planned_rows(alone, tars, (5, 10), digests)
    assert (got.inputs.values, got.row_ids, got.labels) == (expected.inputs.values, expected.row_ids, expected.labels)
    with pytest.raises(ValidationError, match="train-000000.tar of the plan is missing"):
        read_planned_rows(alone, tars, (0, 5), digests)
    with pytest.raises(ValidationError, match="names 3 shard"):
        read_planned_rows(alone, tars[:2], (5, 10), digests)
    with pytest.raises(ValidationError, match="holds 5 samples, the plan recorded 4"):
        read_planned_rows(alone, [tars[0], [4, tars[1][1]], tars[2]], (5, 9), digests)
    shutil.copyfile(tmp_path / "shards" / "train-000001.tar", tmp_path / "other.tar")
    write_tar_shards(tmp_path / "shards", rows[:5], per_shard=5)  # train-000000.tar again, now with no 000001's data
    shutil.copyfile(tmp_path / "shards" / "train-000000.tar", tmp_path / "shards" / "train-000001.tar")
    with pytest.raises(ValidationError, match="train-000001.tar changed since the plan was made; re-plan"):
        read_planned_rows(alone, tars, (5, 10), FileDigests(None))


# ---- planning a sharded source in linear time (issue 48, problem 4) -------------------------------------------

BRACE_PATTERNS = [
    "", "plain.tar", "{a,b,c}", "x{0..9}y", "{000..099}", "{07..10}", "{0..10..2}", "{10..0..3}", "{2..-1}",
    "{-05..5}", "{1..3..0}", "{0..3..-1}", "{a..e}", "{e..a..2}", "{Z..c}", "{A..A}", "{a..a}", "{a..g..10}",
    "{1..3}{a,b}", "{a,{b,c}}{1..3}", "python{2.{5..7},3.{2,3}}", "{{0..2},{a..c}}", "{a,b{0..2},c}{x,y{1..4}}",
    "{a}", "{}", "{,}", "{,a}", "{a,}", "{{a}}", "{a..c,d}", "{1..3\n}", "{a\\,b,c}", "\\{a,b\\}", "a\\{b",
    "\\\\{a,b}", "{a,b\\}}", "}{", "}a{", "}{{a,b}", "{0..1}{0..1}{0..1}{0..1}", "d{0..4}/{00..19}.tar",
]


@pytest.mark.parametrize("pattern", BRACE_PATTERNS)
def test_brace_count_is_what_braceexpand_yields(pattern):
    """The count of names a pattern expands to, without expanding it, against braceexpand itself."""
    from braceexpand import braceexpand

    assert wds_module.brace_count(pattern) == len(list(braceexpand(pattern)))


def test_brace_count_agrees_with_braceexpand_on_random_patterns():
    """Random patterns of braceexpand's syntax (nested alternatives, integer ranges with padding, signs and steps,
    letter ranges, escapes, stray braces and commas): the same count, or the same refusal of an unbalanced one."""
    import random

    from braceexpand import braceexpand

    rng = random.Random(48)
    junk = ["{", "}", ",", "..", "\\", "\\{", "\\,", "a", "Z", "0", "-", "05", "x/", "\n"]

    def number() -> str:
        return rng.choice(["", "-", "0", "-0"]) + str(rng.randrange(7))

    def pattern(depth: int) -> str:
        parts = []
        for _ in range(rng.randint(0, 3)):
            kind = rng.random()
            if kind < 0.3 and depth < 3:
                parts.append("{" + ",".join(pattern(depth + 1) for _ in range(rng.randint(1, 3))) + "}")
            elif kind < 0.5:
                parts.append("{" + number() + ".." + number() + rng.choice(["", "..2", "..0", "..-3"]) + "}")
            elif kind < 0.6:
                step = rng.choice(["", "..2", "..9"])
                parts.append("{" + rng.choice("aeZA") + ".." + rng.choice("cAzb") + step + "}")
            else:
                parts.append(rng.choice(junk))
        return "".join(parts)

    counted = refused = large = 0
    for _ in range(3000):
        text = pattern(0)
        try:
            if wds_module.brace_count(text) > 5000:  # braceexpand would build them all first: left out, and rare
                large += 1
                continue
        except ValueError:
            pass
        try:
            expected = len(list(braceexpand(text)))
        except ValueError:
            refused += 1
            with pytest.raises(ValueError):
                wds_module.brace_count(text)
            continue
        assert wds_module.brace_count(text) == expected, text
        counted += expected > 1
    assert counted > 1000 and refused > 100 and large < 100


def test_an_oversized_pattern_is_refused_before_it_is_expanded(tmp_path, monkeypatch):
    """A pattern naming more files than the bound is refused at once, naming the key, the count and the bound:
    braceexpand is never called (it would build every name first); ``max_shards`` moves the bound."""
    import braceexpand

    def never(pattern, *args, **kwargs):
        raise AssertionError(f"expanded {pattern!r}")

    monkeypatch.setattr(braceexpand, "braceexpand", never)
    huge = "shards/train-{0..999999999999}.tar"
    with pytest.raises(ConfigError) as info:
        source_row_count({"type": "webdataset", "path": huge}, base_dir=tmp_path, where="source")
    assert str(info.value) == (f"source.path: {huge!r} names 1,000,000,000,000 shard(s), more than the bound of "
                               "1,000,000; fix the pattern, or raise source.max_shards if it is meant")
    groups = "s/{0..999}/{a,b}{000..999}.tar"  # 2,000,000 names: the groups multiply
    with pytest.raises(ConfigError, match=r"source.path: .* names 2,000,000 shard\(s\), more than the bound of "
                                          r"1,000,000"):
        load_source({"type": "webdataset", "path": groups}, base_dir=tmp_path, where="source")
    with pytest.raises(ConfigError, match=r"names 2,000,000 shard\(s\), more than the bound of 1,999,999;"):
        source_row_count({"type": "webdataset", "path": groups, "max_shards": 1_999_999}, base_dir=tmp_path,
                         where="source")
    with pytest.raises(ConfigError, match=r"^source.path: 's/\{0..99\}.tar' names 100 shard\(s\), more than the "
                                          r"bound of 50;"):
        source_row_count({"type": "webdataset", "path": "s/{0..99}.tar", "max_shards": 50}, base_dir=tmp_path,
                         where="source")
    with pytest.raises(ConfigError, match=r"source.path: 's\{0..2.tar' is not a brace pattern braceexpand reads: "
                                          r"Unbalanced braces"):
        source_row_count({"type": "webdataset", "path": "s{0..2.tar"}, base_dir=tmp_path, where="source")
    for bad in (0, -1, True, "10", 2.5):
        with pytest.raises(ConfigError, match=r"^source.max_shards: must be a positive integer"):
            source_row_count({"type": "webdataset", "path": "s/{0..1}.tar", "max_shards": bad}, base_dir=tmp_path,
                             where="source")


def test_max_shards_passes_a_pattern_and_leaves_the_identity_alone(tmp_path, rows):
    """Under the bound a pattern plans as before; ``max_shards`` is a guard, not data: the identity recipe (and so
    every fingerprint) is the same with or without it."""
    write_tar_shards(tmp_path / "shards", rows)
    decl = {"type": "webdataset", "path": PATTERN}
    bounded = {**decl, "max_shards": 3}
    assert source_row_count(bounded, base_dir=tmp_path, where="source") == 13
    recipe = source_files_recipe(decl, base_dir=tmp_path, where="s", digests=FileDigests(None))
    assert source_files_recipe(bounded, base_dir=tmp_path, where="s", digests=FileDigests(None)) == recipe
    assert "max_shards" not in recipe
    with pytest.raises(ConfigError, match=r"names 3 shard\(s\), more than the bound of 2;"):
        source_row_count({**decl, "max_shards": 2}, base_dir=tmp_path, where="source")


def test_a_large_pattern_naming_shards_twice_is_refused_as_before(tmp_path):
    """20,002 names, two of them twice (the files need not exist: the names are checked first): today's message,
    the repeated shards sorted by name."""
    pattern = "shards/{{0..19999},7,15}.tar"
    with pytest.raises(ConfigError) as info:
        source_row_count({"type": "webdataset", "path": pattern}, base_dir=tmp_path, where="source")
    shards = tmp_path / "shards"
    assert str(info.value) == (f"source.path: {pattern!r} names shard(s) more than once: {shards / '15.tar'}, "
                               f"{shards / '7.tar'}")


def _tarfile_members(path):
    """The regular files tarfile itself reads in a tar file, or its error (the reference of the header reader)."""
    import tarfile

    try:
        with tarfile.open(path, "r:") as tar:
            return [(m.name, m.offset_data, m.size) for m in tar if m.isfile()]
    except Exception as exc:  # noqa: BLE001 - whatever tarfile raises is the reference
        return type(exc), str(exc)


def _tar(fmt, members) -> bytes:
    import io
    import tarfile

    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=fmt) as tar:
        for name, kind, data in members:
            info = tarfile.TarInfo(name)
            if kind == "file":
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
            else:
                info.type = {"dir": tarfile.DIRTYPE, "link": tarfile.SYMTYPE}[kind]
                info.linkname = "k0.png" if kind == "link" else ""
                tar.addfile(info)
    return out.getvalue()


def test_the_header_reader_reads_what_tarfile_reads(tmp_path, monkeypatch):
    """Shard indexes come from the 512-byte headers read directly for plain ustar / GNU archives, else from
    tarfile: on tar files of every format and thousands of damaged ones (bytes of a header changed, the checksum
    kept right or not, files cut short or extended), the direct reader gives exactly tarfile's members or hands
    the file to tarfile, and ``shard_index`` gives what tarfile gives, or its error naming the shard."""
    import random
    import tarfile

    members = [("k0.png", "file", b"x" * 700), ("k0.cls", "file", b"1"), ("d", "dir", b""), ("k1.png", "file", b""),
               ("ln", "link", b""), ("k1.cls", "file", b"2"), ("p/" * 60 + "k2.png", "file", b"y" * 513),
               ("k2.cls", "file", b"0"), ("noext", "file", b"n"), ("k3.txt", "file", b"z" * 1024)]
    short = [m for m in members if len(m[0]) < 100]
    bases = [_tar(tarfile.USTAR_FORMAT, members), _tar(tarfile.GNU_FORMAT, short), _tar(tarfile.USTAR_FORMAT, short),
             _tar(tarfile.GNU_FORMAT, members), _tar(tarfile.PAX_FORMAT, [("é.png", "file", b"q"), *members])]
    for i, data in enumerate(bases):
        path = tmp_path / f"base{i}.tar"
        path.write_bytes(data)
        direct = wds_module._plain_members(path)
        assert direct is None if i >= 3 else direct == _tarfile_members(path), i  # GNU long names, pax: tarfile
    keys = [key for key, _ in wds_module.shard_index(tmp_path / "base0.tar")]
    assert keys == ["k0", "k1", "p/" * 60 + "k2", "k2", "k3"]  # the link, the folder and "noext" are no sample
    monkeypatch.setattr(wds_module, "_INDEX", {})
    rng = random.Random(48)
    values = [*b"0178 5x/L\n", 0, 0x80, 0xFF]
    direct_reads = 0
    for i in range(3000):
        data = bytearray(rng.choice(bases))
        if rng.random() < 0.15:
            data = data[:rng.randrange(len(data) + 1)]
        elif rng.random() < 0.06:
            data += bytes(rng.randrange(256) for _ in range(rng.randrange(1, 1000)))
        else:
            headers, offset = [], 0
            while offset + 512 <= len(data) and any(data[offset:offset + 512]):
                headers.append(offset)
                size = int(bytes(data[offset + 124:offset + 136]).split(b"\0")[0].strip() or b"0", 8)
                offset += 512 + (-(-size // 512) * 512 if data[offset + 156] in b"07\0xL" else 0)
            for _ in range(rng.randint(1, 3)):
                head = rng.choice(headers)
                where = rng.choice([rng.randrange(512), 156, 124 + rng.randrange(12), 100 + rng.randrange(56),
                                    345 + rng.randrange(10), 99, 0, 329 + rng.randrange(16)])
                data[head + where] = rng.choice(values) if rng.random() < 0.8 else rng.randrange(256)
                if rng.random() < 0.6:  # a checksum that matches the changed header
                    block = data[head:head + 512]
                    block[148:156] = b" " * 8
                    data[head + 148:head + 156] = b"%06o\0 " % sum(block)
        path = tmp_path / f"fuzz{i}.tar"
        path.write_bytes(bytes(data))
        expected = _tarfile_members(path)
        direct = wds_module._plain_members(path)
        if direct is not None:
            direct_reads += 1
            assert direct == expected, i
        if isinstance(expected, list):
            index = wds_module.shard_index(path)
            assert [(offset, size) for _, members_ in index for offset, size in members_.values()] == [
                (offset, size) for name, offset, size in expected if "." in name.rsplit("/", 1)[-1]], i
        elif issubclass(expected[0], (tarfile.TarError, OSError)):
            with pytest.raises(ValidationError) as info:
                wds_module.shard_index(path)
            assert str(info.value) == f"shard {path} is not a readable tar file: {expected[1]}"
        path.unlink()
    assert direct_reads > 500


def test_shard_digests_are_the_digests_of_each_shard_by_its_resolved_path(tmp_path, rows):
    """The tar digests of a plan and recipe, with each folder resolved once: the same digests, and the same cache
    entries (keyed by the resolved path), as ``FileDigests.digest`` of each shard, a shard that is a symbolic link
    and a folder reached through one included."""
    import os
    import time

    write_tar_shards(tmp_path / "real", rows)
    (tmp_path / "linked").symlink_to(tmp_path / "real")
    (tmp_path / "real" / "train-000003.tar").symlink_to(tmp_path / "real" / "train-000000.tar")
    old = time.time() - 60  # past the cache's racy window
    for path in (tmp_path / "real").iterdir():
        os.utime(path, (old, old))
    spec = wds_module.WebDatasetSpec.from_decl({"path": "linked/train-{000000..000003}.tar"}, base_dir=tmp_path,
                                               where="source")
    ours, theirs = FileDigests(None), FileDigests(None)
    assert wds_module.shard_digests(spec, ours) == [theirs.digest(path) for path in spec.shards]
    assert ours._entries == theirs._entries and len(ours._entries) == 3


def _old_shards(folder, rows):
    import os
    import time

    paths = write_tar_shards(folder, rows)
    old = time.time() - 60  # past the digest cache's racy window, as a user's files are
    for path in paths:
        os.utime(path, (old, old))
    return paths


def test_a_small_shard_is_read_once_for_its_headers_and_its_digest(tmp_path, rows, monkeypatch):
    """A shard that fits in the header reader's first read is hashed from those bytes: one open per shard, no
    second read for the digest, and the digests are each file's SHA-256 all the same (cached like any other)."""
    import hashlib
    import os

    from vertebrae.core import file_digests

    paths = _old_shards(tmp_path / "shards", rows)
    spec = wds_module.WebDatasetSpec.from_decl({"path": PATTERN}, base_dir=tmp_path, where="source")
    wds_module._INDEX.clear()
    file_digests._KNOWN.clear()
    opened = []
    real_open = os.open
    monkeypatch.setattr(wds_module.os, "open", lambda path, *a, **k: opened.append(path) or real_open(path, *a, **k))

    def no_second_read(path):
        raise AssertionError(f"{path} read again to be hashed")

    monkeypatch.setattr(file_digests, "sha256_file", no_second_read)
    digests = FileDigests(tmp_path / "digests.json")
    assert wds_module.shard_digests(spec, digests) == [hashlib.sha256(p.read_bytes()).hexdigest() for p in paths]
    assert sorted(map(str, opened)) == sorted(map(str, spec.shards)) and len(digests.hashed) == len(paths)
    digests.save()
    cached = FileDigests(tmp_path / "digests.json")
    assert [cached.digest(p) for p in paths] == wds_module.shard_digests(spec, digests) and cached.hashed == []


def test_one_planning_pass_looks_once_and_the_next_pass_sees_an_edit(tmp_path, rows, monkeypatch):
    """Within ``one_pass`` the counts and digests of a source are computed once; a new pass (the next plan in a
    long-lived process) reads the shards again, so an edit between two plans changes both."""
    from vertebrae.data.sources.one_look import one_pass

    _old_shards(tmp_path / "shards", rows)
    spec = wds_module.WebDatasetSpec.from_decl({"path": PATTERN}, base_dir=tmp_path, where="source")
    looked = []
    real_index = wds_module.shard_index
    monkeypatch.setattr(wds_module, "shard_index", lambda path: looked.append(path) or real_index(path))
    with one_pass():
        counts, digests = wds_module.shard_counts(spec), wds_module.shard_digests(spec, FileDigests(None))
        assert wds_module.shard_counts(spec) == counts and wds_module.shard_digests(spec, FileDigests(None)) == digests
    assert len(looked) == len(spec.shards)  # every shard once in the pass
    _old_shards(tmp_path / "shards", rows[:4] + rows[5:])  # one sample fewer: every shard from the first changes
    with one_pass():
        assert wds_module.shard_counts(spec) == [5, 5, 2]
        again = wds_module.shard_digests(spec, FileDigests(None))
    assert counts == [5, 5, 3] and again[0] != digests[0] and len(looked) == 2 * len(spec.shards)
