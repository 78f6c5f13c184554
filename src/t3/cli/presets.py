"""``t3 presets``: list hardware presets, models and configurations."""

from __future__ import annotations

import json

import typer
from rich.console import Console
from rich.table import Table

from t3.cli.main import app
from t3.config.hardware import load_hardware, preset_names
from t3.provenance import hardware_hash, run_fields


@app.command()
def presets(
    as_json: bool = typer.Option(
        False, "--json", help="print JSON: {presets: [...], provenance} (each preset with its content hash)"
    ),
) -> None:
    """List the hardware presets (name, GPUs, topology, peak FP16, HBM and link bandwidth; nodes joined by a
    network: their count and each GPU's NIC bandwidth)."""
    rows = []
    for name in preset_names():
        hw = load_hardware(name)
        rows.append(
            {
                "name": name,
                "description": hw.description,
                "gpus": hw.topology.gpus * (hw.network.nodes if hw.network else 1),
                "nodes": hw.network.nodes if hw.network else 1,
                "topology": hw.topology.kind,
                "network_Bps_per_gpu": hw.network.nic_Bps * hw.network.nics_per_node / hw.topology.gpus
                if hw.network
                else None,
                "cus": hw.compute.cus,
                "peak_fp16_flops": hw.compute.peak_flops("fp16")
                if "fp16" in hw.compute.matrix_flops_per_clk_per_cu
                else None,
                "hbm_Bps": hw.hbm.bandwidth_Bps,
                "link_Bps_per_direction": hw.link.bandwidth_Bps,
                "hardware_sha256": hardware_hash(hw),
            }
        )
    if as_json:
        print(json.dumps({"presets": rows, "provenance": run_fields()}, indent=2))
        return
    t = Table(title="hardware presets (use --hw NAME, or --hw path/to/file.toml)")
    for col in ("name", "GPUs", "topology", "CUs", "FP16 peak", "HBM", "link/dir"):
        t.add_column(col)
    for r in rows:
        peak = f"{r['peak_fp16_flops'] / 1e12:.0f} TFLOP/s" if r["peak_fp16_flops"] else "-"
        t.add_row(
            r["name"], str(r["gpus"]) if r["nodes"] == 1 else f"{r['nodes']}x{r['gpus'] // r['nodes']}",
            r["topology"] if r["nodes"] == 1 else f"{r['topology']}+net",
            str(r["cus"]), peak,
            f"{r['hbm_Bps'] / 1e12:.2f} TB/s", f"{r['link_Bps_per_direction'] / 1e9:.0f} GB/s",
        )  # fmt: skip
    c = Console()
    c.print(t)
    for r in rows:
        net = f" ({r['network_Bps_per_gpu'] / 1e9:.0f} GB/s of NIC per GPU)" if r["nodes"] > 1 else ""
        c.print(f"  {r['name']}: {r['description']}{net}")
