"""ZeroShotDataset: prompt and template rules, typed labels, the strict protocol payload and its fingerprint."""

from __future__ import annotations

import copy
import enum
import uuid

import numpy as np
import pytest

from vertebrae import BenchmarkDataset, DatasetIdentity
from vertebrae.core.errors import LabelError, ValidationError
from vertebrae.data.zero_shot import ZeroShotDataset, ZeroShotProtocol


def _dataset(labels=("cat", "dog", "cat", "owl", "dog", "owl"), **kwargs):
    X = np.arange(len(labels) * 2, dtype=float).reshape(len(labels), 2)
    return BenchmarkDataset.from_arrays(X, list(labels), identity=DatasetIdentity.declared("pets", "1"), **kwargs)


PROMPTS = {"cat": ["a cat", "a photo of a cat"], "dog": "a dog", "owl": ["an owl"]}


def test_rendered_prompts_keep_class_and_declaration_order():
    zs = ZeroShotDataset.from_dataset(_dataset(), {"owl": ["an owl"], "dog": "a dog", "cat": ["a photo of a cat", "a cat"]})
    assert [r["text"] for r in zs.prompt_rows()] == ["a photo of a cat", "a cat", "a dog", "an owl"]
    assert zs.protocol.class_keys == ("cat", "dog", "owl")
    assert zs.protocol.template_ids is None
    assert zs.protocol.prompt_counts() == {"cat": 2, "dog": 1, "owl": 1}
    assert list(zs.prompt_inputs()) == ["a photo of a cat", "a cat", "a dog", "an owl"]
    assert zs.identity_key() == "declared:pets@1"


@pytest.mark.parametrize("prompts, message", [
    ({"cat": "a cat", "dog": "a dog"}, r"class\(es\) \['owl'\] have no prompt"),
    ({**PROMPTS, "eel": "an eel"}, (r"class 'eel' \(str\) is not a label of the source dataset \(classes: 'cat' \(str\), "
                                    r"'dog' \(str\), 'owl' \(str\)\)$")),
    ({**PROMPTS, "owl": []}, r"class 'owl' has no prompt"),
    ({**PROMPTS, "owl": ["an owl", "  "]}, r"class 'owl': prompt 4 is empty"),
    ({**PROMPTS, "owl": ["a dog"]}, r"duplicate prompt 'a dog': declared for class 'dog' and again for class 'owl'"),
    ({**PROMPTS, "owl": [3]}, r"class 'owl': prompt 0 must be a string"),
    ({**PROMPTS, "owl": {"text": "an owl"}}, r"class 'owl': prompts must be a string or a sequence"),
])
def test_prompt_rules_name_the_class_or_prompt(prompts, message):
    with pytest.raises(ValidationError, match=message):
        ZeroShotDataset.from_dataset(_dataset(), prompts)


def test_source_must_be_single_label():
    multi = BenchmarkDataset.from_arrays(np.eye(3), [("a",), ("b",), ("a", "b")], identity=DatasetIdentity.declared("m", "1"),
                                         target_type="multilabel")
    with pytest.raises(ValidationError, match="single-label targets.*target_type 'multilabel'"):
        ZeroShotDataset.from_templates(multi, ["a {label}"])
    with pytest.raises(ValidationError, match="needs a BenchmarkDataset"):
        ZeroShotDataset.from_dataset(np.eye(2), PROMPTS)


@pytest.mark.parametrize("template, message", [
    ("a {} thing", r"positional field \{\} is not allowed"),
    ("a {0} thing", r"positional field \{0\} is not allowed"),
    ("a {label!r}", r"conversion !r is not allowed"),
    ("a {label:>10}", r"format spec :>10 is not allowed"),
    ("a {name}", r"unknown field \{name\}"),
    ("a {label.upper}", r"unknown field \{label.upper\}"),
    ("a {label[0]}", r"unknown field \{label\[0\]\}"),
    ("a {label", r"not a valid format string"),
    ("   ", r"template 0 is empty"),
])
def test_template_fields_are_parsed_with_string_formatter(template, message):
    with pytest.raises(ValidationError, match=message):
        ZeroShotDataset.from_templates(_dataset(), [template])


def test_a_template_without_label_is_refused_for_lacking_label():
    # Before: refused as "duplicate prompt 'a photo'", which hid the cause.
    with pytest.raises(ValidationError, match=r"^template 0 'a photo' has no \{label\} field") as info:
        ZeroShotDataset.from_templates(_dataset(), ["a photo"])
    assert "duplicate" not in str(info.value)
    with pytest.raises(ValidationError, match=r"^template 1 'the photo' has no \{label\} field"):
        ZeroShotDataset.from_templates(_dataset(), ["a {label}", "the photo"])
    # a literal brace pair is no field: '{{label}}' renders '{label}' for every class
    with pytest.raises(ValidationError, match=r"has no \{label\} field"):
        ZeroShotDataset.from_templates(_dataset(), ["a {{label}}"])


@pytest.mark.parametrize("ids, message", [
    (["t1"], r"one id per template \(2\)"), (["t1", ""], r"template_ids\[1\] must be a non-empty string"),
    (["t", "t"], r"unique; repeated: \['t'\]"), ("tt", r"one id per template"),
])
def test_template_ids(ids, message):
    with pytest.raises(ValidationError, match=message):
        ZeroShotDataset.from_templates(_dataset(), ["a {label}", "the {label}"], template_ids=ids)


def test_templates_cover_every_class_and_payload_coverage_is_rechecked():
    zs = ZeroShotDataset.from_templates(_dataset(), ["a {label}", "a photo of a {label}"], template_ids=["short", "photo"],
                                        class_names={"owl": "barn owl"})
    texts = [r["text"] for r in zs.prompt_rows()]
    assert texts == ["a cat", "a photo of a cat", "a dog", "a photo of a dog", "a barn owl", "a photo of a barn owl"]
    assert zs.protocol.template_ids == ("short", "photo") * 3
    payload = zs.protocol_recipe()
    broken = copy.deepcopy(payload)
    del broken["prompts"][5]  # owl loses its 'photo' prompt
    with pytest.raises(ValidationError, match=r"class 'owl': template id\(s\) \['photo'\] do not render it"):
        ZeroShotProtocol.from_payload(broken)
    doubled = copy.deepcopy(payload)
    doubled["prompts"][5]["template_id"] = "short"
    with pytest.raises(ValidationError, match=r"class 'owl': template id\(s\) \['short'\] render it more than once"):
        ZeroShotProtocol.from_payload(doubled)
    partial = copy.deepcopy(payload)
    partial["prompts"][2]["template_id"] = None
    with pytest.raises(ValidationError, match="class 'dog': prompt 'a dog' has no template id"):
        ZeroShotProtocol.from_payload(partial)
    with pytest.raises(ValidationError, match=r"class_names: class 'eel' \(str\) is not a label"):
        ZeroShotDataset.from_templates(_dataset(), ["a {label}"], class_names={"eel": "an eel"})


class Pet(enum.Enum):
    CAT = 1
    DOG = 2


def test_typed_labels_stay_typed():
    ints = _dataset(labels=(1, 2, 1, 2))
    zs = ZeroShotDataset.from_dataset(ints, {1: "class one", 2: "class two"})
    assert zs.protocol.class_keys == ("@int:1", "@int:2")
    # Before: "class '1' is not a label of the source dataset (classes: '1', '2')", which contradicts itself.
    with pytest.raises(ValidationError) as info:
        ZeroShotDataset.from_dataset(ints, {"1": "class one", 2: "class two"})
    assert str(info.value) == ("prompts: class '1' (str) is not a label of the source dataset (classes: 1 (int), "
                               "2 (int)); labels are typed: 1 (int) is a class, '1' (str) is not")
    strs = _dataset(labels=("0", "1", "0", "1"))
    with pytest.raises(ValidationError, match=r"class_names: class 0 \(int\) is not a label .*\(classes: '0' \(str\), "
                                              r"'1' \(str\)\); labels are typed: '0' \(str\) is a class, 0 \(int\) is not$"):
        ZeroShotDataset.from_templates(strs, ["a {label}"], class_names={0: "zero"})
    with pytest.raises(LabelError, match="prompts: unsupported label"):
        ZeroShotDataset.from_dataset(ints, {object(): "x", 1: "class one", 2: "class two"})
    enums = _dataset(labels=(Pet.CAT, Pet.DOG, Pet.CAT))
    zs = ZeroShotDataset.from_templates(enums, ["a {label}"], class_names={Pet.CAT: "cat", Pet.DOG: "dog"})
    assert [r["text"] for r in zs.prompt_rows()] == ["a cat", "a dog"]
    ids = [uuid.UUID(int=1), uuid.UUID(int=2)]
    zs = ZeroShotDataset.from_templates(_dataset(labels=ids), ["item {label}"])
    again = ZeroShotProtocol.from_payload(zs.protocol_recipe())
    assert again.class_keys == zs.protocol.class_keys and again.catalog.value(again.class_keys[0]) == ids[0]


def test_payload_round_trip_and_strictness():
    zs = ZeroShotDataset.from_dataset(_dataset(), PROMPTS, metadata={"source": "unit test"})
    payload = zs.protocol_recipe()
    assert payload["source_dataset_identity_key"] == "declared:pets@1"
    assert payload["sample_ids"] == ["@int:0", "@int:1", "@int:2", "@int:3", "@int:4", "@int:5"]
    assert payload["sample_labels"] == ["cat", "dog", "cat", "owl", "dog", "owl"]
    again = ZeroShotProtocol.from_payload(copy.deepcopy(payload))
    assert again.to_payload() == payload and again.fingerprint() == zs.protocol_fingerprint()
    for mutate, message in [
        (lambda p: p.update(schema="vertebrae.zero-shot-protocol/v0"), "schema .* is not supported"),
        (lambda p: p.update(extra=1), r"unknown \['extra'\]"),
        (lambda p: p["label_catalog"].pop("schema"), "no label-encoding schema"),
        (lambda p: p["label_catalog"].update(schema="vertebrae.semantic-label/v9"), "label catalog schema"),
        (lambda p: p["sample_labels"].__setitem__(0, "eel"), r"sample 0 \(index 0\) has label key 'eel'"),
        (lambda p: p["prompts"][0].update(label="eel"), "not a declared class"),
        (lambda p: p["sample_labels"].__setitem__(3, "cat") or p["sample_labels"].__setitem__(5, "cat"),
         r"class\(es\) \['owl'\] have no samples"),
    ]:
        broken = copy.deepcopy(payload)
        mutate(broken)
        with pytest.raises(ValidationError, match=message):
            ZeroShotProtocol.from_payload(broken)
    with pytest.raises(ValidationError, match="metadata must be strict JSON"):
        ZeroShotDataset.from_dataset(_dataset(), PROMPTS, metadata={"when": object()})


def test_fingerprint_covers_the_complete_ordered_declaration():
    base = ZeroShotDataset.from_dataset(_dataset(), PROMPTS).protocol_fingerprint()
    variants = [
        ZeroShotDataset.from_dataset(_dataset(), {**PROMPTS, "cat": ["a photo of a cat", "a cat"]}),  # order
        ZeroShotDataset.from_dataset(_dataset(), {**PROMPTS, "owl": ["an owl", "a photo of an owl"]}),  # beyond length
        ZeroShotDataset.from_dataset(_dataset(), {**PROMPTS, "owl": "an owl!"}),  # one character
        ZeroShotDataset.from_dataset(_dataset(), PROMPTS, metadata={"v": 2}),
        ZeroShotDataset.from_dataset(_dataset(labels=("cat", "dog", "cat", "owl", "owl", "dog")), PROMPTS),  # labels
    ]
    fps = [v.protocol_fingerprint() for v in variants]
    assert base not in fps and len(set(fps)) == len(fps)
    a = ZeroShotDataset.from_templates(_dataset(), ["a {label}"], template_ids=["x"]).protocol_fingerprint()
    b = ZeroShotDataset.from_templates(_dataset(), ["a {label}"], template_ids=["y"]).protocol_fingerprint()
    assert a != b
    assert ZeroShotDataset.from_dataset(_dataset(), PROMPTS).protocol_fingerprint() == base
