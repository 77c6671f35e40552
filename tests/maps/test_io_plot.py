"""Saved maps round-trip bit for bit, refuse damaged files; per-layer maps; the picture is written."""

from __future__ import annotations

import numpy as np
import pytest

from interlingua.maps import (
    MLP,
    MapFileError,
    Procrustes,
    Ridge,
    fit_and_save,
    fit_layer_maps,
    get_map,
    load_map,
    plot_map_clouds,
)


def _xy(seed: int = 0, n: int = 80, p: int = 6, q: int = 5):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, p))
    return x, x @ rng.standard_normal((p, q)) + 0.3 * rng.standard_normal((n, q))


@pytest.mark.parametrize(
    "name,params",
    [
        ("identity", {}),
        ("procrustes", {}),
        ("procrustes_scaled", {}),
        ("affine", {}),
        ("ridge", {"cv": 3}),
        ("mlp", {"hidden": 8, "max_epochs": 5}),
    ],
)
def test_save_load_round_trip_gives_identical_transforms(tmp_path, name, params):
    x, y = _xy(p=5 if name == "identity" else 6)
    m = get_map(name, **params).fit(x, y)
    path = m.save(tmp_path / "m.safetensors", metadata={"layer_a": 3, "model": "a"})
    back = load_map(path)
    assert type(back) is type(m) and back.name == m.name and back.params == m.params
    assert back.key == m.key and back.metadata_ == {"layer_a": 3, "model": "a"}
    assert back.fit_info_ == m.fit_info_
    np.testing.assert_array_equal(back.transform(x), m.transform(x))


def test_the_key_changes_with_the_content():
    x, y = _xy()
    k1 = get_map("ridge", alpha=1.0).fit(x, y).key
    assert get_map("ridge", alpha=1.0).fit(x, y).key == k1
    assert get_map("ridge", alpha=2.0).fit(x, y).key != k1
    assert get_map("ridge", alpha=1.0).fit(x, y + 1e-9).key != k1


def test_damaged_or_foreign_files_are_refused(tmp_path):
    x, y = _xy()
    path = get_map("procrustes").fit(x, y).save(tmp_path / "p.safetensors")
    data = bytearray(path.read_bytes())
    data[-3] ^= 0xFF  # a tensor byte
    (tmp_path / "bad.safetensors").write_bytes(bytes(data))
    with pytest.raises(MapFileError, match="checksums"):
        load_map(tmp_path / "bad.safetensors")
    with pytest.raises(MapFileError, match="not a Ridge"):
        Ridge.load(path)
    assert isinstance(Procrustes.load(path), Procrustes)
    with pytest.raises(MapFileError, match="does not exist"):
        load_map(tmp_path / "missing.safetensors")
    (tmp_path / "junk.safetensors").write_bytes(b"not a map")
    with pytest.raises(MapFileError, match="not a readable safetensors"):
        load_map(tmp_path / "junk.safetensors")
    from safetensors.numpy import save_file

    save_file({"a": np.zeros(2)}, str(tmp_path / "other.safetensors"), metadata={"format": "x"})
    with pytest.raises(MapFileError, match="not an interlingua map"):
        load_map(tmp_path / "other.safetensors")


def test_fit_and_save_on_chosen_rows_and_per_layer_maps(tmp_path):
    x, y = _xy(1)
    rows = np.arange(0, 80, 2)
    m = fit_and_save(x, y, tmp_path / "one.safetensors", estimator="procrustes", rows=rows, metadata={"note": "even"})
    np.testing.assert_array_equal(m.coef_, get_map("procrustes").fit(x[rows], y[rows]).coef_)
    assert load_map(tmp_path / "one.safetensors").metadata_["rows"] == rows.tolist()
    a = np.stack([x, x * 2])
    b = np.stack([y, y - 1, y + 1])
    records = fit_layer_maps(a, b, tmp_path / "maps", estimator="procrustes", direction="both", metadata={"pair": "p"})
    assert [(r["layer_a"], r["layer_b"], r["direction"]) for r in records] == [
        (0, 0, "a->b"),
        (0, 0, "b->a"),
        (1, 2, "a->b"),
        (1, 2, "b->a"),
    ]
    for r in records:
        loaded = load_map(r["path"])
        assert loaded.key == r["key"] and loaded.metadata_["direction"] == r["direction"]
    fwd, rev = load_map(records[2]["path"]), load_map(records[3]["path"])
    np.testing.assert_array_equal(rev.rotation_, fwd.rotation_.T)


def test_mlp_rejects_bad_hyper_parameters():
    from interlingua.maps import MapInputError

    with pytest.raises(MapInputError, match="val_fraction"):
        MLP(val_fraction=1.5)
    with pytest.raises(MapInputError, match="hidden"):
        MLP(hidden=0)


@pytest.mark.slow
def test_the_picture_is_written(tmp_path):
    x, y = _xy(2, n=60)
    out = plot_map_clouds(
        x, y, tmp_path / "fig" / "clouds.png", estimator="procrustes", folds=3, max_points=40, title="A|B layer 3"
    )
    data = (tmp_path / "fig" / "clouds.png").read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and out["n_points"] == 40
    assert 0 < out["explained"][1] <= out["explained"][0] <= 1
    out2 = plot_map_clouds(x, y, tmp_path / "in_sample.pdf", folds=None)
    assert (tmp_path / "in_sample.pdf").read_bytes()[:4] == b"%PDF" and out2["n_points"] == 60
