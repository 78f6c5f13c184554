"""Numbers quoted in ``README.md`` and ``docs/*.md``, regenerated from the runs that produce them.

    python -m t3.docs                          # rewrite every generated block (live sources rerun)
    python -m t3.docs --check                  # write nothing; exit 1 naming every stale block or record
    python -m t3.docs --record ficco=results/ficco   # re-record from `t3 reproduce ficco`'s output folder
    python -m t3.docs --record-all             # rerun every recorded command (minutes), then rewrite

A generated block sits between ``<!-- t3:begin NAME -->`` and ``<!-- t3:end NAME -->`` (each marker on
its own line) and ends with a line naming the command its numbers come from. Its text is a function
of a source (:mod:`t3.docs.sources`): *live* sources are recomputed each time (the T3 reproduction,
``t3 run`` records, ``t3 validate``, script output: seconds); *recorded* sources take minutes (the FiCCO
reproduction, the selector-ceiling benchmark, the calibration grid, the timing benchmarks), so their
key figures are kept in
``docs/data/<name>.json`` with a fingerprint of the model code and data that produced them, and blocks
render from that record. ``--check`` fails when a block differs from what its source gives now, and
when a record's fingerprint differs from the current code's (the record is stale: rerun its command
and ``--record`` it); ``tests/test_docs_fresh.py`` runs the check and simulates two FiCCO cases of the
record again. Numbers published by the papers are not generated: they stay in the text with their
citation. To add a block: write a render function ``(Context) -> str``, register it in :data:`BLOCKS`
with the command it quotes, and put its markers in a document.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from t3.docs import bench_blocks as rb
from t3.docs import ficco_blocks as fb
from t3.docs import t3_blocks as tb
from t3.docs.markers import MarkerError, replace, spans
from t3.docs.sources import Context, Recorded, write_record
from t3.errors import T3Error

GENERATOR = "python -m t3.docs"


@dataclass(frozen=True)
class Block:
    name: str
    source: str  # the command the numbers come from, as a reader would type it
    render: Callable[[Context], str]
    records: tuple[Recorded, ...] = ()  # recorded sources it reads (none: live)

    def body(self, ctx: Context) -> str:
        rec = "; key figures recorded in " + ", ".join(f"`docs/data/{r.name}.json`" for r in self.records)
        note = f"*Generated from {self.source}{rec if self.records else ''} by `{GENERATOR}`; do not edit by hand.*"
        return self.render(ctx).rstrip("\n") + "\n\n" + note + "\n"


RECORDS: tuple[Recorded, ...] = (
    fb.FICCO,
    fb.CEILING,
    tb.CALIBRATION,
    tb.TODAY,
    rb.RUNTIME_BENCH,
    rb.HANDSHAKE_BENCH,
    rb.SWEEP_BENCH,
)

_T3 = "`t3 reproduce t3`"
_RUN = "`t3 run --model t-nlg --hw paper-80cu --tp TP --sublayer SUB --config CFG --json`"
_COLL = "`PYTHONPATH=src python benchmarks/calibrate_collectives.py`"
_FICCO = "`t3 reproduce ficco`"
_CEIL = "`PYTHONPATH=src python3 benchmarks/ficco_selector_ceiling.py`"
BLOCKS: tuple[Block, ...] = (
    Block("t3-vs-paper", _T3, tb.t3_vs_paper),
    Block("t3-observations", _T3, tb.t3_observations),
    Block("t3-calibrated-parameters", _T3 + " (`t3.experiments.calibration_evidence`)", tb.t3_calibrated_parameters),
    Block("t3-tnlg-sublayers", _RUN, tb.tnlg_sublayers),
    Block("t3-mca-balance", _RUN, tb.t3_mca_balance),
    Block("trace-fixture-projection", f"`t3 trace project {tb.TRACE_FIXTURE} --hw h100-8 --ficco select`",
          tb.trace_fixture_projection),
    Block("validation-targets", "`PYTHONPATH=src python benchmarks/validation_targets.py`", tb.validation_targets),
    Block("validation-tables", "`t3 validate --markdown`", tb.validation_tables),
    Block("interference-mechanisms", "`PYTHONPATH=src python benchmarks/interference_mechanisms.py`",
          tb.interference_mechanisms),
    Block("measured-interference", "`PYTHONPATH=src python benchmarks/measured_interference.py`",
          tb.measured_interference),
    Block("t3-contention-headroom", "`PYTHONPATH=src python benchmarks/t3_contention_headroom.py`",
          tb.t3_contention_headroom),
    Block("calibration-stages", "`PYTHONPATH=src python3 -m t3.experiments.calibration`", tb.calibration_stages_block,
          (tb.CALIBRATION,)),
    Block("collective-calibration-rows", _COLL + " (its rows, at the presets' values)", tb.collective_rows),
    Block("collective-nmc-tail", _COLL, tb.nmc_tail),
    Block("fused-calibration", "`PYTHONPATH=src python benchmarks/calibrate_fused.py`", tb.fused_calibration),
    Block("ficco-selector-claim", f"{_FICCO} and {_CEIL}", fb.selector_claim, (fb.FICCO, fb.CEILING)),
    Block("ficco-selector-accuracy", f"{_FICCO} and {_CEIL}", fb.selector_accuracy_table, (fb.FICCO, fb.CEILING)),
    Block("ficco-selector-misses", _FICCO, fb.selector_misses, (fb.FICCO,)),
    Block("ficco-ceiling", _CEIL, fb.ceiling_table, (fb.CEILING,)),
    Block("ficco-factors", "`src/t3/ficco/pipeline_factors.json` (written by `PYTHONPATH=src python3 "
          "benchmarks/fit_ficco_selector.py factors --write`)", fb.factors_block),
    Block("runtime-bench", "`PYTHONPATH=src python3 benchmarks/bench_runtime.py`", rb.runtime_bench,
          (rb.RUNTIME_BENCH,)),
    Block("handshake-bench", "`PYTHONPATH=src python3 benchmarks/bench_handshake.py`", rb.handshake_bench,
          (rb.HANDSHAKE_BENCH,)),
    Block("sweep-bench", "`PYTHONPATH=src python3 benchmarks/bench_sweep.py`", rb.sweep_bench, (rb.SWEEP_BENCH,)),
    Block("ficco-engine-findings", _FICCO, fb.engine_findings_block, (fb.FICCO,)),
    Block("today-study", "`t3 study`", tb.today_tables, (tb.TODAY,)),
)  # fmt: skip
BY_NAME = {b.name: b for b in BLOCKS}
RECORD_BY_NAME = {r.name: r for r in RECORDS}


class StaleDocs(T3Error):
    """``--check`` found blocks or records that no longer match their source."""

    exit_code = 1


def root_dir() -> Path:
    """The source checkout this package was imported from (``python -m t3.docs`` works only there)."""
    root = Path(__file__).resolve().parents[3]
    if not (root / "README.md").is_file() or not (root / "docs").is_dir():
        raise T3Error(f"python -m t3.docs needs a source checkout (README.md and docs/ next to src/); "
                      f"{root} is not one")  # fmt: skip
    return root


def documents(root: Path) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def _rel(root: Path, p: Path) -> str:
    return str(p.relative_to(root))


def generate(
    root: Path, *, check: bool = False, only: Iterable[str] | None = None, record: dict[str, Path | None] | None = None,
    workers: int | None = None, t3_results: Path | None = None, log: Callable[[str], None] = print,
) -> list[str]:  # fmt: skip
    """Regenerate the blocks (``only``: these names) and the records named in ``record`` (name ->
    output of its command, or None to run it). With ``check``, write nothing and return what is stale;
    otherwise write and return what changed."""
    record = record or {}
    for n in record:
        if n not in RECORD_BY_NAME:
            raise T3Error(f"--record: unknown record '{n}' (known: {', '.join(RECORD_BY_NAME)})")
    names = list(only) if only else [b.name for b in BLOCKS]
    for n in names:
        if n not in BY_NAME:
            raise T3Error(f"--only: unknown block '{n}' (known: {', '.join(BY_NAME)})")
    docs = {p: p.read_text() for p in documents(root)}
    used: dict[str, list[str]] = {}
    for p, text in docs.items():
        for s in spans(text, _rel(root, p)):
            if s.name not in BY_NAME:
                raise MarkerError(
                    f"{_rel(root, p)}:{s.line}: unknown block '{s.name}' (known: {', '.join(BY_NAME)})"
                )
            used.setdefault(s.name, []).append(f"{_rel(root, p)}:{s.line}")
    problems: list[str] = []
    if not only:
        problems += [f"block '{b.name}' is quoted by no document" for b in BLOCKS if b.name not in used]
    ctx = Context(root, workers=workers, t3_results=t3_results)
    for n, given in record.items():
        spec = RECORD_BY_NAME[n]
        log(f"recording {n} from {given if given else 'a fresh run of ' + spec.command} ...")
        rec = ctx.make_record(spec, given)
        old = spec.path(root).read_text() if spec.path(root).is_file() else None
        if check:
            import json

            if old is None or json.loads(old)["data"] != rec["data"]:
                problems.append(f"{_rel(root, spec.path(root))}: differs from the output of {spec.command}")
        else:
            write_record(root, spec, rec)
    if not only or any(BY_NAME[n].records for n in names):
        for spec in RECORDS:
            if spec.name in record:
                continue
            why = ctx.stale_record(spec)
            if why:
                problems.append(f"{_rel(root, spec.path(root))} is stale ({'; '.join(why)}): rerun "
                                f"{spec.command} and `{GENERATOR} --record {spec.name}=OUTPUT`")  # fmt: skip
    bodies = {n: BY_NAME[n].body(ctx) for n in names if n in used}
    changed: list[str] = []
    for p in docs:
        text = p.read_text()  # again: the runs above take minutes, the file may have been edited meanwhile
        new, spans_changed = replace(text, _rel(root, p), bodies)
        for s in spans_changed:
            changed.append(
                f"{_rel(root, p)}:{s.line}: block '{s.name}' " + ("is stale" if check else "rewritten")
            )
        if spans_changed and not check:
            p.write_text(new)
    if check:
        return problems + changed
    for x in problems:
        log(f"warning: {x}")
    return changed


__all__ = ["BLOCKS", "RECORDS", "Block", "StaleDocs", "generate", "root_dir", "documents"]
