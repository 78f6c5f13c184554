import pytest

from t3.errors import ConfigError, WorkloadError
from t3.workload import get_model, model_names, sublayer_operator

REQUIRED = ["mega-gpt-2", "t-nlg", "gpt-3", "palm", "mt-nlg", "llama-3-8b", "llama-3-70b", "llama-3-405b"]


def test_zoo_has_required_models():
    assert set(REQUIRED) <= set(model_names())


@pytest.mark.parametrize("tp", [8, 16])
def test_tnlg_shapes_match_paper_table(tp):
    m = get_model("t-nlg")
    h, t = 4256, m.tokens
    expect = {
        "op": (t, h, h // tp),
        "fc2": (t, h, 4 * h // tp),
        "fc1-bwd": (t, h, 4 * h // tp),
        "ip-bwd": (t, h, 3 * h // tp),
    }
    for sl, (mm, nn, kk) in expect.items():
        g = sublayer_operator(m, sl, tp).gemm
        assert (g.m, g.n, g.k) == (mm, nn, kk)
        assert sublayer_operator(m, sl, tp).comm_bytes == t * h * 2


def test_llama_gqa_and_gated_widths():
    m = get_model("llama-3-70b")
    assert sublayer_operator(m, "ip-bwd", 8).gemm.k == (64 + 16) * 128 // 8
    assert sublayer_operator(m, "fc1-bwd", 8).gemm.k == 2 * 28672 // 8
    assert 60e9 < m.params() < 75e9


def test_non_dividing_shapes_are_errors():
    with pytest.raises(WorkloadError, match="tp"):
        sublayer_operator(get_model("t-nlg"), "fc2", 3, tokens=3 * 1024)
    with pytest.raises(WorkloadError, match="tokens"):
        sublayer_operator(get_model("t-nlg"), "fc2", 8, tokens=1001)
    with pytest.raises(WorkloadError, match="sublayer"):
        sublayer_operator(get_model("t-nlg"), "fc3", 8)
    with pytest.raises(ConfigError, match="unknown model"):
        get_model("gpt-5")


def test_model_from_file(tmp_path):
    p = tmp_path / "tiny.toml"
    p.write_text("hidden = 1024\nlayers = 2\nheads = 8\nffn = 4096\ntokens = 512\n")
    m = get_model(str(p))
    assert m.name == "tiny" and sublayer_operator(m, "fc2", 4).gemm.k == 1024
    p.write_text("hidden = 1024\nlayers = 2\nheads = 8\nffn = 4096\ntokens = 512\nhiden = 3\n")
    with pytest.raises(ConfigError, match="hiden: unknown field"):
        get_model(str(p))
