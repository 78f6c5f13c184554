"""``t3 validate`` and ``t3 ficco explore`` fit 80 columns and explain every column they print; the FiCCO
heatmaps write each number in a colour that reads on its cell."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

WIDTH = 80


def _run(*args: str, columns: str | None = None) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    if columns is not None:
        env["COLUMNS"] = columns
    p = subprocess.run([sys.executable, "-m", "t3", *args], capture_output=True, text=True, env=env,
                       timeout=300)  # fmt: skip
    assert p.returncode == 0, p.stderr
    return p.stdout


def _too_wide(out: str) -> list[str]:
    return [line for line in out.splitlines() if len(line) > WIDTH]


def _legend(out: str) -> set[str]:
    """The column names the legends of ``out`` explain (lines '  NAME: what it means')."""
    return {m.group(1) for m in re.finditer(r"^  ([^:\n]+): \S", out, re.M)}


def _header_names(out: str) -> list[list[str]]:
    """Each table's column headers, read off the rendered output: the header lines are those above a
    rule of '─'; a header wrapped over two lines is joined ('decomp-' + 'osition', 'vs' + 'bulk')."""
    lines = out.splitlines()
    tables = []
    for i, line in enumerate(lines):
        if set(line.strip()) != {"─"}:
            continue
        head = []
        j = i - 1
        while j >= 0 and lines[j].strip():
            head.insert(0, lines[j])
            j -= 1
        head = head[-2:] if len(head) > 1 and "legal schedules" not in head[0] else head[-1:]
        if len(head) == 2 and "legal schedules" in head[0]:
            head = head[1:]
        tables.append(_columns(head))
    return tables


def _columns(head: list[str]) -> list[str]:
    """Split header lines into columns at runs of 2+ spaces, aligning a two-line header by its end."""
    cells: list[list[tuple[int, str]]] = [
        [(m.end(), m.group(0)) for m in re.finditer(r"\S+(?: \S+)*", line)] for line in head
    ]
    if len(cells) == 1:
        return [c for _, c in cells[0]]
    top = dict(cells[0])
    names = []
    for end, text in cells[1]:
        above = top.get(end)
        if above is None and end - len(text) in {e for e in top}:
            above = None
        if above is None:
            names.append(text)
        elif above.endswith("-"):
            names.append(above[:-1] + text)
        else:
            names.append(f"{above} {text}")
    return names


@pytest.fixture(scope="module")
def validate_piped() -> str:
    return _run("validate")


def test_validate_fits_80_columns_when_piped(validate_piped):
    assert _too_wide(validate_piped) == []
    assert "148 published measurements" in validate_piped or "published measurements" in validate_piped


def test_validate_fits_80_columns_with_columns_80():
    out = _run("validate", "--category", "overlap_time", columns="80")
    assert _too_wide(out) == []
    # the long row ids are all there, folded rather than cut
    assert "h100-rsgemm-M8192-N8192-K29568-gpus2-sequential-tritondist166" in out.replace("\n ", "")


def test_validate_explains_every_column(validate_piped):
    tables = _header_names(validate_piped)
    assert len(tables) == 3, tables
    assert tables[0] == ["row / workload", "role", "measured", "predicted", "unit", "error"]
    assert tables[1] == ["category", "role", "rows", "median", "max", "signs"]
    assert tables[2] == ["category", "axis", "band", "role", "rows", "median", "max"]  # errors by regime
    explained = _legend(validate_piped)
    for name in [*tables[0][0].split(" / "), *tables[0][1:], *tables[1], *tables[2]]:
        assert name in explained, (name, explained)
    assert "percentage points (pp)" in validate_piped  # interference's error unit


def test_validate_json_and_markdown_keep_their_wide_form():
    md = _run("validate", "--category", "gemm_tflops", "--markdown")
    assert md.startswith("| category | role | rows | median \\|error\\| | max \\|error\\| | signs right | worst row |")
    assert "| row | role | workload | measured | predicted | unit | error |" in md


@pytest.fixture(scope="module")
def explore_piped() -> str:
    return _run("ficco", "explore", "--m", "1024", "--n", "1024", "--k", "1024")


def test_ficco_explore_fits_80_columns(explore_piped):
    assert _too_wide(explore_piped) == []
    wide = _run("ficco", "explore", "--m", "1024", "--n", "1024", "--k", "1024", "--top", "3", columns="80")
    assert _too_wide(wide) == []


def test_ficco_explore_explains_every_column(explore_piped):
    tables = _header_names(explore_piped)
    assert tables == [["schedule", "time", "vs bulk", "vs best shard", "decomposition", "contention"]]
    explained = _legend(explore_piped)
    for name in tables[0]:
        assert name in explained, (name, explained)
    # every number has its unit: times in s/ms/µs, ratios in x, losses in %
    body = explore_piped.split("─" * 10, 1)[1].split("columns:", 1)[0]
    for line in body.splitlines():
        for num in re.findall(r"(?<![\w.-])-?\d+(?:\.\d+)?(?![\w.-])(?! ?(?:µs|ms|s|ns|%|x))", line):
            pytest.fail(f"number {num!r} without a unit in {line!r}")


def test_heatmap_text_colour_follows_the_cell_luminance():
    import matplotlib

    from t3.experiments.reproduce_ficco import cell_text_colour

    assert cell_text_colour((0.0, 0.0, 0.0, 1.0)) == "white"
    assert cell_text_colour((1.0, 1.0, 1.0, 1.0)) == "black"
    assert cell_text_colour((0.0, 0.0, 0.5, 1.0)) == "white"  # dark blue
    assert cell_text_colour((1.0, 1.0, 0.6, 1.0)) == "black"  # pale yellow
    cmap = matplotlib.colormaps["RdYlGn"]  # the heatmaps' colour map: dark at both ends, light between
    assert cell_text_colour(cmap(0.0)) == "white"
    assert cell_text_colour(cmap(0.5)) == "black"
    assert cell_text_colour(cmap(1.0)) == "white"


def test_heatmap_titles_are_whole_and_numbers_read_on_their_cells():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from t3.experiments.reproduce_ficco import design_space_heatmaps

    label = "llama3-70b prefill FC-2 out-projection (TP8+SP), a label longer than thirty characters"
    speedups = [0.5 + 0.05 * i for i in range(20)]  # from the colour map's dark red to dark green
    sch = [{"axes": {"comm": "bulk", "executor": "cu", "pieces": 1}, "speedup_vs_bulk": 1.0}]
    it = iter(speedups)
    for comm in ("shard", "ficco"):
        for ex in ("cu", "dma"):
            for g in (2, 4, 8, 16, 64):
                sch.append({"axes": {"comm": comm, "executor": ex, "pieces": g}, "speedup_vs_bulk": next(it)})
    rows = [{"index": 1, "hardware": "mi300x-8", "operator": {"label": label}, "schedules": sch}]
    fig = design_space_heatmaps(rows, plt)
    try:
        ax = fig.axes[0]
        assert " ".join(ax.get_title().split("\n")[:-1]).replace("- ", "-") == label
        assert ax.get_title().split("\n")[-1] == "mi300x-8"
        cmap = matplotlib.colormaps["RdYlGn"]
        seen = {}
        for t in ax.texts:
            v = float(t.get_text())
            r, g, b, _ = cmap((v - 0.5) / 1.0)
            light = 0.2126 * r + 0.7152 * g + 0.0722 * b > 0.5
            assert matplotlib.colors.to_hex(t.get_color()) == ("#000000" if light else "#ffffff"), v
            seen[light] = True
        assert seen == {True: True, False: True}  # both rules were exercised
    finally:
        plt.close(fig)
