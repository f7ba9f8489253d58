"""Semantic label catalog: typed keys, order, displays, JSON round trip and rejections."""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import json
import random
import uuid
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest

from vertebrae.core.errors import LabelError, ValidationError
from vertebrae.core.fingerprint import canonical_json
from vertebrae.core.labels import SCHEMA, LabelCatalog, LabelEntry, semantic_key, semantic_keys


class Color(enum.Enum):
    RED = 1
    GREEN = "g"
    BLUE = (0, 0, 1)


@dataclasses.dataclass(frozen=True)
class Point:
    x: int
    name: str
    color: Color = Color.RED


# Keys embed the defining module; pin it so the golden keys do not depend on how pytest imports this file.
Color.__module__ = Point.__module__ = "golden"


U = uuid.UUID("12345678-1234-5678-1234-567812345678")

BUILTIN_VALUES = [
    "cat",
    "@odd",
    "",
    1,
    -7,
    10**30,
    0.5,
    1.0,
    True,
    False,
    U,
    dt.date(2024, 1, 2),
    dt.datetime(2024, 1, 2, 3, 4, 5, 6),
    dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.timezone(dt.timedelta(hours=2))),
    dt.time(13, 14, 15),
    Decimal("1.0"),
    Decimal("1.00"),
    Decimal("-3.25"),
    Fraction(1, 3),
    Fraction(4, 2),
]


def roundtrip(catalog: LabelCatalog) -> LabelCatalog:
    return LabelCatalog.from_dict(json.loads(canonical_json(catalog.to_dict())))


@pytest.mark.parametrize(
    ("value", "key"),
    [
        ("cat", "cat"),
        ("1", "1"),
        ("@x", "@str:@x"),
        ("@str:y", "@str:@str:y"),
        (1, "@int:1"),
        (-7, "@int:-7"),
        (0.5, "@float:0.5"),
        (1.0, "@float:1.0"),
        (-0.0, "@float:0.0"),
        (True, "@bool:true"),
        (False, "@bool:false"),
        (U, "@uuid:12345678-1234-5678-1234-567812345678"),
        (dt.date(2024, 1, 2), "@date:2024-01-02"),
        (dt.datetime(2024, 1, 2, 3, 4, 5), "@datetime:2024-01-02T03:04:05"),
        (dt.datetime(2024, 1, 2, tzinfo=dt.timezone.utc), "@datetime:2024-01-02T00:00:00+00:00"),
        (dt.time(13, 14, 15, 16), "@time:13:14:15.000016"),
        (Decimal("1.0"), "@decimal:1.0"),
        (Decimal("1.00"), "@decimal:1.00"),
        (Fraction(1, 3), "@fraction:1/3"),
        (Fraction(2), "@fraction:2/1"),
        (Color.RED, "@enum:golden.Color.RED"),
        (Color.BLUE, "@enum:golden.Color.BLUE"),
        (Point(3, "p"), '@dataclass:golden.Point:{"color":"@enum:golden.Color.RED","name":"p","x":"@int:3"}'),
        (
            Point(3, "@q", Color.GREEN),
            '@dataclass:golden.Point:{"color":"@enum:golden.Color.GREEN","name":"@str:@q","x":"@int:3"}',
        ),
    ],
)
def test_golden_keys(value, key):
    assert semantic_key(value) == key


def test_int_and_its_text_are_distinct_classes_with_disambiguated_displays():
    catalog = LabelCatalog.from_values([1, "1", 1, "1", "2"])
    assert catalog.keys == ("@int:1", "1", "2")
    assert catalog.display("@int:1") == "1 [int]"
    assert catalog.display("1") == "1 [str]"
    assert catalog.display("2") == "2"  # no clash, no suffix
    assert catalog.value("@int:1") == 1 and type(catalog.value("@int:1")) is int
    assert catalog.value("1") == "1"


def test_uuid_and_its_text_are_distinct():
    catalog = LabelCatalog.from_values([U, str(U)])
    assert len(catalog) == 2
    assert semantic_key(U) != semantic_key(str(U))
    assert catalog.display(semantic_key(U)) == f"{U} [uuid]"
    assert catalog.display(str(U)) == f"{U} [str]"
    assert catalog.value(semantic_key(U)) == U


def test_true_one_and_one_point_zero_are_three_labels():
    catalog = LabelCatalog.from_values([1.0, 1, True])
    assert catalog.keys == ("@bool:true", "@int:1", "@float:1.0")
    assert [type(catalog.value(k)) for k in catalog] == [bool, int, float]
    assert len({catalog.display(k) for k in catalog}) == 3


def test_display_clash_with_a_suffix_like_string_stays_unique():
    catalog = LabelCatalog.from_values([1, "1", "1 [int]"])
    displays = [catalog.display(k) for k in catalog]
    assert len(set(displays)) == 3
    assert catalog.display("1") == "1 [str]"


def test_every_builtin_type_round_trips_through_canonical_json():
    catalog = LabelCatalog.from_values(BUILTIN_VALUES)
    assert len(catalog) == len(BUILTIN_VALUES)
    back = roundtrip(catalog)
    assert back == catalog
    assert back.keys == catalog.keys and back.entries == catalog.entries
    assert [back.display(k) for k in back] == [catalog.display(k) for k in catalog]
    for value in BUILTIN_VALUES:
        restored = back.value(semantic_key(value))
        assert restored == value and type(restored) is type(value)
        if isinstance(value, (Decimal, dt.datetime)):
            assert str(restored) == str(value)  # exact digits, exact offset


def test_enum_and_dataclass_round_trip_as_typed_identities():
    p = Point(3, "p")
    catalog = LabelCatalog.from_values([p, Color.BLUE, Color.RED])
    assert catalog.value(semantic_key(p)) is p
    assert catalog.value("@enum:golden.Color.RED") is Color.RED
    assert catalog.display("@enum:golden.Color.RED") == "Color.RED"
    assert catalog.display(semantic_key(p)) == "Point(color=Color.RED, name='p', x=3)"
    back = roundtrip(catalog)
    assert back == catalog
    entry = back.value("@enum:golden.Color.RED")
    assert isinstance(entry, LabelEntry)
    assert entry.value == {"class": "golden.Color", "member": "RED", "value": "@int:1"}
    assert back.value("@enum:golden.Color.BLUE").value["value"] == "@repr:(0, 0, 1)"
    assert back.value(semantic_key(p)).value == {
        "class": "golden.Point",
        "fields": {"color": "@enum:golden.Color.RED", "name": "p", "x": "@int:3"},
    }


def test_order_is_independent_of_input_order():
    values = BUILTIN_VALUES + [Color.BLUE, Color.RED, Color.GREEN, Point(2, "b"), Point(1, "a"), "1", 2]
    expected = LabelCatalog.from_values(values).keys
    rng = random.Random(0)
    for _ in range(5):
        shuffled = list(values)
        rng.shuffle(shuffled)
        assert LabelCatalog.from_values(shuffled).keys == expected
    types = [e.type for e in LabelCatalog.from_values(values).entries]
    order = "bool int float decimal fraction str uuid date datetime time enum dataclass".split()
    assert types == sorted(types, key=order.index)
    catalog = LabelCatalog.from_values([10, 9, -1, "b", "B", "a", Color.BLUE, Color.RED, Color.GREEN, False, True])
    assert catalog.keys == (
        "@bool:false", "@bool:true", "@int:-1", "@int:9", "@int:10", "B", "a", "b",
        "@enum:golden.Color.RED", "@enum:golden.Color.GREEN", "@enum:golden.Color.BLUE",
    )  # fmt: skip


def test_numpy_scalars_map_to_python_keys():
    assert semantic_key(np.int64(3)) == semantic_key(3) == "@int:3"
    assert semantic_key(np.uint8(3)) == "@int:3"
    assert semantic_key(np.float32(0.5)) == semantic_key(0.5)
    assert semantic_key(np.bool_(True)) == "@bool:true"
    assert semantic_key(np.str_("@a")) == "@str:@a"
    from_array = LabelCatalog.from_values(np.array([3, 1, 3, 2]))
    assert from_array == LabelCatalog.from_values([1, 2, 3])
    assert LabelCatalog.from_values(np.array(["b", "a"])) == LabelCatalog.from_values(["a", "b"])
    objects = np.array([1, "1", Color.RED], dtype=object)
    assert LabelCatalog.from_values(objects).keys == ("@int:1", "1", "@enum:golden.Color.RED")


def test_encode_returns_object_keys_and_names_unknown_values():
    catalog = LabelCatalog.from_values(["a", 1, Color.RED])
    encoded = catalog.encode(["a", 1, Color.RED, 1])
    assert encoded.dtype == object
    assert encoded.tolist() == ["a", "@int:1", "@enum:golden.Color.RED", "@int:1"]
    assert catalog.encode(np.array([1, 1])).tolist() == ["@int:1", "@int:1"]
    assert catalog.encode([]).shape == (0,)
    with pytest.raises(LabelError, match=r"row 2: 'zebra'"):
        catalog.encode(["a", 1, "zebra"])
    with pytest.raises(LabelError, match=r"row 1: .*7.*@int:7"):
        catalog.encode(np.array([1, 7, 8]))
    with pytest.raises(LabelError, match=r"row 1: unsupported label None"):
        catalog.encode(["a", None])
    assert catalog.key_for(1) == "@int:1"
    with pytest.raises(LabelError, match=r"'1'.*'a'"):
        catalog.key_for("1")


def test_catalog_accessors():
    catalog = LabelCatalog.from_values(["b", "a"])
    assert list(catalog) == ["a", "b"] and len(catalog) == 2
    assert "a" in catalog and "z" not in catalog and 1 not in catalog
    assert catalog.index("b") == 1
    with pytest.raises(LabelError, match="'z'"):
        catalog.index("z")
    with pytest.raises(AttributeError):
        catalog._entries = ()
    assert catalog != LabelCatalog.from_values(["a"])


@pytest.mark.parametrize(
    ("value", "type_name"),
    [(None, "NoneType"), (object(), "object"), ([1], "list"), (float("nan"), "float"), (b"ab", "bytes"),
     ({1}, "set"), ({"a": 1}, "dict"), (Decimal("NaN"), "Decimal"), (float("inf"), "float"),
     (np.float64("nan"), "float64"), (Point, "type")],
)  # fmt: skip
def test_unsupported_labels_are_rejected_by_name(value, type_name):
    with pytest.raises(LabelError) as caught:
        semantic_key(value)
    message = str(caught.value)
    assert repr(value) in message and type_name in message and "supported labels" in message
    assert isinstance(caught.value, ValidationError)
    with pytest.raises(LabelError, match=r"label at row 3: "):
        LabelCatalog.from_values(["a", "b", "c", value, None])


def test_dataclass_with_unsupported_field_is_rejected():
    with pytest.raises(LabelError, match=r"field 'name' holds \[1\]"):
        semantic_key(Point(1, [1]))  # type: ignore[arg-type]


def test_from_dict_rejects_missing_and_unknown_schema():
    document = LabelCatalog.from_values(["a", 1]).to_dict()
    assert document["schema"] == SCHEMA
    missing = {k: v for k, v in document.items() if k != "schema"}
    with pytest.raises(LabelError, match=r"schema None.*vertebrae\.semantic-label/v1"):
        LabelCatalog.from_dict(missing)
    with pytest.raises(LabelError, match=r"'vertebrae\.semantic-label/v2'.*'vertebrae\.semantic-label/v1'"):
        LabelCatalog.from_dict({**document, "schema": "vertebrae.semantic-label/v2"})


@pytest.mark.parametrize(
    "tamper",
    [
        lambda e: e[0].update(key="@int:2"),
        lambda e: e[0].update(key="@int:01"),
        lambda e: e[0].update(key="@int:x"),
        lambda e: e[0].update(type="str"),
        lambda e: e[0].update(value=True),
        lambda e: e[1].update(key="b"),
        lambda e: e[1].update(display="A"),
        lambda e: e[2].update(key='@dataclass:golden.Point:{"x":"@int:9"}'),
        lambda e: e[2]["value"]["fields"].update(x="@int:01"),
        lambda e: e[1].pop("display"),
        lambda e: e.append(dict(e[1])),
    ],
)
def test_from_dict_rejects_tampered_entries(tamper):
    document = json.loads(canonical_json(LabelCatalog.from_values([1, "a", Point(1, "p")]).to_dict()))
    LabelCatalog.from_dict(document)
    tamper(document["entries"])
    with pytest.raises(LabelError):
        LabelCatalog.from_dict(document)


def test_to_dict_is_canonical_json_and_preserves_order():
    catalog = LabelCatalog.from_values(BUILTIN_VALUES + [Color.GREEN, Point(1, "p")])
    text = canonical_json(catalog.to_dict())
    document = json.loads(text)
    assert [e["key"] for e in document["entries"]] == list(catalog.keys)
    document["entries"].reverse()
    assert LabelCatalog.from_dict(document).keys == tuple(reversed(catalog.keys))


def test_semantic_keys_name_the_offending_item():
    assert semantic_keys([1, "a"], lambda i: f"labels[{i}]") == ["@int:1", "a"]
    with pytest.raises(LabelError, match=r"^labels\[1\]: "):
        semantic_keys([1, object()], lambda i: f"labels[{i}]")
