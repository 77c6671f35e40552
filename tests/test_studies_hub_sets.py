"""Model sets from Hub queries: resolved once (a mocked HfApi), pinned into the spec and run.json, reused on a
rerun; an unreachable Hub is a ModelError naming the cached repos."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from interlingua.core.errors import ConfigError, ModelError
from interlingua.pipeline.config import parse_spec
from interlingua.studies.hub_sets import cached_repos, pin_model_sets, resolve_model_set

SHA = {
    "suchirsalhan/en_el-alpha90": "a" * 40,
    "suchirsalhan/en_es-merged": "b" * 40,
    "suchirsalhan/goldfish-other": "c" * 40,
    "someoneelse/en_el-alpha90": "d" * 40,
}


class FakeApi:
    """An HfApi with the two calls resolution makes; counts them."""

    def __init__(self, repos: dict[str, str] = SHA) -> None:
        self.repos = repos
        self.calls: list[str] = []

    def list_models(self, *, author: str):
        self.calls.append(f"list {author}")
        return [SimpleNamespace(id=r) for r in self.repos if r.split("/")[0] == author]

    def model_info(self, repo_id: str):
        self.calls.append(f"info {repo_id}")
        return SimpleNamespace(sha=self.repos[repo_id])


class OfflineApi:
    def list_models(self, **_):
        raise ConnectionError("offline mode is enabled")


def _config(tmp_path: Path, **extra) -> dict:
    return {
        "output": str(tmp_path / "out"),
        "corpus": {"source": "bible", "languages": ["eng_Latn", "spa_Latn"], "n": 8},
        "models": [{"name": "base", "path": "goldfish-models/eng_latn_1000mb"}],
        "model_sets": [
            {
                "name": "up",
                "author": "suchirsalhan",
                "match": "en_*",
                "adapter_over": "goldfish-models/eng_latn_1000mb",
                **extra,
            }
        ],
    }


def test_the_glob_picks_the_authors_matching_repos_sorted_and_pinned():
    pins = resolve_model_set("suchirsalhan", "en_*", api=FakeApi())
    assert pins == [
        {"id": "suchirsalhan/en_el-alpha90", "sha": "a" * 40},
        {"id": "suchirsalhan/en_es-merged", "sha": "b" * 40},
    ]


def test_own_tokenizer_downloads_only_tokenizer_files_at_the_pinned_commit(tmp_path):
    seen = []

    def download(repo_id, *, revision, allow_patterns):
        seen.append((repo_id, revision, tuple(allow_patterns)))
        return str(tmp_path / repo_id)

    pins = resolve_model_set("suchirsalhan", "en_es-*", own_tokenizer=True, api=FakeApi(), download=download)
    assert pins == [
        {"id": "suchirsalhan/en_es-merged", "sha": "b" * 40, "tokenizer": str(tmp_path / "suchirsalhan/en_es-merged")}
    ]
    assert seen[0][1] == "b" * 40 and not any(p.endswith((".safetensors", ".bin")) for p in seen[0][2])


def test_a_glob_matching_nothing_is_a_config_error():
    with pytest.raises(ConfigError, match="no Hub model of 'suchirsalhan' matches 'xx_\\*'"):
        resolve_model_set("suchirsalhan", "xx_*", api=FakeApi())


def test_resolved_sets_become_adapter_models_with_pinned_revisions(tmp_path):
    data = pin_model_sets(_config(tmp_path), api=FakeApi())
    spec = parse_spec(data)
    by_name = {m.name: m for m in spec.models}
    assert list(by_name) == ["base", "up/en_el-alpha90", "up/en_es-merged"]
    m = by_name["up/en_el-alpha90"]
    assert (m.path, m.adapter, m.adapter_revision) == (
        "goldfish-models/eng_latn_1000mb",
        "suchirsalhan/en_el-alpha90",
        "a" * 40,
    )
    # the dump (what run.json records) parses back to the same models, not twice as many
    again = parse_spec(spec.model_dump(mode="json"))
    assert [m.name for m in again.models] == list(by_name)
    assert again.model_sets[0].resolved == spec.model_sets[0].resolved


def test_a_rerun_reads_the_pins_from_run_json_and_never_asks_the_hub(tmp_path):
    first = parse_spec(pin_model_sets(_config(tmp_path), api=FakeApi()))
    out = tmp_path / "out"
    out.mkdir()
    (out / "run.json").write_text(json.dumps({"spec": first.model_dump(mode="json")}), encoding="utf-8")
    moved_on = FakeApi({**SHA, "suchirsalhan/en_el-alpha90": "e" * 40, "suchirsalhan/en_nl-new": "f" * 40})
    data = pin_model_sets(_config(tmp_path), api=moved_on)
    assert moved_on.calls == []
    assert data["model_sets"][0]["resolved"] == [p.model_dump() for p in first.model_sets[0].resolved]
    # another query is not served from the old pins
    data = pin_model_sets(_config(tmp_path, match="en_nl-*"), api=moved_on)
    assert [p["id"] for p in data["model_sets"][0]["resolved"]] == ["suchirsalhan/en_nl-new"]


def _fake_cache(root: Path, repo: str, sha: str) -> None:
    """The Hugging Face cache layout for one model at one commit."""
    folder = root / f"models--{repo.replace('/', '--')}"
    (folder / "snapshots" / sha).mkdir(parents=True)
    blob = folder / "blobs" / "0123"
    blob.parent.mkdir()
    blob.write_text("{}", encoding="utf-8")
    (folder / "snapshots" / sha / "adapter_config.json").symlink_to(blob)
    (folder / "refs").mkdir()
    (folder / "refs" / "main").write_text(sha, encoding="utf-8")


def test_an_unreachable_hub_names_the_cached_alternatives(tmp_path):
    cache = tmp_path / "hub"
    _fake_cache(cache, "suchirsalhan/en_el-alpha90", "a" * 40)
    _fake_cache(cache, "suchirsalhan/unrelated", "c" * 40)
    assert cached_repos("suchirsalhan", "en_*", cache) == [("suchirsalhan/en_el-alpha90", ["a" * 40])]
    with pytest.raises(ModelError) as err:
        resolve_model_set("suchirsalhan", "en_*", api=OfflineApi(), cache_dir=cache)
    text = str(err.value)
    assert "could not be queried" in text and "suchirsalhan/en_el-alpha90 at aaaaaaaaaaaa" in text
    assert "unrelated" not in text
    with pytest.raises(ModelError, match="none of them is in the local Hugging Face cache"):
        resolve_model_set("suchirsalhan", "en_*", api=OfflineApi(), cache_dir=tmp_path / "empty")


def test_the_cli_reports_an_unreachable_hub_with_exit_code_2(tmp_path, monkeypatch, capsys):
    import yaml

    from interlingua.cli import main
    from interlingua.studies import hub_sets

    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump(_config(tmp_path)), encoding="utf-8")
    real = hub_sets.resolve_model_set
    monkeypatch.setattr(
        hub_sets,
        "resolve_model_set",
        lambda *a, **k: real(*a, **{**k, "api": OfflineApi(), "cache_dir": tmp_path / "none"}),
    )
    assert main(["plan", str(cfg)]) == 2
    assert "model set suchirsalhan/en_*: the Hub could not be queried" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()  # nothing written


def test_pins_must_be_full_commit_hashes(tmp_path):
    data = _config(tmp_path, resolved=[{"id": "suchirsalhan/en_el-alpha90", "sha": "main"}])
    with pytest.raises(ConfigError, match="model_sets.1.resolved.1.sha"):
        parse_spec(data)
