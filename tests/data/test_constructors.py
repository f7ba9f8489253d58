"""BenchmarkDataset's constructors for what users hold (texts, image paths, in-memory images, DataFrames) and its
derived datasets (``subset``) and batches (``iter_batches``); bad input is refused naming the column, row or
argument."""

from __future__ import annotations

import enum
import os
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from vertebrae import BenchmarkDataset, DatasetIdentity, ValidationError, VertebraeError
from vertebrae.core.fingerprint import fingerprint
from vertebrae.core.inputs import RawInputs
from vertebrae.data.constructors import InMemoryImages
from vertebrae.extractors import PrecomputedExtractor
from vertebrae.stages.common import embedding_recipe

ID = DatasetIdentity.declared("toy", "1")
LABELS = ["cat", "dog", "cat", "dog"]


def _raises(fn, *args, match: str | None = None, **kwargs) -> str:
    with pytest.raises(ValidationError) as info:
        fn(*args, **kwargs)
    assert isinstance(info.value, VertebraeError) and isinstance(info.value, ValueError)
    if match is not None:
        assert match in str(info.value), str(info.value)
    return str(info.value)


def _pixels(n=4, h=10, w=12, seed=0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, size=(n, h, w, 3), dtype=np.uint8)


def _write_pngs(folder: Path, pixels: np.ndarray) -> list[Path]:
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, image in enumerate(pixels):
        path = folder / f"img_{i}.png"
        Image.fromarray(image).save(path)
        paths.append(path)
    return paths


# ------------------------------------------------------------------------------------------ from_arrays: texts


def test_a_list_of_texts_becomes_raw_inputs_with_the_row_ids():
    ds = BenchmarkDataset.from_arrays(["a cat", "a dog", "the cat", "the dog"], LABELS, modality="text",
                                      row_ids=["r1", "r2", "r3", "r4"], identity=ID)
    assert isinstance(ds.inputs, RawInputs) and ds.inputs.kind == "text" and ds.modality == "text"
    assert ds.inputs.values == ("a cat", "a dog", "the cat", "the dog") and ds.inputs.ids == ("r1", "r2", "r3", "r4")
    same = BenchmarkDataset.from_arrays(np.array(["a cat", "a dog", "the cat", "the dog"]), LABELS, modality="text",
                                        identity=DatasetIdentity.from_content())
    assert same.inputs.values == ds.inputs.values and same.summary()["n_features"] is None


def test_texts_are_refused_naming_the_row_and_the_choice_of_modality():
    _raises(BenchmarkDataset.from_arrays, ["a", 3, "c", "d"], LABELS, modality="text", identity=ID, match="row 1 holds int")
    message = _raises(BenchmarkDataset.from_arrays, ["a", "b", "c", "d"], LABELS, identity=ID)
    assert "modality='text'" in message and "modality='image'" in message
    _raises(BenchmarkDataset.from_arrays, np.ones((4, 3)), LABELS, modality="text", identity=ID,
            match="modality 'text' does not fit X: a numeric array of shape (4, 3)")
    _raises(BenchmarkDataset.from_arrays, RawInputs.texts(["a", "b", "c", "d"]), LABELS, modality="image", identity=ID,
            match="modality 'image' does not fit X: RawInputs of kind 'text'")
    _raises(BenchmarkDataset.from_arrays, sp.csr_matrix(np.ones((4, 2))), LABELS, modality="text", identity=ID,
            match="sparse matrix")


def test_raw_inputs_keep_their_kind_and_numeric_rows_default_to_features():
    raw = RawInputs.texts(["a", "b", "c", "d"])
    assert BenchmarkDataset.from_arrays(raw, LABELS, identity=ID).modality == "text"
    assert BenchmarkDataset.from_arrays(raw, LABELS, modality="text", identity=ID).inputs is raw
    assert BenchmarkDataset.from_arrays(np.ones((4, 2)) * np.arange(4)[:, None], LABELS, identity=ID).modality == "features"
    assert BenchmarkDataset.from_arrays([[0.0, 1], [1, 0], [0, 2], [2, 0]], LABELS, identity=ID).modality == "features"


# ------------------------------------------------------------------------------------------ from_arrays: images


def test_image_paths_become_raw_inputs_of_absolute_paths(tmp_path, monkeypatch):
    paths = _write_pngs(tmp_path / "img", _pixels())
    monkeypatch.chdir(tmp_path)
    ds = BenchmarkDataset.from_arrays([f"img/{p.name}" for p in paths], LABELS, modality="image", identity=ID)
    assert isinstance(ds.inputs, RawInputs) and ds.inputs.kind == "image" and ds.modality == "image"
    assert ds.inputs.values == tuple(os.path.abspath(p) for p in paths)
    by_path = BenchmarkDataset.from_arrays(paths, LABELS, modality="image", identity=ID)  # Path objects
    assert by_path.inputs.values == ds.inputs.values


def test_a_missing_image_file_names_the_row_and_the_path(tmp_path):
    paths = _write_pngs(tmp_path, _pixels(3))
    message = _raises(BenchmarkDataset.from_arrays, [*paths, tmp_path / "gone.png"], LABELS, modality="image",
                      row_ids=["a", "b", "c", "d"], identity=ID)
    assert "row 'd'" in message and "image file not found" in message and "gone.png" in message


def test_in_memory_uint8_images_become_in_memory_images():
    pixels = _pixels()
    ds = BenchmarkDataset.from_arrays(pixels, LABELS, modality="image", identity=ID)
    assert isinstance(ds.inputs, InMemoryImages) and isinstance(ds.inputs, RawInputs) and ds.modality == "image"
    np.testing.assert_array_equal(np.stack(ds.inputs.values), pixels)
    assert BenchmarkDataset.from_arrays(pixels, LABELS, identity=ID).modality == "image"  # no doubt: inferred
    gray = BenchmarkDataset.from_arrays(pixels[..., 0], LABELS, modality="image", identity=ID)
    assert gray.inputs[0].shape == (10, 12, 3) and (gray.inputs[0][..., 2] == pixels[0, ..., 0]).all()
    rgba = np.concatenate([pixels, np.full((4, 10, 12, 1), 255, np.uint8)], axis=3)
    np.testing.assert_array_equal(BenchmarkDataset.from_arrays(rgba, LABELS, identity=ID).inputs[1], pixels[1])
    assert not ds.inputs[0].flags.writeable and "4 RGB uint8 images" in repr(ds.inputs)


def test_pil_images_become_in_memory_images():
    from PIL import Image

    pixels = _pixels()
    images = [Image.fromarray(p) for p in pixels]
    images[1] = images[1].convert("L")  # grayscale is converted to RGB
    ds = BenchmarkDataset.from_arrays(images, LABELS, identity=ID)
    assert isinstance(ds.inputs, InMemoryImages)
    np.testing.assert_array_equal(ds.inputs[0], pixels[0])
    assert ds.inputs[1].shape == (10, 12, 3)
    mixed = BenchmarkDataset.from_arrays([images[0], pixels[1], pixels[2], images[3]], LABELS, modality="image",
                                         identity=ID)
    np.testing.assert_array_equal(mixed.inputs[1], pixels[1])


def test_bad_in_memory_images_are_refused_naming_the_row():
    _raises(BenchmarkDataset.from_arrays, _pixels().astype(np.float32), LABELS, modality="image", identity=ID,
            match="uint8")
    _raises(BenchmarkDataset.from_arrays, [_pixels()[0], "x.png", _pixels()[1], _pixels()[2]], LABELS, modality="image",
            identity=ID, match="row 1 holds str")
    _raises(BenchmarkDataset.from_arrays, ["x.png", _pixels()[0], "y.png", "z.png"], LABELS, modality="image",
            identity=ID, match="row 1 holds ndarray")
    _raises(BenchmarkDataset.from_arrays, [_pixels()[0], np.zeros((4, 4, 2), np.uint8), _pixels()[1], _pixels()[2]],
            LABELS, modality="image", row_ids=["a", "b", "c", "d"], identity=ID, match="row 'b' has shape (4, 4, 2)")
    _raises(BenchmarkDataset.from_arrays, _pixels()[:3], LABELS, modality="image", identity=ID, match="3 rows but 4 labels")


def test_a_content_identity_hashes_the_pixels_and_subsets_slice_in_memory_images():
    pixels = _pixels()
    first = BenchmarkDataset.from_arrays(pixels, LABELS, identity=DatasetIdentity.from_content())
    changed = pixels.copy()
    changed[2, 0, 0, 0] ^= 1
    second = BenchmarkDataset.from_arrays(changed, LABELS, identity=DatasetIdentity.from_content())
    assert first.identity_key() != second.identity_key()
    again = BenchmarkDataset.from_arrays(pixels.copy(), LABELS, identity=DatasetIdentity.from_content())
    assert again.identity_key() == first.identity_key()
    part = first.rows(1, 3)
    assert isinstance(part, InMemoryImages) and part.ids == (1, 2)
    np.testing.assert_array_equal(first.inputs[np.array([3, 0])][1], pixels[0])


@pytest.fixture(scope="module")
def tiny_clip(tmp_path_factory):
    pytest.importorskip("open_clip")
    import tiny_models

    return tiny_models.build_open_clip(tmp_path_factory.mktemp("constructors") / "clip")


def test_in_memory_images_embed_like_the_same_images_on_disk(tmp_path, tiny_clip):
    """A real (tiny) open_clip model through the labelled benchmark: arrays, PIL images and PNG files of the same
    pixels give the same embeddings."""
    from PIL import Image

    from vertebrae import Benchmark
    from vertebrae.extractors.open_clip import OpenCLIPExtractor

    pixels = _pixels(n=6, h=20, w=24)
    labels = ["cat", "dog", "bird"] * 2
    paths = _write_pngs(tmp_path, pixels)
    clip = OpenCLIPExtractor("clip", f"local-dir:{tiny_clip}", device="cpu", batch_size=4)
    on_disk = clip.transform(BenchmarkDataset.from_image_paths(paths, labels, identity=ID).inputs)
    in_memory = BenchmarkDataset.from_arrays(pixels, labels, modality="image", identity=ID)
    np.testing.assert_allclose(clip.transform(in_memory.inputs), on_disk, rtol=1e-5, atol=1e-6)
    pil = BenchmarkDataset.from_arrays([Image.fromarray(p) for p in pixels], labels, identity=ID)
    np.testing.assert_allclose(clip.transform(pil.inputs), on_disk, rtol=1e-5, atol=1e-6)
    result = Benchmark(in_memory, [clip]).run()
    assert result.extractor_results[0].embedding_metadata is not None
    assert np.isfinite(result.extractor_results[0].overlap.score)


def test_in_memory_images_reach_a_hugging_face_vision_model(tmp_path):
    pytest.importorskip("transformers")
    import tiny_models
    from vertebrae.extractors.huggingface import HFVisionExtractor

    folder = tiny_models.build_hf_vit(tmp_path / "vit")
    pixels = _pixels(n=3, h=16, w=20)
    vit = HFVisionExtractor("vit", str(folder), device="cpu")
    from_disk = vit.transform(BenchmarkDataset.from_image_paths(_write_pngs(tmp_path / "img", pixels), ["a", "b", "a"],
                                                                identity=ID).inputs)
    in_memory = vit.transform(BenchmarkDataset.from_arrays(pixels, ["a", "b", "a"], identity=ID).inputs)
    np.testing.assert_allclose(in_memory, from_disk, rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------------------------------ from_image_paths


def test_from_image_paths_resolves_against_base_dir_and_hashes_file_bytes(tmp_path):
    paths = _write_pngs(tmp_path / "img", _pixels())
    names = [p.name for p in paths]
    ds = BenchmarkDataset.from_image_paths(names, LABELS, base_dir=tmp_path / "img", row_ids=["a", "b", "c", "d"],
                                           identity=DatasetIdentity.from_content())
    assert ds.modality == "image" and ds.inputs.values == tuple(str(p) for p in paths)
    assert ds.inputs.ids == ("a", "b", "c", "d") and ds.row_ids == ("a", "b", "c", "d")
    before = ds.identity_key()
    _write_pngs(tmp_path / "img", _pixels(seed=1))
    after = BenchmarkDataset.from_image_paths(names, LABELS, base_dir=tmp_path / "img", row_ids=["a", "b", "c", "d"],
                                              identity=DatasetIdentity.from_content())
    assert after.identity_key() != before


def test_from_image_paths_refusals(tmp_path):
    paths = _write_pngs(tmp_path, _pixels())
    _raises(BenchmarkDataset.from_image_paths, str(paths[0]), LABELS, identity=ID, match="sequence of image file paths")
    _raises(BenchmarkDataset.from_image_paths, [*paths[:3], 7], LABELS, identity=ID, match="row 3 holds int")
    _raises(BenchmarkDataset.from_image_paths, [*paths[:3], "nope.png"], LABELS, base_dir=tmp_path, identity=ID,
            match=f"row 3: image file not found: {tmp_path / 'nope.png'}")
    with pytest.raises(VertebraeError, match="no identity"):
        BenchmarkDataset.from_image_paths(paths, LABELS, identity=None)


# ------------------------------------------------------------------------------------------ from_dataframe


@pytest.fixture
def frame():
    pd = pytest.importorskip("pandas")
    return pd.DataFrame({"id": ["r1", "r2", "r3", "r4"], "x1": [0.0, 1.0, 0.5, 1.5], "x2": [1, 0, 2, 0],
                         "text": ["a cat", "a dog", "the cat", "the dog"], "label": LABELS})


def test_from_dataframe_feature_columns_and_ids(frame):
    ds = BenchmarkDataset.from_dataframe(frame, feature_cols=["x1", "x2"], label_col="label", id_col="id", identity=ID)
    assert ds.modality == "features" and ds.row_ids == ("r1", "r2", "r3", "r4")
    np.testing.assert_array_equal(ds.inputs, frame[["x1", "x2"]].to_numpy(dtype=float))
    assert ds.class_counts() == {"cat": 2, "dog": 2}
    numeric = frame.drop(columns=["text"])
    default = BenchmarkDataset.from_dataframe(numeric, label_col="label", id_col="id", identity=ID)  # every other column
    np.testing.assert_array_equal(default.inputs, ds.inputs)
    no_ids = BenchmarkDataset.from_dataframe(numeric, label_col="label", feature_cols=["x1"], identity=ID)
    assert no_ids.row_ids == BenchmarkDataset.from_arrays(np.ones((4, 1)), LABELS, identity=ID).row_ids


def test_from_dataframe_text_and_image_columns(frame, tmp_path):
    texts = BenchmarkDataset.from_dataframe(frame, input_col="text", label_col="label", id_col="id", modality="text",
                                            identity=ID)
    assert isinstance(texts.inputs, RawInputs) and texts.inputs.values[1] == "a dog" and texts.inputs.ids[1] == "r2"
    paths = _write_pngs(tmp_path / "img", _pixels())
    frame = frame.assign(path=[f"img/{p.name}" for p in paths])
    images = BenchmarkDataset.from_dataframe(frame, input_col="path", label_col="label", modality="image",
                                             base_dir=tmp_path, identity=ID)
    assert images.modality == "image" and images.inputs.values == tuple(str(p) for p in paths)
    from PIL import Image

    frame = frame.assign(picture=[Image.fromarray(p) for p in _pixels()])
    held = BenchmarkDataset.from_dataframe(frame, input_col="picture", label_col="label", identity=ID)
    assert isinstance(held.inputs, InMemoryImages)


def test_from_dataframe_multilabel_and_regression_columns():
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({"x": [0.0, 1.0, 2.0, 3.0], "sun": [1, 0, 1, 1], "rain": [0, 1, 1, 0],
                       "tags": [("a",), ("b",), ("a", "b"), ("a",)], "y1": [0.1, 0.9, 0.4, 0.3], "y2": [1.0, 2.0, 3.0, 5.0]})
    indicator = BenchmarkDataset.from_dataframe(df, feature_cols=["x"], label_col=["sun", "rain"],
                                                target_type="multilabel", identity=ID)
    assert indicator.target_type == "multilabel" and indicator.class_counts() == {"rain": 2, "sun": 3}
    sets = BenchmarkDataset.from_dataframe(df, feature_cols=["x"], label_col="tags", identity=ID)
    assert sets.target_type == "multilabel" and sets.class_counts() == {"a": 3, "b": 2}
    regression = BenchmarkDataset.from_dataframe(df, feature_cols=["x"], label_col=["y1", "y2"],
                                                 target_type="regression", identity=ID)
    assert regression.targets.names == ("y1", "y2") and regression.targets.values.shape == (4, 2)
    single = BenchmarkDataset.from_dataframe(df, feature_cols=["x"], label_col="y2", target_type="regression", identity=ID)
    np.testing.assert_array_equal(single.targets.values, [1.0, 2.0, 3.0, 5.0])


def test_from_dataframe_refusals_name_the_column_and_row(frame):
    pd = pytest.importorskip("pandas")
    build = BenchmarkDataset.from_dataframe
    _raises(build, frame.values, label_col="label", identity=ID, match="needs a pandas DataFrame")
    _raises(build, frame, label_col="kind", feature_cols=["x1"], identity=ID,
            match="label_col='kind' is not a column of the DataFrame (columns: 'id', 'x1'")
    _raises(build, frame, label_col="label", feature_cols=["x1", "nope"], identity=ID, match="feature_cols='nope'")
    _raises(build, frame, label_col="label", id_col="id", identity=ID,
            match="column 'text' (feature_cols) is not numeric (dtype")
    gap = frame.assign(label=["cat", None, "cat", "dog"])
    _raises(build, gap, label_col="label", feature_cols=["x1"], identity=ID,
            match="column 'label' (label_col) is empty at row 1 (index 1)")
    nan = frame.assign(x1=[0.0, 1.0, np.nan, 2.0]).set_index(pd.Index(["a", "b", "c", "d"]))
    _raises(build, nan, label_col="label", feature_cols=["x1", "x2"], identity=ID,
            match="column 'x1' (feature_cols) holds nan at row 2 (index 'c')")
    _raises(build, frame.assign(text=["a", 1.5, None, "d"]), input_col="text", label_col="label", modality="text",
            identity=ID, match="column 'text' (input_col) is empty at row 2")
    _raises(build, frame, input_col="text", label_col="label", identity=ID, match="needs modality='text'")
    _raises(build, frame, input_col="text", feature_cols=["x1"], label_col="label", modality="text", identity=ID,
            match="not both")
    _raises(build, frame, input_col="label", label_col="label", modality="text", identity=ID, match="also the label")
    _raises(build, frame, feature_cols=["x1"], label_col=["x1", "x2"], identity=ID, match="several label columns")
    _raises(build, frame, feature_cols=["x1"], label_col="label", modality="text", identity=ID, match="needs input_col")
    _raises(build, frame.iloc[:0], label_col="label", identity=ID, match="no rows")
    _raises(build, frame.assign(id=["r1", "r1", "r3", "r4"]), label_col="label", feature_cols=["x1"], id_col="id",
            identity=ID, match="duplicate row id 'r1'")


# ------------------------------------------------------------------------------------------ subset


def _features(n=12, seed=0):
    return np.random.default_rng(seed).normal(size=(n, 3))


def test_a_subset_is_a_new_dataset_with_a_derived_identity():
    labels = ["a", "b", "c"] * 4
    ds = BenchmarkDataset.from_arrays(_features(), labels, row_ids=[f"r{i}" for i in range(12)], identity=ID)
    part = ds.subset([5, 0, 3])
    assert part.row_ids == ("r5", "r0", "r3") and part.n_rows == 3
    np.testing.assert_array_equal(part.inputs, ds.inputs[[5, 0, 3]])
    assert part.identity_key() != ds.identity_key() and part.identity.reusable
    assert part.identity_key().startswith("manifest:toy.subset:")
    assert ds.subset([5, 0, 3]).identity_key() == part.identity_key()  # same rows: same identity
    assert ds.subset([0, 3, 5]).identity_key() != part.identity_key()  # order is part of a dataset
    mask = np.zeros(12, dtype=bool)
    mask[[0, 3, 5]] = True
    assert ds.subset(mask).identity_key() == ds.subset([0, 3, 5]).identity_key()
    extractor = PrecomputedExtractor("raw")
    fps = {fingerprint("embedding", embedding_recipe(d.identity_key(), "samples", extractor)) for d in (ds, part)}
    assert len(fps) == 2  # every fingerprint built on the identity differs
    assert part.class_counts() == {"a": 2, "c": 1}  # an absent class leaves the catalog
    other_parent = BenchmarkDataset.from_arrays(_features(), labels, row_ids=[f"r{i}" for i in range(12)],
                                                identity=DatasetIdentity.declared("toy", "2"))
    assert other_parent.subset([5, 0, 3]).identity_key() != part.identity_key()


def test_subset_identities_follow_the_parent_kind():
    labels = ["a", "b"] * 6
    ephemeral = BenchmarkDataset.from_arrays(_features(), labels, identity=DatasetIdentity.ephemeral())
    part = ephemeral.subset(range(6))
    assert part.identity.kind == "ephemeral" and not part.identity.reusable
    assert part.identity_key() == ephemeral.subset(range(6)).identity_key()
    content = BenchmarkDataset.from_arrays(_features(), labels, identity=DatasetIdentity.from_content())
    assert content.subset(range(6)).identity_key().startswith("manifest:content.subset:")
    changed = BenchmarkDataset.from_arrays(_features(seed=1), labels, identity=DatasetIdentity.from_content())
    assert changed.subset(range(6)).identity_key() != content.subset(range(6)).identity_key()


def test_subset_keeps_sparse_raw_groups_and_typed_targets():
    class Colour(enum.Enum):
        RED = 1
        BLUE = 2

    labels = [Colour.RED, Colour.BLUE, 1, "1"] * 3
    sparse = BenchmarkDataset.from_embeddings(sp.csr_matrix(_features()), labels, identity=ID).with_groups(list(range(12)))
    part = sparse.subset([0, 1, 2, 3, 4])
    assert sp.isspmatrix_csr(part.inputs) and part.groups == tuple(sparse.groups[:5])
    assert [part.catalog.value(k) for k in part.label_keys] == [Colour.RED, Colour.BLUE, 1, "1", Colour.RED]
    texts = BenchmarkDataset.from_arrays([f"t{i}" for i in range(12)], ["x", "y"] * 6, modality="text", identity=ID)
    assert texts.subset([1, 2]).inputs.values == ("t1", "t2")
    multi = BenchmarkDataset.from_embeddings(_features(4), [("a",), ("b",), ("a", "c"), ("b",)], identity=ID)
    kept = multi.subset([0, 1, 3])
    assert kept.class_counts() == {"a": 1, "b": 2}  # label c never occurs in the subset
    regression = BenchmarkDataset.from_embeddings(_features(6), [0.5, 1.0, 2.0, 3.0, 4.0, 8.0], target_type="regression",
                                                  identity=ID)
    np.testing.assert_array_equal(regression.subset([1, 5]).targets.values, [1.0, 8.0])


def test_subset_refusals():
    ds = BenchmarkDataset.from_arrays(_features(), ["a", "b"] * 6, identity=ID)
    _raises(ds.subset, [], match="no rows selected")
    _raises(ds.subset, [0, 12], match="row position(s) [12] outside 0..11")
    _raises(ds.subset, [-1, 2], match="[-1] outside")
    _raises(ds.subset, [1, 2, 1], match="[1] selected more than once")
    _raises(ds.subset, np.ones(5, dtype=bool), match="boolean mask needs one entry per row (12)")
    _raises(ds.subset, ["r1"], match="integer positions or a boolean mask")
    _raises(ds.subset, 3, match="integer positions or a boolean mask")
    _raises(ds.subset, [0, 2, 4], match="single class")


# ------------------------------------------------------------------------------------------ iter_batches


def test_iter_batches_yields_row_order_batches_with_typed_labels():
    labels = [1, 2, 1, 2, 1]
    ds = BenchmarkDataset.from_arrays([f"t{i}" for i in range(5)], labels, modality="text",
                                      row_ids=list("abcde"), identity=ID).with_groups(["g1", "g1", "g2", "g2", "g3"])
    batches = list(ds.iter_batches(2))
    assert [(b.start, b.stop, len(b)) for b in batches] == [(0, 2, 2), (2, 4, 2), (4, 5, 1)]
    assert batches[1].inputs.values == ("t2", "t3") and batches[1].row_ids == ("c", "d")
    assert batches[0].labels == [1, 2] and all(type(v) is int for v in batches[0].labels)
    assert batches[2].groups == ("g3",) and batches[2].describe_rows() == ["'e'"]
    assert len(list(ds.iter_batches(batch_size=10))) == 1
    multi = BenchmarkDataset.from_embeddings(_features(3), [("a",), ("b", "a"), ("b",)], identity=ID)
    assert next(multi.iter_batches(3)).labels == [("a",), ("a", "b"), ("b",)]
    for bad in (0, -1, 1.5, True, "2"):
        _raises(lambda b=bad: list(ds.iter_batches(b)), match="batch_size must be a positive integer")
