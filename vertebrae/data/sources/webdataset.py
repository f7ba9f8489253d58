"""WebDataset tar shards: ``path`` is a brace pattern (``data/train-{000000..000099}.tar``) naming the shards in
order; a sample is the run of consecutive members sharing a key (the member name up to the first ``.`` of its
file name, as WebDataset splits it), its row id is that key.

- ``image_key``: the image member's extension, alternatives separated by ``;`` (``jpg;jpeg;png;webp``: the first
  present is taken);
- ``label_key``: ``cls`` (an integer as text), ``txt`` (the label text) or ``json`` (with ``label_field``, the
  field of the object holding the label); any other extension is read as text;
- ``max_shards``: the most files the pattern may name (:data:`MAX_SHARDS` when null); a pattern is counted
  before it is expanded (:func:`brace_count`), so a slip like ``{0..999999999}`` is refused at once.

The shards are read with :mod:`tarfile`, not the ``webdataset`` library: a row must stay addressable on its own
(a reference to its member's bytes by offset, :mod:`vertebrae.core.image_refs`) so an embedding job reads, and a
DataLoader worker decodes, only its rows, whereas ``webdataset`` streams whole shards in order (and importing it
imports torch). The headers of every shard are scanned to count rows (cheap: one 512-byte header per member,
read directly for plain ustar / GNU headers as tarfile reads them, by tarfile itself otherwise); the labels and
images are read only from the shards that hold the requested rows. An embedding shard job does not even scan the
others: its plan records every shard's count and digest (``wds_tars``, ``read_planned_rows``). Compressed shards
(``.tar.gz``) cannot be addressed by offset and are refused. Planning is linear in the shard count: the pattern is
counted before it is expanded, expanded once per process, and its duplicates found with a counter.

Problems name the shard and the sample key: a shard missing, a sample without its image or label member, a label
that does not parse; an image that does not decode is refused when an extractor reads it, naming the row (the
key) and the shard.
"""

from __future__ import annotations

import json
import operator
import os
import re
import stat
import string
import tarfile
import zlib
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from vertebrae.core.errors import ConfigError, ValidationError
from vertebrae.core.file_digests import FileDigests, remember_digest
from vertebrae.core.image_refs import tar_ref
from vertebrae.core.inputs import RawInputs
from vertebrae.data.sources.checks import SourceData
from vertebrae.data.sources.keys import _REQUIRED, SourceFormat
from vertebrae.data.sources.one_look import recall

LABEL_KEYS = ("cls", "txt", "json")
_KEY = re.compile(r"^((?:.*/|)[^./]+)\.([^/]*)$")  # WebDataset's base_plus_ext
_INDEX: dict[tuple[str, int, int], list[tuple[str, dict[str, tuple[int, int]]]]] = {}


@dataclass(frozen=True)
class WDSRows:
    inputs: RawInputs
    labels: list
    row_ids: list


@dataclass(frozen=True)
class WebDatasetSpec:
    pattern: str
    shards: tuple[Path, ...]
    image_key: str = "jpg;jpeg;png;webp"
    label_key: str | None = "cls"  # None: unlabelled samples (a retrieval gallery matched through a relevance file)
    label_field: str | None = None
    where: str = "webdataset"

    @classmethod
    def from_decl(cls, opts: Mapping[str, Any], *, base_dir: Path, where: str, check_files: bool = True) -> WebDatasetSpec:
        """The spec of a declaration; ``check_files=False`` (a planned job, ``read_planned_rows``): the shards are
        not looked at here, the job checks the ones it reads. A pattern naming more than ``max_shards`` files
        (:data:`MAX_SHARDS` when null) is refused before it is expanded (:func:`brace_count`)."""
        pattern = str(opts["path"])
        bound = MAX_SHARDS if opts.get("max_shards") is None else _check_max_shards(opts["max_shards"], where)
        try:
            named = brace_count(pattern)
        except (ValueError, RecursionError) as exc:  # braceexpand's UnbalancedBracesError is a ValueError
            raise ConfigError(f"{where}.path: {pattern!r} is not a brace pattern braceexpand reads: {exc}") from None
        if named > bound:
            raise ConfigError(f"{where}.path: {pattern!r} names {named:,} shard(s), more than the bound of {bound:,}; "
                              f"fix the pattern, or raise {where}.max_shards if it is meant")
        shards, names, bad_suffix = _expand(pattern, base_dir, where)
        missing = recall(("missing", names), lambda: [n for n in names if not os.path.isfile(n)]) if check_files else []
        if missing:
            raise ConfigError(f"{where}.path: {len(missing)} of {len(shards)} shard(s) of {pattern!r} not found: "
                              f"{', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''}")
        if bad_suffix is not None:
            path = bad_suffix
            hint = " (gzip-compressed: `gunzip` it, or name the .tar files it holds)" if path.name.lower().endswith(
                (".tar.gz", ".tgz")) else ""
            raise ConfigError(f"{where}.path: shard {path} is not an uncompressed .tar file{hint}; members are read "
                              "by offset, so each row is read alone, which a compressed shard does not allow")
        label_key = opts.get("label_key", "cls")
        if label_key == "json" and not opts.get("label_field"):
            raise ConfigError(f"{where}.label_field: required with label_key 'json' (the field holding the label)")
        return cls(pattern, shards, opts.get("image_key", "jpg;jpeg;png;webp"), label_key,
                   opts.get("label_field"), where)

    @property
    def image_keys(self) -> tuple[str, ...]:
        return tuple(k.strip().lower() for k in self.image_key.split(";") if k.strip())


#: The most files a ``path`` pattern may name unless its declaration raises the bound (``max_shards``): a pattern is
#: counted before it is expanded, so a slip such as ``{0..999999999}`` is refused at once, not after gigabytes.
MAX_SHARDS = 1_000_000

# braceexpand 0.1.7's grammar (its own expressions, copied so that a pattern counts exactly as it expands)
_INT_RANGE = re.compile(r"^(-?\d+)\.\.(-?\d+)(?:\.\.-?(\d+))?$")
_CHAR_RANGE = re.compile(r"^([A-Za-z])\.\.([A-Za-z])(?:\.\.-?(\d+))?$")
_ALPHABET = string.ascii_uppercase + string.ascii_lowercase
_EXPANDED: dict[tuple[str, str], tuple[tuple[Path, ...], tuple[str, ...], Path | None]] = {}
_EXPANDED_KEPT = 4


def brace_count(pattern: str) -> int:
    """How many names ``braceexpand(pattern)`` yields, counted without expanding it: its grammar followed step by
    step (``\\`` escapes the next character; ``{a,b}`` alternatives add up, ``{0..9}`` / ``{000..099}`` /
    ``{4..1}`` / ``{0..10..2}`` integer and ``{a..e}`` letter ranges count their members, a group that is neither
    is literal text; the groups of a pattern multiply). ValueError for an unbalanced pattern, as braceexpand."""
    count, start, pos, depth = 1, 0, 0, 0
    while pos < len(pattern):
        char = pattern[pos]
        if char == "\\":
            pos += 2
            continue
        if char == "{":
            if depth == 0:
                start = pos
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                count *= _expression_count(pattern[start + 1:pos])
                start = pos + 1
        pos += 1
    if depth != 0:
        raise ValueError(f"Unbalanced braces: {pattern!r}")
    return count


def _expression_count(expr: str) -> int:
    match = _INT_RANGE.match(expr)
    if match:
        first, last, step = int(match.group(1)), int(match.group(2)), int(match.group(3) or 1) or 1
        return abs(last - first) // step + 1  # range(first, last + 1, step), or down by step
    match = _CHAR_RANGE.match(expr)
    if match:
        step = int(match.group(3) or 1) or 1
        first, last = _ALPHABET.index(match.group(1)), _ALPHABET.index(match.group(2))
        if first < last:
            return len(_ALPHABET[first:last + 1:step])
        return len(_ALPHABET[first:(last or -len(_ALPHABET)) - 1:-step])
    parts, start, pos, depth = [], 0, 0, 0
    while pos < len(expr):
        char = expr[pos]
        if char == "\\":
            pos += 2
            continue
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(expr[start:pos])
            start = pos + 1
        pos += 1
    if depth != 0 or not parts:
        return brace_count(expr)  # no alternatives: the group is text, ``{`` + expr + ``}``
    parts.append(expr[start:])
    return sum(brace_count(part) for part in parts)


def _check_max_shards(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{where}.max_shards: must be a positive integer (the most shards the path pattern may "
                          f"name; default {MAX_SHARDS:,}), got {value!r}")
    return value


def _expand(pattern: str, base_dir: Path, where: str) -> tuple[tuple[Path, ...], tuple[str, ...], Path | None]:
    """``(paths, their names, the first shard not named .tar or None)`` of a pattern (relative names under
    ``base_dir``); the duplicates are refused. A pure function of its arguments, kept for the last few patterns:
    planning builds one spec several times (the row count, the identity, the segments, the tar digests)."""
    key = (pattern, os.fspath(base_dir))
    found = _EXPANDED.get(key)
    if found is not None:
        return found
    from braceexpand import braceexpand

    base = Path(base_dir)
    shards = tuple(Path(base, name) for name in braceexpand(pattern))  # an absolute name stays itself
    names = tuple(map(str, shards))  # equal paths, equal names (a path's text is its normalised parts)
    repeated = sorted(name for name, times in Counter(names).items() if times > 1)
    if repeated:
        raise ConfigError(f"{where}.path: {pattern!r} names shard(s) more than once: {', '.join(repeated[:5])}")
    bad_suffix = next((path for path in shards if path.suffix.lower() != ".tar"), None)
    while len(_EXPANDED) >= _EXPANDED_KEPT:
        _EXPANDED.pop(next(iter(_EXPANDED)))
    _EXPANDED[key] = found = (shards, names, bad_suffix)
    return found


def shard_index(path: Path) -> list[tuple[str, dict[str, tuple[int, int]]]]:
    """``[(key, {extension: (data offset, size)})]`` of a shard's samples in member order (headers only; cached
    per path, size and mtime for this process)."""
    name = os.fspath(path)
    st = os.stat(name)
    cache_key = (name, st.st_size, st.st_mtime_ns)
    if cache_key in _INDEX:
        return _INDEX[cache_key]
    try:
        members = _plain_members(path)
        if members is None:
            with tarfile.open(path, "r:") as tar:
                members = [(m.name, m.offset_data, m.size) for m in tar if m.isfile()]
    except (tarfile.TarError, OSError) as exc:
        raise ValidationError(f"shard {path} is not a readable tar file: {exc}") from None
    samples: list[tuple[str, dict[str, tuple[int, int]]]] = []
    for name, offset, size in members:
        match = _KEY.match(name)
        if match is None:
            continue  # a file without an extension is no sample member (WebDataset skips it too)
        key, ext = match.group(1), match.group(2).lower()
        if samples and samples[-1][0] == key:
            samples[-1][1][ext] = (offset, size)
        else:
            samples.append((key, {ext: (offset, size)}))
    _INDEX[cache_key] = samples
    return samples


# A plain header: every number field octal digits between spaces (then a NUL and anything), as tarfile's ``nti``
# reads them; member types: regular files (data follows) and the types without data tarfile keeps (links,
# devices, directories, FIFOs). Any other header (pax, GNU long names or sparse files, base-256 numbers, a signed
# checksum) and any irregular end goes to tarfile itself.
_OCTAL = re.compile(rb" *[0-7]* *(?:\0.*)?", re.DOTALL)
_TARFILE_NUMBERS = re.compile(rb"[0-7]{7}\0[0-7]{7}\0[0-7]{7}\0[0-7]{11}\0[0-7]{11}\0[0-7]{6}\0 ")  # 100:156 as
_TARFILE_DEVICES = re.compile(rb"(?:[0-7]{7}\0|\0{8}){2}")  # (329:345) tarfile and GNU tar write them: checked first
_NUMBER_FIELDS = ((100, 108), (108, 116), (116, 124), (124, 136), (136, 148), (148, 156), (329, 337), (337, 345))
_REGULAR = frozenset(b"07\0")
_NO_DATA = frozenset(b"123456")
_HEAD = 1 << 16


def _plain_members(path: Path) -> list[tuple[str, int, int]] | None:
    """``[(name, data offset, size)]`` of a tar file's regular files, read from its 512-byte headers exactly as
    :mod:`tarfile` reads them (``TarInfo.frombuf``, ``TarFile.next``), for an archive of plain ustar / GNU
    headers; None for any other archive, which tarfile then reads (a tarfile open costs more than the few headers
    of a small shard). A shard that fits in the first read also gets its digest from those bytes
    (``remember_digest``)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
    try:
        before = os.fstat(fd)
        end = before.st_size
        head = _pread(fd, _HEAD, 0)
        if len(head) == end:  # the whole shard in one read: its digest costs no second open
            remember_digest(before, os.fstat(fd), head)
        members, offset = [], 0
        while True:
            buf = head[offset:offset + 512] if offset + 512 <= len(head) else _pread(fd, 512, offset)
            if len(buf) != 512:
                return None  # an archive without its end blocks, or a truncated one
            if buf.count(0) == 512:
                return members  # the end-of-archive block
            if not (_TARFILE_NUMBERS.fullmatch(buf, 100, 156) and _TARFILE_DEVICES.fullmatch(buf, 329, 345)) and any(
                    _OCTAL.fullmatch(buf, lo, hi) is None for lo, hi in _NUMBER_FIELDS):
                return None
            if int(buf[148:156].split(b"\0", 1)[0].strip() or b"0", 8) != _byte_sum(buf) - sum(buf[148:156]) + 256:
                return None  # a bad or signed checksum
            kind = buf[156]
            name = buf[:100].split(b"\0", 1)[0].decode(tarfile.ENCODING, "surrogateescape")
            if kind not in _REGULAR and kind not in _NO_DATA or kind == 0 and name.endswith("/"):
                return None  # another type, or an old-style directory
            prefix = buf[345:500].split(b"\0", 1)[0].decode(tarfile.ENCODING, "surrogateescape")
            if prefix:
                name = prefix + "/" + name
            offset += 512
            if kind in _REGULAR:
                size = int(buf[124:136].split(b"\0", 1)[0].strip() or b"0", 8)
                members.append((name, offset, size))
                offset += -(-size // 512) * 512
                if offset > end:
                    return None  # its data cut short
    finally:
        os.close(fd)


def _read_at(fd: int, size: int, offset: int) -> bytes:
    os.lseek(fd, offset, os.SEEK_SET)
    return os.read(fd, size)


_pread = getattr(os, "pread", _read_at)  # not on Windows


def _byte_sum(block: bytes) -> int:
    """``sum(block)`` of a 512-byte block, in C: Adler-32's low half is 1 + the byte sum modulo 65521, and the sum
    of 256 bytes (at most 65,280) never reaches the modulus."""
    return (zlib.adler32(block[:256]) & 0xFFFF) + (zlib.adler32(block[256:]) & 0xFFFF) - 2


def shard_counts(spec: WebDatasetSpec) -> list[int]:
    """Each shard's sample count (headers only; once per planning pass, ``one_look``)."""
    return list(recall(("counts", spec.shards), lambda: tuple(len(shard_index(path)) for path in spec.shards)))


def wds_segments(spec: WebDatasetSpec) -> list[int]:
    """Row offsets where each non-empty shard's rows start (headers only): an embedding batch never crosses one, an
    embedding shard job starts on one (``vertebrae.stages.common.shard_bounds``), so it reads its own tars only."""
    return segment_starts(shard_counts(spec))


def segment_starts(counts: Sequence[int]) -> list[int]:
    """Row offsets where each non-empty shard's rows start, from the shards' sample counts in order."""
    starts, offset = [], 0
    for count in counts:
        if count:
            starts.append(offset)
        offset += int(count)
    return starts


def _image_member(spec: WebDatasetSpec, path: Path, key: str, members: Mapping[str, tuple[int, int]]) -> tuple[int, int]:
    for ext in spec.image_keys:
        if ext in members:
            return members[ext]
    raise ValidationError(f"shard {path}, sample {key!r}: no image member ({spec.image_key!r}); its members: "
                          f"{', '.join(sorted(members))}")


def _label(spec: WebDatasetSpec, path: Path, handle: Any, key: str, members: Mapping[str, tuple[int, int]]) -> Any:
    if spec.label_key not in members:
        raise ValidationError(f"shard {path}, sample {key!r}: no label member ({key}.{spec.label_key}); its members: "
                              f"{', '.join(sorted(members))}")
    offset, size = members[spec.label_key]
    handle.seek(offset)
    name = f"shard {path}, member {key}.{spec.label_key}"
    try:
        text = handle.read(size).decode("utf-8").strip()
    except UnicodeDecodeError:
        raise ValidationError(f"{name}: the label is not UTF-8 text") from None
    if spec.label_key == "cls":
        try:
            return int(text)
        except ValueError:
            raise ValidationError(f"{name}: class {text!r} is not an integer") from None
    if spec.label_key == "json":
        try:
            value = json.loads(text)[spec.label_field]
        except (ValueError, KeyError, TypeError):
            raise ValidationError(f"{name}: not a JSON object with a {spec.label_field!r} field") from None
        if value is None or isinstance(value, (dict, list)):
            raise ValidationError(f"{name}: label field {spec.label_field!r} holds {value!r}, not a class")
        return value
    if not text:
        raise ValidationError(f"{name}: empty label")
    return text


def read_wds_rows(spec: WebDatasetSpec, rows: Any = None) -> WDSRows:
    """All samples, or samples ``start:stop`` (only the shards holding them are read past their headers)."""
    return _read_rows(spec, shard_counts(spec), rows)


def wds_tars(spec: WebDatasetSpec, digests: FileDigests) -> list[list]:
    """``[[rows, sha256], ...]``: each shard's sample count (headers) and digest, in order. An embedding plan records
    them so a shard job reads only its own tar files (``read_planned_rows``)."""
    counts = shard_counts(spec)  # an unreadable tar is named as such before any digest
    return [[count, sha256] for count, sha256 in zip(counts, shard_digests(spec, digests))]


def shard_digests(spec: WebDatasetSpec, digests: FileDigests) -> list[str]:
    """The SHA-256 of every shard, in order, as ``digests.digest(path)`` gives it (cached by the resolved path, size
    and mtime): each folder is resolved once, not each of its shards (a resolve costs a system call per path
    component); a shard that is itself a symbolic link is resolved on its own. Headers are read first (planning
    needs them anyway): a shard small enough to come whole in that read is not opened again to be hashed."""
    return list(recall(("digests", spec.shards), lambda: _shard_digests(spec, digests)))


def _shard_digests(spec: WebDatasetSpec, digests: FileDigests) -> tuple[str, ...]:
    shard_counts(spec)
    folders: dict[str, str] = {}
    found = []
    for path in spec.shards:
        name = os.fspath(path)
        try:
            st = os.lstat(name)  # not a link: the file's own stat, passed on
        except OSError:
            st = None
        if st is None or stat.S_ISLNK(st.st_mode):
            found.append(digests.digest(path))
            continue
        folder, base = os.path.split(name)
        real = folders.get(folder)
        if real is None:
            real = folders[folder] = os.path.realpath(folder)
        found.append(digests.digest(os.path.join(real, base), resolved=True, stat=st))
    return tuple(found)


def read_planned_rows(spec: WebDatasetSpec, tars: Any, rows: Any, digests: FileDigests) -> WDSRows:
    """Samples ``rows=(start, stop)`` as ``read_wds_rows`` gives them, with the shard counts the plan recorded
    (``wds_tars``): only the shards holding these rows are opened, each checked first against its planned digest
    and sample count (a shard edited since planning is refused: re-plan), the others not even looked at."""
    if len(tars) != len(spec.shards):
        raise ValidationError(f"{spec.where}.path: {spec.pattern!r} names {len(spec.shards)} shard(s), the plan "
                              f"recorded {len(tars)}; re-plan")
    counts = [int(count) for count, _ in tars]

    def check(index: int) -> None:
        path, (count, sha256) = spec.shards[index], tars[index]
        if not path.is_file():
            raise ValidationError(f"{spec.where}.path: shard {path} of the plan is missing")
        if digests.digest(path) != sha256:
            raise ValidationError(f"{spec.where}.path: shard {path} changed since the plan was made; re-plan")
        if len(shard_index(path)) != count:  # only a hand-edited plan gets here; headers only
            raise ValidationError(f"{spec.where}.path: shard {path} holds {len(shard_index(path))} samples, the plan "
                                  f"recorded {count}; re-plan")

    return _read_rows(spec, counts, rows, check)


def _read_rows(spec: WebDatasetSpec, counts: list[int], rows: Any, check: Any = None) -> WDSRows:
    n = sum(counts)
    start, stop = (0, n) if rows is None else (operator.index(rows[0]), operator.index(rows[1]))
    if not 0 <= start <= stop <= n:
        raise ValidationError(f"{spec.where}: rows=({start}, {stop}) out of range for {spec.pattern!r} with {n} samples")
    values, labels, ids = [], [], []
    offset = 0
    for index, (path, count) in enumerate(zip(spec.shards, counts)):
        lo, hi = max(start - offset, 0), min(stop - offset, count)
        if lo < hi:
            if check is not None:
                check(index)
            name = os.fspath(path)
            with open(path, "rb") as handle:
                for key, members in shard_index(path)[lo:hi]:
                    data_offset, size = _image_member(spec, path, key, members)
                    values.append(tar_ref(name, data_offset, size))
                    if spec.label_key is not None:
                        labels.append(_label(spec, path, handle, key, members))
                    ids.append(key)
        offset += count
    return WDSRows(RawInputs("image", tuple(values), tuple(ids)), labels, ids)


def check_first_shard(spec: WebDatasetSpec) -> None:
    """``vertebrae validate``'s look: the first shard holds samples, each with its image and label member."""
    first = spec.shards[0]
    samples = shard_index(first)
    if not samples:
        raise ValidationError(f"shard {first} holds no sample")
    for key, members in samples:
        _image_member(spec, first, key, members)
        if spec.label_key is not None and spec.label_key not in members:
            raise ValidationError(f"shard {first}, sample {key!r}: no label member ({key}.{spec.label_key}); its "
                                  f"members: {', '.join(sorted(members))}")


def wds_recipe(spec: WebDatasetSpec, options: Mapping[str, Any], digests: FileDigests) -> dict[str, Any]:
    """The ``files`` identity recipe: the options and the SHA-256 of every shard, in order. ``batches: "per_tar"``
    marks that its rows are embedded in batches that restart at every tar file (``wds_segments``): a model's output
    for a row may differ in its last bits from the one a batch across tar files gave, so the key differs too."""
    return {**{k: v for k, v in options.items() if k not in ("path", "max_shards")}, "batches": "per_tar",
            "shards": shard_digests(spec, digests)}


__all__ = ["LABEL_KEYS", "MAX_SHARDS", "WDSRows", "WebDatasetSpec", "brace_count", "check_first_shard",
           "load_planned_source_rows", "read_planned_rows", "read_wds_rows", "segment_starts", "shard_counts", "shard_digests",
           "shard_index", "source_segments", "source_tars", "wds_recipe", "wds_segments", "wds_tars"]


# --------------------------------------------------------------------------------------------------------
# the ``webdataset`` source type: {"type": "webdataset", "path": "shards/train-{000000..000099}.tar", "image_key":
# "jpg;jpeg;png;webp", "label_key": "cls", "label_field": None, "max_shards": None}


def _spec(opts: dict[str, Any], base_dir: Path, where: str) -> WebDatasetSpec:
    return WebDatasetSpec.from_decl(opts, base_dir=base_dir, where=where)


def _count(opts: dict[str, Any], base_dir: Path, where: str) -> int:
    spec = _spec(opts, base_dir, where)
    check_first_shard(spec)  # the plan (and so ``vertebrae validate``) sees a shard without labels before any job
    return sum(shard_counts(spec))


def _load(opts: dict[str, Any], base_dir: Path, where: str, rows: Any) -> SourceData:
    data = read_wds_rows(_spec(opts, base_dir, where), rows)
    return SourceData(data.inputs, data.labels, data.row_ids)


def _files_recipe(opts: dict[str, Any], base_dir: Path, where: str, digests: FileDigests) -> dict[str, Any]:
    return {"type": "webdataset", **wds_recipe(_spec(opts, base_dir, where), opts, digests)}


def source_segments(opts: Any, *, base_dir: Path, where: str) -> list[int] | None:
    """Segment starts of a source's rows (``vertebrae.stages.common.shard_bounds``): a ``webdataset`` source's tar
    files (headers only), None for any other source."""
    if not isinstance(opts, dict) or opts.get("type") != "webdataset":
        return None
    return wds_segments(_spec(opts, base_dir, where))


def source_tars(opts: Any, *, base_dir: Path, where: str, digests: FileDigests) -> list[list] | None:
    """A ``webdataset`` source's ``[[rows, sha256], ...]`` per tar file (``wds_tars``), None for any other source."""
    if not isinstance(opts, dict) or opts.get("type") != "webdataset":
        return None
    return wds_tars(_spec(opts, base_dir, where), digests)


def load_planned_source_rows(opts: dict[str, Any], tars: Any, *, base_dir: Path, where: str, start: int, stop: int,
                             digests: FileDigests) -> tuple[Any, list]:
    """Inputs and row ids of rows ``start:stop`` of a ``webdataset`` source, opening only the tar files that hold
    them, checked against the plan's ``tars`` (``read_planned_rows``); labels are not read."""
    spec = WebDatasetSpec.from_decl(opts, base_dir=base_dir, where=where, check_files=False)
    data = read_planned_rows(replace(spec, label_key=None), tars, (start, stop), digests)
    return data.inputs, data.row_ids


FORMAT = SourceFormat(
    keys={"path": _REQUIRED, "image_key": "jpg;jpeg;png;webp", "label_key": "cls", "label_field": None,
          "max_shards": None},
    count=_count, load=_load, files_recipe=_files_recipe, values={"max_shards": _check_max_shards},
)
