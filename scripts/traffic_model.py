#!/usr/bin/env python3
"""Training traffic per parallelism strategy and for 3D parallelism (models.md section 2).

Source: "AI data-centre network traffic: large-model training" (2025).

Per epoch, P parameters, T tokens, L layers, H hidden size, G GPUs, N
mini-batches, b bytes per value (b = 2, bf16; the table's leading 2):

    strategy  backward bytes        syncs  forward bytes           transfers
    DP        b*N*P*G*(G-1)         1      0                       0
    FSDP      b*N*P*(G-1)           L      b*N*P*(G-1)             L
    TP        2b*N*P*L*(G-1)        2L     2b*L*T*H*(G-1)*G        2*L*T
    PP        b*T*H*(G-1)           G-1    b*T*H*(G-1)             G-1

Every row is built from one unit, the source's full-mesh count of an
All-Reduce (or all-gather) of v values per GPU over g GPUs, where each GPU
sends its v values to the g-1 others: ``mesh_bytes(v, g) = b*v*g*(g-1)``.
DP = N x mesh(P, G); FSDP = N x mesh(P/G, G); TP backward = N x 2L x
mesh(P/G, G); TP forward = 2LT x mesh(H, G); PP = (G-1) boundaries x T x H x b.

3D parallelism (G_tp x G_pp x G_dp GPUs) applies the same unit to each
dimension (the source's own formulas were images and are lost):

    TP gradients:  N x (L*G_dp) x 2 x mesh(P/(G_tp*G_pp), G_tp)
                   = 2b*N*P*L*G_dp*(G_tp-1)/G_pp
    DP gradients:  N x (G_tp*G_pp) x mesh(P/(G_tp*G_pp), G_dp)
                   = b*N*P*G_dp*(G_dp-1)
    PP gradients:  b*T*H*(G_pp-1)        (T tokens shared out over the G_dp replicas)
    TP activations: 2*L*T x mesh(H, G_tp) = 2b*L*T*H*G_tp*(G_tp-1)
    PP activations: b*T*H*(G_pp-1)

Each term reduces to the per-strategy row when the other two degrees are 1.

The script prints the per-strategy table for the Llama3-70B / C4 example next
to the published figures, explains every mismatch (and which reading of N or
of the unit would reproduce it), and the 3D total against the published ~85 EB,
~20 days per epoch and >= 20 switches.

Usage:
    python scripts/traffic_model.py [--json] [--P 70e9 --H 8192 --L 80 --T 156e9
        --samples 364.6e6 --batch 2048 --G 8 --tp 8 --pp 8 --dp 16 ...]

Importable: every formula is a function; ``main(argv=None)`` is the CLI.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from decimal import ROUND_HALF_UP, Decimal

BYTES_PER_VALUE = 2  # bf16
PB = 1e15
EB = 1e18
SECONDS_PER_DAY = 86400

# The published example (models.md section 2).
EXAMPLE = {"P": 70e9, "H": 8192, "L": 80, "T": 156e9, "samples": 364.6e6, "batch": 2048,
           "G": 8}
EXAMPLE_N_PUBLISHED = 178_000  # "about 178,000 mini-batches"
EXAMPLE_3D = {"tp": 8, "pp": 8, "dp": 16, "switch_Bps": 51.2e12, "epochs": 100,
              "days": 100}

STRATEGIES = ("DP", "FSDP", "TP", "PP")
FIELDS = ("backward_bytes", "backward_syncs", "forward_bytes", "forward_transfers")

# Published per-strategy figures: bytes columns in PB as printed (a string keeps the
# printed precision), counts as numbers; None = garbled in the source.
PUBLISHED = {
    "DP": {"backward_bytes": "1396", "backward_syncs": 1, "forward_bytes": "0",
           "forward_transfers": 0},
    "FSDP": {"backward_bytes": "175", "backward_syncs": 80, "forward_bytes": "175",
             "forward_transfers": 80},
    "TP": {"backward_bytes": "26622", "backward_syncs": 160, "forward_bytes": "21840",
           "forward_transfers": None},
    "PP": {"backward_bytes": "17.9", "backward_syncs": 7, "forward_bytes": "17.9",
           "forward_transfers": 7},
}
TP_TRANSFERS_GARBLED = "16015610^9"
PUBLISHED_3D = {"total_EB": 85, "days_per_epoch": 20, "switches": 20}


# --------------------------------------------------------------------------- checks


def _pos(name: str, v: float, allow_zero: bool = False) -> None:
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or (
            v < 0 if allow_zero else v <= 0):
        raise ValueError(f"{name} must be a finite number {'>= 0' if allow_zero else '> 0'}"
                         f", got {v!r}")


def _gpus(name: str, g: int) -> None:
    if isinstance(g, bool) or not isinstance(g, int) or g < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {g!r}")


# --------------------------------------------------------------------------- formulas


def mini_batches(samples: float, batch: int) -> float:
    """Mini-batches per epoch, N = samples / batch (not rounded)."""
    _pos("samples", samples)
    _pos("batch", batch)
    return samples / batch


def mesh_bytes(values: float, g: int, b: int = BYTES_PER_VALUE) -> float:
    """Source's full-mesh All-Reduce count: each of g GPUs sends v values to g-1 others."""
    _pos("values", values, allow_zero=True)
    _gpus("g", g)
    return b * values * g * (g - 1)


def dp_backward_bytes(N: float, P: float, G: int, b: int = BYTES_PER_VALUE) -> float:
    """DP gradient All-Reduce per epoch: b*N*P*G*(G-1)."""
    _pos("N", N, True), _pos("P", P, True), _gpus("G", G)
    return b * N * P * G * (G - 1)


def fsdp_backward_bytes(N: float, P: float, G: int, b: int = BYTES_PER_VALUE) -> float:
    """FSDP gradient sync per epoch: b*N*P*(G-1) (DP / G)."""
    _pos("N", N, True), _pos("P", P, True), _gpus("G", G)
    return b * N * P * (G - 1)


def fsdp_forward_bytes(N: float, P: float, G: int, b: int = BYTES_PER_VALUE) -> float:
    """FSDP parameter all-gather per epoch: b*N*P*(G-1)."""
    return fsdp_backward_bytes(N, P, G, b)


def tp_backward_bytes(N: float, P: float, L: int, G: int, b: int = BYTES_PER_VALUE) -> float:
    """TP gradient All-Reduce per epoch: 2b*N*P*L*(G-1) (the table's 4*N*P*L*(G-1))."""
    _pos("N", N, True), _pos("P", P, True), _gpus("L", L), _gpus("G", G)
    return 2 * b * N * P * L * (G - 1)


def tp_forward_bytes(L: int, T: float, H: int, G: int, b: int = BYTES_PER_VALUE) -> float:
    """TP activation All-Reduce per epoch: 2b*L*T*H*(G-1)*G (the table's 4*L*T*H*(G-1)*G)."""
    _gpus("L", L), _pos("T", T, True), _pos("H", H, True), _gpus("G", G)
    return 2 * b * L * T * H * (G - 1) * G


def pp_bytes(T: float, H: int, G: int, b: int = BYTES_PER_VALUE) -> float:
    """PP point-to-point per epoch, each direction: b*T*H*(G-1)."""
    _pos("T", T, True), _pos("H", H, True), _gpus("G", G)
    return b * T * H * (G - 1)


def strategy_table(P: float, H: int, L: int, T: float, N: float, G: int,
                   b: int = BYTES_PER_VALUE) -> dict[str, dict[str, float]]:
    """The four table rows: bytes per epoch and sync/transfer counts."""
    return {
        "DP": {"backward_bytes": dp_backward_bytes(N, P, G, b), "backward_syncs": 1,
               "forward_bytes": 0.0, "forward_transfers": 0},
        "FSDP": {"backward_bytes": fsdp_backward_bytes(N, P, G, b), "backward_syncs": L,
                 "forward_bytes": fsdp_forward_bytes(N, P, G, b), "forward_transfers": L},
        "TP": {"backward_bytes": tp_backward_bytes(N, P, L, G, b), "backward_syncs": 2 * L,
               "forward_bytes": tp_forward_bytes(L, T, H, G, b),
               "forward_transfers": 2 * L * T},
        "PP": {"backward_bytes": pp_bytes(T, H, G, b), "backward_syncs": G - 1,
               "forward_bytes": pp_bytes(T, H, G, b), "forward_transfers": G - 1},
    }


def threed_terms(P: float, H: int, L: int, T: float, N: float, tp: int, pp: int, dp: int,
                 b: int = BYTES_PER_VALUE, pp_copies: int = 1) -> dict[str, float]:
    """Per-epoch bytes of 3D parallelism (tp x pp x dp GPUs), term by term.

    pp_copies: how many copies of each boundary activation cross a pipeline
    boundary (1: one per token, as the per-strategy PP row; tp: every tensor rank
    sends its replicated copy).
    """
    for name, g in (("tp", tp), ("pp", pp), ("dp", dp), ("pp_copies", pp_copies)):
        _gpus(name, g)
    shard = P / (tp * pp)
    terms = {
        "tp_gradients": N * (L * dp) * 2 * mesh_bytes(shard, tp, b),
        "dp_gradients": N * (tp * pp) * mesh_bytes(shard, dp, b),
        "pp_gradients": pp_bytes(T, H, pp, b) * pp_copies,
        "tp_activations": 2 * L * T * mesh_bytes(H, tp, b),
        "pp_activations": pp_bytes(T, H, pp, b) * pp_copies,
    }
    terms["backward"] = terms["tp_gradients"] + terms["dp_gradients"] + terms["pp_gradients"]
    terms["forward"] = terms["tp_activations"] + terms["pp_activations"]
    terms["total"] = terms["backward"] + terms["forward"]
    return terms


def days_per_epoch(total_bytes: float, rate_Bps: float) -> float:
    """Days to carry one epoch's bytes through one device of rate_Bps bytes/s."""
    _pos("total_bytes", total_bytes, True), _pos("rate", rate_Bps)
    return total_bytes / rate_Bps / SECONDS_PER_DAY


def switches_needed(total_bytes: float, rate_Bps: float, epochs: int, days: float) -> int:
    """Smallest whole number of switches carrying `epochs` epochs within `days` days."""
    _pos("epochs", epochs), _pos("days", days)
    return math.ceil(epochs * days_per_epoch(total_bytes, rate_Bps) / days)


# --------------------------------------------------------------------------- comparison


def round_half_up(x: float, decimals: int) -> Decimal:
    q = Decimal(1).scaleb(-decimals)
    return Decimal(repr(x)).quantize(q, rounding=ROUND_HALF_UP)


def matches(value: float, printed: str) -> bool:
    """True when value rounds (half up) to the printed figure at its printed precision."""
    decimals = len(printed.split(".")[1]) if "." in printed else 0
    return round_half_up(value, decimals) == Decimal(printed)


# Readings tried when a published byte figure does not follow.
UNITS = {"PB (1e15 B)": PB, "MiB/1e9 (2^20 * 1e9 B)": 2**20 * 1e9, "PiB (2^50 B)": 2**50}


def n_readings(samples: float, batch: int) -> dict[str, float]:
    q = samples / batch
    return {f"N = {EXAMPLE_N_PUBLISHED:,} (published, rounded)": float(EXAMPLE_N_PUBLISHED),
            f"N = samples/batch = {q:,.2f}": q,
            f"N = ceil(samples/batch) = {math.ceil(q):,}": float(math.ceil(q))}


def readings_for(strategy: str, field: str, printed: str, ex: dict) -> list[str]:
    """Readings (N choice x unit x factor of G) that reproduce a published byte figure."""
    found = []
    g = ex["G"]
    for n_name, N in n_readings(ex["samples"], ex["batch"]).items():
        row = strategy_table(ex["P"], ex["H"], ex["L"], ex["T"], N, g)[strategy]
        for u_name, unit in UNITS.items():
            for f_name, factor in (("", 1), (" x G", g), (" / G", 1 / g)):
                if matches(row[field] * factor / unit, printed):
                    found.append(f"{n_name}, unit {u_name}{f_name}")
    return found


EXPLANATIONS = {
    ("FSDP", "backward_bytes"):
        "formula gives b*N*P*(G-1) = 174.44-174.47 PB for any reading of N, which rounds to "
        "174. 175 is the published DP figure divided by G: 1396 / 8 = 174.5, rounded half "
        "up (the text says FSDP traffic is 1/G of DP). No reading of N or the unit gives 175.",
    ("FSDP", "forward_bytes"):
        "same as FSDP backward: 175 = 1396 / 8 rounded half up; the formula gives 174.44-174.47.",
    ("TP", "backward_bytes"):
        "formula gives 27,915 PB (decimal). 26,622 needs the bytes divided by 2^20 * 1e9 "
        "(MiB, then /1e9 as if MB -> PB) instead of 1e15, and N = samples/batch exactly "
        "(178,027.3; N = 178,000 gives 26,617). DP, FSDP and PP use decimal PB, so the "
        "source mixed units between rows.",
    ("TP", "forward_bytes"):
        "formula gives 22,901 PB (decimal). 21,840 is the same bytes divided by 2^20 * 1e9 "
        "(21,840.0): the unit slip of the TP backward figure, independent of N.",
}


def compare_published(ex: dict | None = None) -> list[dict]:
    """Every published per-strategy figure against the formula, with verdict and reason."""
    ex = dict(EXAMPLE if ex is None else ex)
    N = mini_batches(ex["samples"], ex["batch"])
    table = strategy_table(ex["P"], ex["H"], ex["L"], ex["T"], N, ex["G"])
    out = []
    for s in STRATEGIES:
        for field in FIELDS:
            value = table[s][field]
            pub = PUBLISHED[s][field]
            entry = {"strategy": s, "field": field, "formula_value": value, "published": pub}
            if field.endswith("bytes"):
                entry["formula_PB"] = value / PB
                if matches(value / PB, pub):
                    entry.update(status="follows", reason="formula rounds to the published "
                                 "figure (N = samples/batch, PB = 1e15 B)")
                else:
                    entry.update(status="mismatch", reason=EXPLANATIONS[(s, field)],
                                 readings_that_reproduce=readings_for(s, field, pub, ex))
            elif pub is None:
                entry.update(
                    status="garbled",
                    published=TP_TRANSFERS_GARBLED,
                    reason=f"printed as '{TP_TRANSFERS_GARBLED}'; the formula 2*L*T gives "
                           f"{value:.4g} = 160 x 156 x 10^9, so the print is '160', '156', "
                           "'10^9' with the multiplication signs lost.")
            elif value == pub:
                entry.update(status="follows", reason="equal to the formula")
            else:
                entry.update(status="mismatch", reason="count differs from the formula")
            out.append(entry)
    return out


def compare_3d(ex: dict | None = None, ex3: dict | None = None,
               pp_copies: int = 1) -> dict:
    """3D total, days per epoch and switch count against the published figures."""
    ex = dict(EXAMPLE if ex is None else ex)
    ex3 = dict(EXAMPLE_3D if ex3 is None else ex3)
    N = mini_batches(ex["samples"], ex["batch"])
    terms = threed_terms(ex["P"], ex["H"], ex["L"], ex["T"], N, ex3["tp"], ex3["pp"],
                         ex3["dp"], pp_copies=pp_copies)
    days = days_per_epoch(terms["total"], ex3["switch_Bps"])
    sw = switches_needed(terms["total"], ex3["switch_Bps"], ex3["epochs"], ex3["days"])
    bits_rate = ex3["switch_Bps"] / 8
    return {
        "gpus": ex3["tp"] * ex3["pp"] * ex3["dp"],
        "terms_bytes": terms,
        "total_EB": terms["total"] / EB,
        "days_per_epoch": days,
        "switches": sw,
        "published": PUBLISHED_3D,
        "checks": [
            {"figure": "total per epoch, about 85 EB",
             "status": "follows" if round(terms["total"] / EB) == 85 else "mismatch",
             "reason": f"derived total {terms['total'] / EB:.2f} EB rounds to "
                       f"{round(terms['total'] / EB)} EB (decimal EB = 1e18 B). The source "
                       "prints '85 x 10^9 bytes (EB)': 85e9 B would be 85 GB; only "
                       "85e18 B is consistent with its 20 days."},
            {"figure": "about 20 days per epoch at 51.2e12 B/s",
             "status": "follows-approx",
             "reason": f"{days:.2f} days from the derived total (85 EB gives "
                       f"{85 * EB / ex3['switch_Bps'] / SECONDS_PER_DAY:.2f}); 'about 20' "
                       "is this rounded up, not to the nearest day (19)."},
            {"figure": ">= 20 switches for 100 epochs in 100 days",
             "status": "follows" if sw == PUBLISHED_3D["switches"] else "mismatch",
             "reason": f"ceil(100 x {days:.2f} / 100) = {sw}."},
            {"figure": "51.2T switch counted as 51.2e12 bytes/s",
             "status": "unit-caveat",
             "reason": "a 51.2T switch (64 x 800G) carries 51.2e12 bits/s = "
                       f"{bits_rate / 1e12:.1f}e12 B/s. With that rate one epoch takes "
                       f"{days_per_epoch(terms['total'], bits_rate):.0f} days and 100 epochs "
                       "in 100 days need "
                       f"{switches_needed(terms['total'], bits_rate, 100, 100)} switches. "
                       "The published figures follow only from the byte reading."},
        ],
    }


# --------------------------------------------------------------------------- CLI


def _fmt_count(v) -> str:
    if v is None:
        return "garbled"
    if isinstance(v, float) and v >= 1e6:
        return f"{v:.4g}"
    return f"{v:,.0f}" if isinstance(v, float) else str(v)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description="Training traffic per parallelism strategy and 3D (models.md s.2).")

    def pos_float(text):
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not math.isfinite(v) or v <= 0:
            raise argparse.ArgumentTypeError(f"must be finite and > 0: {text!r}")
        return v

    def pos_int(text):
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if v < 1:
            raise argparse.ArgumentTypeError(f"must be >= 1: {text!r}")
        return v

    e, e3 = EXAMPLE, EXAMPLE_3D
    p.add_argument("--P", type=pos_float, default=e["P"], help="parameters (%(default)g)")
    p.add_argument("--H", type=pos_int, default=e["H"], help="hidden size (%(default)s)")
    p.add_argument("--L", type=pos_int, default=e["L"], help="layers (%(default)s)")
    p.add_argument("--T", type=pos_float, default=e["T"], help="tokens (%(default)g)")
    p.add_argument("--samples", type=pos_float, default=e["samples"],
                   help="samples per epoch (%(default)g)")
    p.add_argument("--batch", type=pos_int, default=e["batch"], help="batch (%(default)s)")
    p.add_argument("--N", type=pos_float, default=None,
                   help="mini-batches per epoch (default: samples / batch)")
    p.add_argument("--G", type=pos_int, default=e["G"], help="GPUs per strategy (%(default)s)")
    p.add_argument("--tp", type=pos_int, default=e3["tp"], help="3D tensor degree")
    p.add_argument("--pp", type=pos_int, default=e3["pp"], help="3D pipeline degree")
    p.add_argument("--dp", type=pos_int, default=e3["dp"], help="3D data degree")
    p.add_argument("--pp-copies", type=pos_int, default=1,
                   help="copies of a boundary activation per pipeline hop (1; tp = each "
                        "tensor rank sends its own)")
    p.add_argument("--switch-rate", type=pos_float, default=e3["switch_Bps"],
                   help="switch capacity in bytes/s (%(default)g, as the source counts it)")
    p.add_argument("--epochs", type=pos_int, default=e3["epochs"])
    p.add_argument("--days", type=pos_float, default=e3["days"])
    p.add_argument("--json", action="store_true", help="print JSON to stdout")
    return p


def main(argv=None) -> int:
    a = build_parser().parse_args(argv)
    ex = {"P": a.P, "H": a.H, "L": a.L, "T": a.T, "samples": a.samples, "batch": a.batch,
          "G": a.G}
    ex3 = {"tp": a.tp, "pp": a.pp, "dp": a.dp, "switch_Bps": a.switch_rate,
           "epochs": a.epochs, "days": a.days}
    N = a.N if a.N is not None else mini_batches(a.samples, a.batch)
    table = strategy_table(a.P, a.H, a.L, a.T, N, a.G)
    terms = threed_terms(a.P, a.H, a.L, a.T, N, a.tp, a.pp, a.dp, pp_copies=a.pp_copies)
    days = days_per_epoch(terms["total"], a.switch_rate)
    sw = switches_needed(terms["total"], a.switch_rate, a.epochs, a.days)
    is_example = ex == EXAMPLE and ex3 == EXAMPLE_3D and a.N is None
    cmp = compare_published() if is_example else None
    cmp3 = compare_3d(pp_copies=a.pp_copies) if is_example else None

    if a.json:
        json.dump({"params": {**ex, "N": N, **ex3, "pp_copies": a.pp_copies,
                              "bytes_per_value": BYTES_PER_VALUE},
                   "strategies": table,
                   "threed": {"terms_bytes": terms, "total_EB": terms["total"] / EB,
                              "days_per_epoch": days, "switches": sw},
                   "published_comparison": cmp, "published_3d_comparison": cmp3},
                  sys.stdout, indent=2)
        print()
        return 0

    print(f"Training traffic per epoch: P = {a.P:g}, H = {a.H}, L = {a.L}, T = {a.T:g}, "
          f"N = {N:,.2f}, G = {a.G}, {BYTES_PER_VALUE} B per value")
    pub = PUBLISHED if is_example else None
    hdr = (f"{'':5} {'backward PB':>12} {'(pub)':>7} {'syncs':>6} {'(pub)':>6} "
           f"{'forward PB':>11} {'(pub)':>7} {'transfers':>10} {'(pub)':>10}")
    print(hdr)
    print("-" * len(hdr))
    flags = {(c["strategy"], c["field"]): c["status"] for c in cmp} if cmp else {}
    for s in STRATEGIES:
        r = table[s]
        q = pub[s] if pub else dict.fromkeys(FIELDS, "-")

        def mark(field, s=s):
            st = flags.get((s, field))
            return "" if st in (None, "follows") else ("*" if st == "mismatch" else "?")

        print(f"{s:5} {r['backward_bytes'] / PB:>11.2f}{mark('backward_bytes'):1} "
              f"{q['backward_bytes']:>7} {_fmt_count(r['backward_syncs']):>6} "
              f"{_fmt_count(q['backward_syncs']):>6} "
              f"{r['forward_bytes'] / PB:>10.2f}{mark('forward_bytes'):1} "
              f"{q['forward_bytes']:>7} {_fmt_count(r['forward_transfers']):>10}"
              f"{mark('forward_transfers'):1}{_fmt_count(q['forward_transfers']):>10}")
    if cmp:
        print("  * published figure does not follow from its formula; ? garbled in the source")
        print("\nMismatches and garbled figures:")
        for c in cmp:
            if c["status"] == "follows":
                continue
            print(f"- {c['strategy']} {c['field']}: published {c['published']}, formula "
                  + (f"{c['formula_PB']:.2f} PB" if "formula_PB" in c
                     else f"{c['formula_value']:.4g}"))
            print(f"    {c['reason']}")
            for rd in c.get("readings_that_reproduce", []):
                print(f"    reproduces with: {rd}")
            if "readings_that_reproduce" in c and not c["readings_that_reproduce"]:
                print("    reproduces with: no reading of N, unit or factor of G tried")
        n_ok = sum(c["status"] == "follows" for c in cmp)
        print(f"\n{n_ok} of {len(cmp)} published table entries follow from the formulas.")
    else:
        print("(parameters differ from the published example: no comparison)")

    print(f"\n3D parallelism: TP x PP x DP = {a.tp} x {a.pp} x {a.dp} = "
          f"{a.tp * a.pp * a.dp} GPUs, parameter shard P/(tp*pp) = {a.P / (a.tp * a.pp):.4g}")
    print("  derivation (mesh(v, g) = b*v*g*(g-1), the per-strategy table's unit):")
    lines = [
        ("tp_gradients", "N * (L*dp) * 2 * mesh(P/(tp*pp), tp) = 2b*N*P*L*dp*(tp-1)/pp"),
        ("dp_gradients", "N * (tp*pp) * mesh(P/(tp*pp), dp) = b*N*P*dp*(dp-1)"),
        ("pp_gradients", "b*T*H*(pp-1) * pp_copies"),
        ("tp_activations", "2*L*T * mesh(H, tp) = 2b*L*T*H*tp*(tp-1)"),
        ("pp_activations", "b*T*H*(pp-1) * pp_copies"),
    ]
    for key, text in lines:
        print(f"  {key:15} {terms[key] / EB:9.3f} EB   {text}")
    print(f"  {'total':15} {terms['total'] / EB:9.3f} EB   (backward "
          f"{terms['backward'] / EB:.3f} + forward {terms['forward'] / EB:.3f})")
    print(f"  one epoch through one switch at {a.switch_rate:g} B/s: {days:.2f} days; "
          f"{a.epochs} epochs in {a.days:g} days need >= {sw} switches")
    if cmp3:
        print("  against the published figures (~85 EB, ~20 days, >= 20 switches):")
        for c in cmp3["checks"]:
            print(f"  - [{c['status']}] {c['figure']}: {c['reason']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
