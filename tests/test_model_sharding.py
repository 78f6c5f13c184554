"""Models that cannot be split over a TP degree are refused, at every entry point, before any work.

The rule is Megatron-LM's (``t3.workload.sublayers.shard_problem``): heads and KV heads divide by TP, and
so do the MLP's widths (each expert's too). The oracles below are brute-force divisibility over the
published dimensions, written out independently of the code.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from t3.cli.main import main
from t3.errors import ConfigError, T3Error, WorkloadError
from t3.workload import get_model, model_names, sublayer_operator
from t3.workload.hf import moe_operator

HF = Path(__file__).parent / "traces" / "data" / "hf"
# Qwen2-7B's published config.json (https://huggingface.co/Qwen/Qwen2-7B), the keys the loader reads
QWEN2_7B = {
    "model_type": "qwen2", "hidden_size": 3584, "num_hidden_layers": 28, "num_attention_heads": 28,
    "num_key_value_heads": 4, "intermediate_size": 18944, "torch_dtype": "bfloat16",
}  # fmt: skip


def oracle_tps(heads: int, kv: int, *widths: int) -> list[int]:
    """TP degrees 2..1024 under which every GPU holds whole heads, whole KV heads and equal widths."""
    return [t for t in range(2, 1025) if heads % t == 0 and kv % t == 0 and all(w % t == 0 for w in widths)]


def cli(capsys, *args: str) -> tuple[int, str, str]:
    try:
        code = main(list(args))
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def qwen2(tmp_path) -> Path:
    p = tmp_path / "Qwen2-7B" / "config.json"
    p.parent.mkdir()
    p.write_text(json.dumps(QWEN2_7B))
    return p


def test_qwen2_7b_at_tp8_is_one_line_naming_the_key_and_the_valid_degrees(qwen2, capsys):
    code, out, err = cli(capsys, "run", "--model", str(qwen2), "--tp", "8", "--tokens", "1024")
    want = ", ".join(map(str, oracle_tps(28, 4, 18944)))
    assert want == "2, 4"
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error: tp: model 'Qwen2-7B' cannot be split over 8 GPUs: ")
    assert "num_attention_heads = 28 is not divisible by tp=8" in lines[0]
    assert "Megatron-LM" in lines[0]
    assert lines[0].endswith(f"valid TP degrees for this model (2 to 1024): {want}")


def test_qwen2_7b_at_a_valid_tp_has_whole_heads_per_gpu(qwen2):
    m = get_model(qwen2)
    for tp in (2, 4):
        op = sublayer_operator(m, "op", tp, 1024)
        assert op.gemm.k == 28 // tp * 128  # whole heads of 3584 / 28 = 128 each
        assert sublayer_operator(m, "ip-bwd", tp, 1024).gemm.k == (28 + 2 * 4) // tp * 128


def test_kv_heads_are_named_with_the_files_key(tmp_path):
    # 8 KV heads: TP 16 has 32 / 16 = 2 query heads per GPU but half a KV head
    with pytest.raises(WorkloadError) as e:
        sublayer_operator(get_model(HF / "llama-3.1-8b.json"), "fc2", 16, 4096)
    msg = str(e.value)
    assert "num_key_value_heads = 8 is not divisible by tp=16" in msg
    assert "vLLM" in msg and msg.endswith(": " + ", ".join(map(str, oracle_tps(32, 8, 14336))))
    with pytest.raises(
        WorkloadError, match=r"tp: model 'llama-3-70b' .*: kv_heads = 8 is not divisible by tp=16"
    ):
        sublayer_operator(get_model("llama-3-70b"), "op", 16)
    # GPT-2 spells heads n_head
    with pytest.raises(WorkloadError, match=r"n_head = 12 is not divisible by tp=8"):
        sublayer_operator(get_model(HF / "gpt2.json"), "op", 8, 4096)
    # a model TOML is named by its own keys
    p = tmp_path / "m.toml"
    p.write_text("hidden = 1536\nlayers = 2\nheads = 12\nffn = 6144\ntokens = 2048\n")
    with pytest.raises(
        WorkloadError, match=r"heads = 12 is not divisible by tp=8 .* \(2 to 1024\): 2, 3, 4, 6, 12$"
    ):
        sublayer_operator(get_model(p), "fc2", 8)


@pytest.mark.parametrize(
    "heads,kv,ffn",
    [(32, 32, 4096), (32, 8, 14336), (28, 4, 18944), (96, 96, 49152), (12, 4, 4608), (48, 1, 73728)],
)
def test_accepted_exactly_when_every_width_divides(heads, kv, ffn, tmp_path):
    p = tmp_path / "m.toml"
    hidden = heads * 64
    p.write_text(
        f"hidden = {hidden}\nlayers = 1\nheads = {heads}\nkv_heads = {kv}\nffn = {ffn}\ntokens = 2048\n"
    )
    m = get_model(p)
    for tp in range(2, 130):
        ok = heads % tp == 0 and kv % tp == 0 and ffn % tp == 0
        try:
            ops = [sublayer_operator(m, s, tp, 2048 * tp) for s in ("op", "fc2", "fc1-bwd", "ip-bwd")]
        except WorkloadError as err:
            assert not ok, (tp, str(err))
            assert str(err).startswith(f"tp: model 'm' cannot be split over {tp} GPUs")
            continue
        assert ok, tp
        assert [o.gemm.k for o in ops] == [
            heads * 64 // tp,
            ffn // tp,
            ffn // tp,
            (heads + 2 * kv) * 64 // tp,
        ]


def test_every_entry_point_goes_through_the_check(tmp_path, capsys):
    from t3.api import run
    from t3.experiments.reproduce_t3 import Plan
    from t3.experiments.sweep import spec_from_dict

    needle = "kv_heads = 8 is not divisible by tp=16"
    with pytest.raises(T3Error, match=needle):
        run("llama-3-8b", 16, "fc2", "sequential")
    with pytest.raises(ConfigError, match=needle):
        spec_from_dict(
            {"base": {"model": "llama-3-8b", "sublayer": "op", "tokens": 4096}, "grid": {"tp": [8, 16]}}
        )
    with pytest.raises(T3Error, match=needle):
        Plan(models=("llama-3-8b",), tps=(8, 16), large_models=()).validate()
    code, _, err = cli(capsys, "run", "--model", "llama-3-8b", "--tp", "16")
    assert code == 2 and needle in err
    spec = tmp_path / "s.toml"
    spec.write_text('[base]\nmodel = "llama-3-8b"\nsublayer = "op"\ntokens = 4096\n[grid]\ntp = [16]\n')
    code, _, err = cli(capsys, "sweep", str(spec), "--store", str(tmp_path / "st.parquet"))
    assert code == 2 and needle in err and "point 0" in err
    assert not (tmp_path / "st.parquet").exists()


def test_the_t3_papers_pairs_still_run_split_by_width():
    """T-NLG (28 heads) at TP 8 and 16 and PaLM (48 heads) at TP 32 are the T3 paper's own pairs; their
    heads do not divide those degrees, so the zoo marks them split_heads = false: they are sliced by
    width (K = hidden / TP) as the paper does. Every other zoo model splits into whole heads."""
    from t3.experiments.reproduce_t3 import Plan

    by_width = {m for m in model_names() if not get_model(m).split_heads}
    assert by_width == {"t-nlg", "palm"}
    assert 28 % 8 and 28 % 16 and 48 % 32  # why they need it (published head counts)
    assert sublayer_operator(get_model("t-nlg"), "op", 8).gemm.k == 4256 // 8
    assert sublayer_operator(get_model("palm"), "ip-bwd", 32).gemm.k == 3 * 18432 // 32
    Plan().validate()  # every pair of the default reproduction
    # split by width, the widths must still divide
    with pytest.raises(
        WorkloadError, match=r"attention width \(heads x head_dim\) 4256 is not divisible by tp=3"
    ):
        sublayer_operator(get_model("t-nlg"), "op", 3, 3 * 1024)


def test_moe_fields_are_checked_with_the_files_keys(tmp_path):
    mixtral = json.loads((HF / "mixtral-8x7b-v0.1.json").read_text())
    p = tmp_path / "config.json"
    p.write_text(json.dumps({**mixtral, "num_experts_per_tok": 9}))
    with pytest.raises(ConfigError) as e:
        get_model(p)
    assert str(e.value) == (
        f"model '{p}': num_experts_per_tok: each token is routed to 9 experts but a layer has only 8 "
        "(num_local_experts); must be <= 8"
    )
    base = "hidden = 1024\nlayers = 2\nheads = 16\ntokens = 2048\n"
    cases = {
        "experts = 8\ntop_k = 9\nexpert_ffn = 512\nffn = 4608\n": "top_k: each token is routed to 9 experts",
        "experts = 8\nexpert_ffn = 512\nffn = 1024\n": "top_k: missing field",
        "experts = 8\ntop_k = 2\nexpert_ffn = 512\nffn = 512\n": "ffn: a mixture-of-experts layer's per-token "
        "MLP width is top_k x expert_ffn + shared_ffn = 2 x 512 + 0 = 1024, got 512",
        "shared_ffn = 512\nffn = 4096\n": "experts: missing field",
    }
    for extra, needle in cases.items():
        f = tmp_path / "moe.toml"
        f.write_text(base + extra)
        with pytest.raises(
            ConfigError, match="^model '.*moe.toml': " + needle.replace("(", r"\(").replace("+", r"\+")
        ):
            get_model(f)


def test_experts_must_split_over_the_expert_parallel_degree(tmp_path):
    m = get_model(HF / "mixtral-8x7b-v0.1.json")
    assert moe_operator(m, 1024, gpus=4).gpus == 4
    with pytest.raises(WorkloadError) as e:
        moe_operator(m, 1024, gpus=16)
    assert "8 routed experts (num_local_experts), not divisible by 16 GPUs" in str(e.value)
    assert str(e.value).endswith("valid expert-parallel degrees: 2, 4, 8")
    q = get_model(HF / "qwen1.5-moe-a2.7b.json")  # 60 experts
    with pytest.raises(
        WorkloadError, match=r"60 routed experts \(num_experts\).*: 2, 3, 4, 5, 6, 10, 12, 15, 20, 30, 60$"
    ):
        moe_operator(q, 1024, gpus=8)
    # each expert's width is split over the TP group (1400 = 8 x 175: TP 8 splits it, TP 16 does not)
    q = json.loads((HF / "qwen1.5-moe-a2.7b.json").read_text())
    p = tmp_path / "config.json"
    p.write_text(json.dumps({**q, "moe_intermediate_size": 1400}))
    m = get_model(p)
    assert sublayer_operator(m, "fc2", 8, 4096).gemm.k == (4 * 1400 + 5632) // 8
    with pytest.raises(WorkloadError) as e:
        sublayer_operator(m, "fc2", 16, 4096)
    assert "moe_intermediate_size = 1400 is not divisible by tp=16" in str(e.value)
    assert str(e.value).endswith(": " + ", ".join(map(str, oracle_tps(16, 16, 1400, 5632))))


@pytest.mark.parametrize(
    "key,value,needle",
    [
        ("num_attention_heads", 28.0, "expected an integer, got 28.0"),
        ("num_attention_heads", "28", "expected an integer, got '28'"),
        ("num_key_value_heads", 0, "must be > 0, got 0"),
        ("num_key_value_heads", 3, "3 KV heads do not divide the 28 query heads (num_attention_heads)"),
        ("hidden_size", -1, "must be > 0, got -1"),
        # named by the heads that do not split it, the hidden width's key in the message
        (
            "hidden_size",
            3585,
            "num_attention_heads: hidden width 3585 does not split into 28 heads (head dim "
            "128.036 is not a whole number; hidden_size / num_attention_heads)",
        ),
        ("intermediate_size", True, "expected an integer, got True"),
        ("num_hidden_layers", None, "missing key"),
        ("head_dim", 0, "must be > 0, got 0"),
    ],
)
def test_every_config_json_field_is_checked_by_its_name(key, value, needle, tmp_path):
    p = tmp_path / "config.json"
    p.write_text(json.dumps({**QWEN2_7B, key: value}))
    with pytest.raises(ConfigError) as e:
        get_model(p)
    named = needle.partition(":")[0] if needle.startswith("num_attention_heads:") else key
    assert str(e.value).startswith(f"model '{p}': {named}: ") and needle in str(e.value), str(e.value)


def test_head_dim_sets_the_head_width_whatever_the_hidden_width(tmp_path):
    p = tmp_path / "config.json"
    p.write_text(json.dumps({**QWEN2_7B, "hidden_size": 3000, "head_dim": 128}))  # 3000 / 28 is not whole
    m = get_model(p)
    assert sublayer_operator(m, "op", 4, 1024).gemm.k == 28 * 128 // 4


def test_a_zoo_style_table_of_models_says_how_to_use_it(tmp_path, capsys):
    f = tmp_path / "models.toml"
    f.write_text(
        "[a]\nhidden = 1024\nlayers = 2\nheads = 16\nffn = 4096\ntokens = 2048\n[t-nlg]\nhidden = 1\n"
    )
    code, out, err = cli(capsys, "run", "--model", str(f))
    assert code == 2 and out == ""
    assert err.strip() == (
        f"error: model: '{f}' holds several models ([a, t-nlg]) laid out like the zoo; a model file has its "
        "fields at top level (hidden = ..., layers = ..., heads = ..., ffn = ..., tokens = ...): copy one "
        "table's fields, without its [name] line, into a file of its own and pass that file; the zoo's own "
        "models are passed by name (--model t-nlg)"
    )
    f.write_text("[mine]\nhidden = 1024\n")
    with pytest.raises(
        ConfigError, match=r"holds a model as a table \(\[mine\]\) laid out like the zoo; .*pass that file$"
    ):
        get_model(f)
    # a model file with a stray table is a model file: the table is an unknown field
    f.write_text("hidden = 1024\nlayers = 2\nheads = 16\nffn = 4096\ntokens = 2048\n[sub]\nx = 1\n")
    with pytest.raises(ConfigError, match="sub: unknown field"):
        get_model(f)
