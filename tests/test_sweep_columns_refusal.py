"""t3 sweep show --columns with an empty name is refused, naming --columns, before the store is read."""

from __future__ import annotations

import pytest

from t3.cli.main import main


@pytest.mark.parametrize("value", ["", ",", "time_s,,point", " "])
def test_empty_column_name_is_refused(value, capsys, tmp_path):
    with pytest.raises(SystemExit) as e:
        main(["sweep", "show", str(tmp_path / "missing.parquet"), "--columns", value])
    err = capsys.readouterr().err
    assert e.value.code == 2
    # (an empty value is refused for every option first: src/t3/cli/main.py _refuse_empty)
    want = "error: --columns: an empty value" if value == "" else "error: --columns: expected comma-separated"
    assert err.startswith(want)
    assert err.count("\n") == 1
