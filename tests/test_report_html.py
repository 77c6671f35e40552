"""report.html: the whole report in one self-contained page."""

from __future__ import annotations

import base64
import re

import pytest

from interlingua.report.html import write_html

pytestmark = pytest.mark.pipeline  # whole runs: not in `make test-fast`


def test_html_embeds_the_reports_own_figures_and_keeps_every_table(tmp_path):
    png = bytes.fromhex("89504e470d0a1a0a") + b"fake-png-bytes"
    (tmp_path / "figures").mkdir()
    (tmp_path / "figures" / "a.png").write_bytes(png)
    (tmp_path / "secret.png").write_bytes(png)
    (tmp_path / "report.md").write_text(
        "# interlingua report: x\n\n| pair | matched |\n|---|---|\n| a\\|b | 0.512 |\n\n"
        "![fig](figures/a.png)\n\n![outside](../secret.png)\n",
        encoding="utf-8",
    )
    path = write_html(tmp_path / "report.md")
    page = path.read_text(encoding="utf-8")
    assert path.name == "report.html" and "<title>interlingua report: x</title>" in page
    assert "<table>" in page and '<td class="num">0.512</td>' in page
    data = re.search(r'src="data:image/png;base64,([^"]+)"', page).group(1)
    assert base64.b64decode(data) == png  # the figure itself, not a link
    assert 'src="../secret.png"' in page  # a file outside the report's folder is never read in
    assert "http" not in page  # nothing fetched from the network


def test_a_run_writes_report_html(tmp_path, tiny_gpt2_path):
    from interlingua.pipeline.runs import run

    res = run(
        {
            "output": str(tmp_path / "out"),
            "cache_dir": str(tmp_path / "c"),
            "progress": False,
            "corpus": {"source": "bible", "languages": ["eng_Latn", "deu_Latn"], "books": ["JHN"], "n": 12},
            "models": [{"name": "g", "path": str(tiny_gpt2_path)}],
            "inference": {"permutations": 0},
        }
    )
    page = (res.output / "report.html").read_text(encoding="utf-8")
    assert page.count("data:image/png;base64,") == len(re.findall(r"!\[", (res.output / "report.md").read_text()))
    manifest = (res.output / "manifest.json").read_text()
    assert "report.html" in manifest
