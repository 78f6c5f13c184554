"""docs/calibration.md states the calibration's commands and grids as the code has them."""

from __future__ import annotations

import re
from pathlib import Path

from t3.experiments.calibration import GRIDS

DOC = (Path(__file__).parents[1] / "docs" / "calibration.md").read_text()


def test_every_stage_the_doc_runs_exists():
    stages = re.findall(r"--stage (\S+?)[`\s)]", DOC)
    assert stages, "no --stage in docs/calibration.md"
    for st in stages:
        assert st in (*GRIDS, "B"), f"docs/calibration.md runs --stage {st}; the code has {sorted(GRIDS)} and B"


def _shown(v: float, unit: str) -> str:
    if unit == "GB/s":
        return f"{v / 1e9:g}"
    if unit == "KiB":
        return f"{v / 1024:g}"
    return f"{v:g}" if not isinstance(v, float) or v >= 1 or v == 0 else f"{v:.2f}".rstrip("0").rstrip(".")


def test_the_doc_describes_the_grids_the_code_searches():
    units = {"link.bandwidth_Bps": "GB/s", "dma.inflight_bytes": "KiB", "dma.staging_bytes": "KiB"}
    for stage, grid in GRIDS.items():
        for knob, values in grid.items():
            m = re.search(re.escape(f"`{knob}`") + r"\s*∈\s*\{([^}]*)\}", DOC)
            assert m, f"docs/calibration.md does not give {knob}'s grid (stage {stage})"
            listed = [x.strip() for x in m.group(1).replace("\n", " ").split(",")]
            want = [_shown(v, units.get(knob, "")) for v in values]
            if "…" in listed:  # a regular range: first two and last as the code has them
                i = listed.index("…")
                assert listed[:i] == [f"{v:.2f}" for v in values[:i]] and listed[-1] == f"{values[-1]:.2f}", (
                    knob, listed, values)
                step = round(values[1] - values[0], 10)
                assert all(round(b - a, 10) == step for a, b in zip(values, values[1:], strict=False)), knob
            else:
                assert [float(x) for x in listed] == [float(x) for x in want], (knob, listed, values)
    for stage, n in (("B1", 26), ("B2", 11), ("C", 180)):
        total = 1
        for values in GRIDS[stage].values():
            total *= len(values)
        assert total == n, (stage, total)
        assert f"{n} candidates" in DOC, f"docs/calibration.md does not say stage {stage}'s {n} candidates"


# docs/validation.md's prose outside the generated blocks quotes preset values: they must be the presets'.
VALIDATION = (Path(__file__).parents[1] / "docs" / "validation.md").read_text()


def test_validation_prose_quotes_the_presets_link_values():
    from t3.config.hardware import load_hardware

    mi = load_hardware("mi300x-8")
    m = re.search(r"deliver the (\d+) % of the\s+(\d+) GB/s wire rate", VALIDATION)
    assert m, "docs/validation.md no longer states MI300X's link share; update this test"
    assert float(m.group(1)) == round(mi.collective.link_efficiency * 100, 6)
    assert float(m.group(2)) == mi.link.bandwidth_Bps / 1e9
    h = load_hardware("h100-8")
    m = re.search(r"\((\d\.\d+) against `SM90_NVLINK_BW`", VALIDATION)
    assert m, "docs/validation.md no longer states H100's link share; update this test"
    assert float(m.group(1)) == h.collective.link_efficiency
