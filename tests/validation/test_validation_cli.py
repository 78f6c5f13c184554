"""`t3 validate`: every row gets a prediction, errors follow the row's convention, filters and plots
work, bad options give one-line errors. No test asserts how small the errors are (that is
benchmarks/validation_targets.py's job)."""

from __future__ import annotations

import json
import math
import statistics
import subprocess
import sys

import pytest

from t3.validation import load_dataset
from t3.validation.conventions import measured_compared


def _t3(*args):
    return subprocess.run([sys.executable, "-m", "t3", *args], capture_output=True, text=True)


@pytest.fixture(scope="module")
def report():
    p = _t3("validate", "--json")
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_every_row_has_a_prediction_and_its_error(report):
    rows = load_dataset()
    assert [r["id"] for r in report["rows"]] == [r.id for r in rows]
    by_id = {r.id: r for r in rows}
    for r in report["rows"]:
        assert math.isfinite(r["predicted"]), r["id"]
        assert r["measured"] == pytest.approx(measured_compared(by_id[r["id"]]))
        if r["category"] == "interference":  # a slowdown in %: the error is the difference in points
            assert r["unit"] == "%"
            assert r["error"] == pytest.approx((r["predicted"] - r["measured"]) / 100)
        else:
            assert r["predicted"] > 0, r["id"]
            assert r["error"] == pytest.approx(r["predicted"] / r["measured"] - 1)
        assert r["abs_error"] == pytest.approx(abs(r["error"]))
        if r["category"] == "overlap_speedup":
            assert r["sign_right"] == ((r["predicted"] > 1) == (r["measured"] > 1))
            assert r["predicted"] == pytest.approx(r["detail"]["baseline_s"] / r["detail"]["fused_s"])


def test_time_rows_are_compared_as_busbw_with_the_nccl_tests_factor(report):
    # Megatron-LM's all-gather of 2 MiB in 20.2 us on 8 GPUs: busbw = 2 MiB / 20.2 us x 7/8
    r = next(x for x in report["rows"] if x["id"] == "h100-ag-2MiB-megatron5596")
    assert r["unit"] == "GB/s" and r["published"] == {**r["published"], "value": 20.2, "unit": "us"}
    assert r["measured"] == pytest.approx(2 * 2**20 / 20.2e-6 * 7 / 8 / 1e9)


def test_summary_is_median_and_max_per_category_and_role(report):
    for g in report["summary"]:
        blind_ids = {r.id for r in load_dataset() if r.blind}
        errs = [
            r["abs_error"]
            for r in report["rows"]
            if r["category"] == g["category"] and r["role"] == g["role"]
            and (not g.get("blind") or r["id"] in blind_ids)
        ]  # fmt: skip
        assert g["rows"] == len(errs)
        assert g["median_abs_error"] == pytest.approx(statistics.median(errs))
        assert g["max_abs_error"] == pytest.approx(max(errs))
        if g["category"] == "overlap_speedup":
            signs = [
                r["sign_right"]
                for r in report["rows"]
                if r["category"] == g["category"] and r["role"] == g["role"]
            ]
            assert (g["sign_right"], g["sign_rows"]) == (sum(signs), len(signs))
    assert {(g["category"], g["role"]) for g in report["summary"]} >= {
        (c, "validation") for c in ("collective_busbw", "gemm_tflops", "overlap_speedup")
    }


def test_output_is_deterministic(report):
    p = _t3("validate", "--json")
    assert json.loads(p.stdout) == report


def test_filters_select_rows():
    p = _t3("validate", "--json", "--role", "validation", "--category", "gemm_tflops", "--hardware", "h100-8")
    assert p.returncode == 0, p.stderr
    rows = json.loads(p.stdout)["rows"]
    assert rows and all(
        r["role"] == "validation" and r["category"] == "gemm_tflops" and r["hardware"] == "h100-8"
        for r in rows
    )


def test_human_table_has_units_and_a_summary():
    p = _t3("validate", "--category", "collective_busbw", "--hardware", "mi300x-8")
    assert p.returncode == 0, p.stderr
    assert "GB/s" in p.stdout and "median |error|" in p.stdout and "mi300x-ar-1MiB-rocmblog-xgmi" in p.stdout


def test_plots_are_written_one_per_category(tmp_path):
    p = _t3("validate", "--json", "--plot", str(tmp_path / "figs"))
    assert p.returncode == 0, p.stderr
    files = sorted((tmp_path / "figs").iterdir())
    assert [f.name for f in files] == sorted(
        f"validate-{c}.png"
        for c in ("collective_busbw", "gemm_tflops", "overlap_speedup", "overlap_time", "interference")
    )
    for f in files:
        assert f.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and f.stat().st_size > 10_000
    assert sorted(json.loads(p.stdout)["plots"]) == [str(f) for f in files]


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--role", "fitted"], "role: unknown role 'fitted'"),
        (["--category", "throughput"], "category: unknown category 'throughput'"),
        (["--hardware", "b200"], "hardware: no rows for 'b200'"),
        # no empty success: a selection without rows is refused, and says what there is
        (["--category", "latency"], "no rows match category latency; rows exist for: collective_busbw"),
        (["--json", "--markdown"], "--json and --markdown: choose one output format"),
    ],
)
def test_bad_options_are_one_line_errors(args, needle):
    p = _t3("validate", *args)
    assert p.returncode == 2
    assert needle in p.stderr and "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


def test_an_empty_dataset_file_is_refused(tmp_path):
    f = tmp_path / "empty.toml"
    f.write_text("# no rows yet\n")
    p = _t3("validate", "--data", str(f))
    assert p.returncode == 2 and p.stderr.strip() == f"error: data: {f} has no rows"


def test_a_malformed_dataset_file_is_a_one_line_error(tmp_path):
    f = tmp_path / "mine.toml"
    f.write_text('[[row]]\nid = "a"\ncategory = "gemm_tflops"\n')
    p = _t3("validate", "--data", str(f))
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert "mine.toml: row 1 ('a'): role: missing field" in p.stderr


def test_markdown_has_the_summary_and_one_line_per_row():
    p = _t3("validate", "--markdown", "--category", "gemm_tflops")
    assert p.returncode == 0, p.stderr
    ids = [r.id for r in load_dataset() if r.category == "gemm_tflops"]
    lines = p.stdout.splitlines()
    assert lines[0].startswith("| category | role | rows |")
    summary = lines[: lines.index("")]  # the per-category table comes first
    # calibration, validation, and the blind validation rows apart
    assert sum(line.startswith("| gemm_tflops |") for line in summary) == 3
    # then the errors by regime: one line per (axis, band, role) of the GEMM rows
    bands = lines[len(summary) + 1 :]
    assert bands[0].startswith("| category | axis | band | role | rows |")
    assert any(line.startswith("| gemm_tflops | waves | < 1 wave |") for line in bands)
    for i in ids:
        assert sum(line.startswith(f"| {i} |") and "TFLOPS" in line for line in lines) == 1


def _rows_of(path, ids):
    """The [[row]] blocks of a measured.toml whose id is one of ``ids``, as a TOML text of their own."""
    text = open(path).read()
    blocks = text.split("\n[[row]]\n")
    keep = [b for b in blocks[1:] if any(f'id = "{i}"' in b for i in ids)]
    assert len(keep) == len(ids)
    return "".join("[[row]]\n" + b.strip() + "\n\n" for b in keep)


RUN = "measurements/h100/h100-8-20261126-232539/measured.toml"
ROOT_DIR = __import__("pathlib").Path(__file__).resolve().parents[2]


def test_a_users_rows_the_model_refuses_are_listed_and_the_rest_predicted(tmp_path):
    """`t3 validate --data` on a t3 measure run: a row the model refuses (a held copy that leaves the GEMM
    no CU slot; an interferer that ran no call beside the GEMM) is listed with its reason, the others are
    predicted (the shipped dataset, which has no such row, still fails on one)."""
    tag = "h100-8-20261126-232539"
    ok = f"{tag}-gemm-bf16-2048x2048x2048"
    held = f"{tag}-intf-compute-sm_copy-16MiB-cus66-held-8192x8192x8192"
    apart = f"{tag}-intf-comm-sm_copy-16MiB-cus8-background-8192x8192x8192"
    f = tmp_path / "mine.toml"
    f.write_text(_rows_of(ROOT_DIR / RUN, [ok, held, apart]))
    p = _t3("validate", "--data", str(f), "--json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert [r["id"] for r in doc["rows"]] == [ok]
    why = {d["id"]: d["reason"] for d in doc["not_predicted"]}
    assert set(why) == {held, apart}
    assert (
        "leaves the GEMM none" in why[held] and "no call of the interferer ran beside the GEMM" in why[apart]
    )
    text = _t3("validate", "--data", str(f)).stdout
    assert "not predicted: 2 row(s)" in text and held in text and apart in text
    only = tmp_path / "refused.toml"
    only.write_text(_rows_of(ROOT_DIR / RUN, [held]))
    p = _t3("validate", "--data", str(only))
    assert p.returncode != 0 and "predicts none of the 1 rows" in p.stderr and "Traceback" not in p.stderr


def test_the_kits_rows_taken_apart_from_the_gemm_are_the_ones_with_every_unit_counted():
    """`not_beside`: a background row of the interferer whose every unit was counted (none inside the
    GEMM's span) is one; one whose few units inside the span were counted is not; nor is a GEMM-victim
    row of the same run or a published row."""
    from t3.validation.runner import not_beside

    rows = {r.id: r for r in load_dataset([ROOT_DIR / RUN])}
    tag = "h100-8-20261126-232539"
    apart = rows[f"{tag}-intf-comm-sm_copy-16MiB-cus8-background-8192x8192x8192"]
    beside = rows[f"{tag}-intf-comm-sm_copy-16MiB-cus4-background-8192x8192x8192"]
    assert apart.published["samples_together"] >= apart.published["units"] and not_beside(apart)
    assert beside.published["samples_together"] < beside.published["units"] and not not_beside(beside)
    assert not not_beside(rows[f"{tag}-intf-compute-sm_copy-16MiB-cus8-background-8192x8192x8192"])
    assert not any(not_beside(r) for r in load_dataset())  # the shipped (published) rows
