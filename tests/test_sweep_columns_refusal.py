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
    assert err.startswith("error: --columns: expected comma-separated column names")
    assert err.count("\n") == 1
