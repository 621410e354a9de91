"""Machine files written: :func:`to_toml`, the text that :func:`sweep.inputs.machines.parse_machine`
reads back (a calibrated machine, a baked profile)."""

from __future__ import annotations

import math
import re

from kernels.names import PARAMS
from kernels.params import CHOICE, SWITCH, WHOLE
from sweep.inputs.machines import CORE_CHOICES, OPTIONAL_KEYS, TOP_KEYS, MachineProfile, Posterior


def _toml_value(value) -> str:
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, int):
        return str(value)
    value = float(value)
    for digits in range(1, 18):  # the shortest text that reads back exactly: 7.8e+12, not 7800000000000.0
        text = f"{value:.{digits}g}"
        if float(text) == value:
            return text
    return repr(value)


def _param_value(name: str, value: float) -> str:
    """A parameter as its file writes it: a choice by name, a whole number or switch as an integer."""
    record = PARAMS[name]
    if record.kind == CHOICE:
        return _toml_value(record.choices[int(value)])
    if record.kind in (WHOLE, SWITCH) and value == int(value):
        return _toml_value(int(value))
    return _toml_value(value)


def _toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else _toml_value(key)


def to_toml(profile: MachineProfile, comments: tuple[str, ...] = ()) -> str:
    """A machine file for ``profile`` (its overrides written in), that :func:`parse_machine` reads back.

    ``comments`` become ``#`` lines at the top.
    """
    if profile.overrides:
        profile = profile.baked()
    lines = [f"# {c}".rstrip() for c in comments]
    lines.append(f"name = {_toml_value(profile.name)}")
    if profile.description:
        lines.append(f"description = {_toml_value(profile.description)}")
    if profile.sources:
        lines.append("sources = [" + ", ".join(_toml_value(x) for x in profile.sources) + "]")
    for key in TOP_KEYS:
        lines.append(f"{key} = {_param_value(key, profile.params[key])}")
    for key, default in OPTIONAL_KEYS.items():  # what the file stated, or what differs from the default
        if key in profile.stated or profile.params.get(key, default) != default:
            lines.append(f"{key} = {_param_value(key, profile.params[key])}")
    lines += [f"{key} = {_param_value(key, profile.params[key])}" for key in CORE_CHOICES]
    lines += [
        "",
        "[intra]",
        f"alpha_s = {_toml_value(profile.params['intra_alpha_s'])}",
        f"bandwidth_Bps = {_toml_value(profile.params['intra_bandwidth_Bps'])}",
    ]
    levels = zip(profile.inter_span_nodes, profile.inter_alpha_s, profile.inter_bandwidth_Bps, strict=True)
    for span, alpha, bw in levels:
        lines += ["", "[[inter]]"]
        if math.isfinite(span):
            lines.append(f"span_nodes = {int(span)}")
        lines += [f"alpha_s = {_toml_value(alpha)}", f"bandwidth_Bps = {_toml_value(bw)}"]
    if profile.measured_as or profile.measured_rate_flops:
        lines += [
            "",
            "[measured]               # whose measured per-sample times apply, at what gpu_flops*efficiency",
            f"machine = {_toml_value(profile.measured_key)}",
            f"rate_flops = {_toml_value(profile.ref_rate_flops)}",
        ]
    for strategy, terms in profile.overheads.items():
        if terms:
            lines += ["", f"[overheads.{_toml_key(strategy)}]"]
            lines += [f"{term} = {_toml_value(v)}" for term, v in terms.items()]
    if profile.compute_scale:
        lines += ["", "[compute_scale]          # model = factor on its measured per-sample time"]
        lines += [f"{_toml_key(m)} = {_toml_value(v)}" for m, v in profile.compute_scale.items()]
    if profile.posterior is not None:
        lines += _posterior_lines(profile.posterior)
    return "\n".join(lines) + "\n"


def _posterior_lines(post: Posterior) -> list[str]:
    def numbers(values) -> str:
        return "[" + ", ".join(_toml_value(v) for v in values) + "]"

    return [
        "",
        "[calibration]            # the fit's posterior, for prediction intervals (docs/trust.md)",
        f"structure = {_toml_value(post.structure)}",
        f"cv = {_toml_value(post.cv)}",
        f"cv_accuracy = {_toml_value(post.cv_accuracy)}",
        f"spread_log = {_toml_value(post.spread_log)}",
        "params = [" + ", ".join(_toml_value(n) for n in post.params) + "]",
        f"log_values = {numbers(post.log_values)}",
        f"floors = {numbers(post.floors)}",
        "covariance = [           # 6 significant digits",
        *("  [" + ", ".join(f"{v:.6g}" for v in row) + "]," for row in post.covariance),
        "]",
    ]
