"""Networks: the layer list, ParaDL ``.net``/``.lc`` import, model TOML files (docs/inputs.md).

A :class:`Model` is a plain list of :class:`Layer` shapes plus the data set
size and measured per-sample times keyed by machine name. :func:`bind` turns
it into the kernels' :class:`~kernels.Net` for one machine. Built-in models are
generated from their architecture in :mod:`sweep.inputs.architectures`.
"""

from __future__ import annotations

import math
import re
import tomllib
import warnings
from pathlib import Path

from kernels import ACTIVE_FAMILIES, KINDS, kinds
from kernels.kinds import check_shapes
from sweep.errors import InputError, where
from sweep.inputs import architectures, blocks, presets, transformers
from sweep.inputs.layers import Layer, Model

#: ParaDL ``.net`` NAME prefixes to layer kinds (docs/inputs.md#paradl-net-and-lc-files), longest first.
NET_PREFIXES: tuple[tuple[str, str], ...] = (
    ("DROPOUT", "dropout"),
    ("MPOOL", "pool_max"),
    ("APOOL", "pool_avg"),
    ("BNORM", "bnorm"),
    ("CONV", "conv"),
    ("RELU", "relu"),
    ("ADD", "add"),
    ("FC", "fc"),
)
#: The machine ParaDL's profiled ``.net`` times were measured on.
PARADL_MACHINE = "abci"
#: Shape typos of ParaDL's own files, as (file name, layer name, input shape as written): a
#: warning, not an error, so the files read as published (COSMOFLOW.net_256 line 8 has 2128
#: for 128 in the input of a RELU; the layer's output and weights say 128).
KNOWN_TYPOS: frozenset[tuple[str, str, tuple[int, ...]]] = frozenset(
    {("COSMOFLOW.net_256", "RELU", (32, 2128, 128, 128))}
)


def _shape(dims: tuple[int, ...]) -> str:
    return "x".join(map(str, dims))


def check_chain(layers: list[Layer], places: list[str], known: str = "") -> None:
    """An :class:`InputError` naming both layers where shapes do not chain.

    A layer reads the previous layer's output: the same number of elements
    (so a flatten into ``fc`` chains), or, for a residual branch such as a
    projection shortcut, the output of an earlier layer of the same shape.
    An ``add`` layer joins two branches and the first layer reads the data,
    so neither is checked. ``places[i]`` locates layer ``i`` (``file:line``);
    a mismatch listed in :data:`KNOWN_TYPOS` for file name ``known`` is a warning.
    """
    seen = {layers[0].x, layers[0].y} if layers else set()
    for i in range(1, len(layers)):
        prev, cur = layers[i - 1], layers[i]
        seen.add(prev.y)
        if cur.kind == "add" or math.prod(cur.x) == math.prod(prev.y) or cur.x in seen:
            continue
        message = (
            f"input of layer '{cur.name}' {_shape(cur.x)} is not the output of the layer before it, "
            f"'{prev.name}' {_shape(prev.y)}, nor of any earlier layer"
        )
        if (known, cur.name, cur.x) in KNOWN_TYPOS:
            warnings.warn(f"{places[i]}: {message} (a known typo of ParaDL's file)", stacklevel=3)
            continue
        raise InputError(message, places[i])


def _dims(text: str, path, line: int, what: str) -> tuple[int, ...]:
    parts = text.strip().split("x")
    try:
        dims = tuple(int(p) for p in parts)
    except ValueError:
        raise InputError(
            f"{what} '{text.strip()}' is not a list of integers like 64x56x56", where(path, line)
        ) from None
    if any(d < 0 for d in dims):
        raise InputError(f"{what} '{text.strip()}' has a negative dimension", where(path, line))
    return dims


def _kind_of(name: str, path, line: int) -> str:
    upper = name.upper()
    for prefix, kind in NET_PREFIXES:
        if upper.startswith(prefix):
            return kind
    known = ", ".join(p for p, _ in NET_PREFIXES)
    raise InputError(f"layer name '{name}' has no known kind prefix ({known})", where(path, line))


def _check_layer(layer: Layer, path, line: int) -> None:
    """Structural checks shared by ``.net`` and TOML layers."""
    spatial = len(layer.x) - 1
    if not 1 <= spatial <= 3:
        raise InputError(f"input shape of '{layer.name}' needs 1 to 3 spatial extents", where(path, line))
    # an attention layer may state its query/key width and window: w [0, a, 1, d_qk, W]
    # (docs/model.md §18) whatever its x's rank
    latent = layer.kind == "attention" and len(layer.w) == 5
    if len(layer.y) != len(layer.x) or (len(layer.w) != len(layer.x) + 1 and not latent):
        raise InputError(
            f"layer '{layer.name}' shapes disagree in rank: x has {len(layer.x)} dims, "
            f"w {len(layer.w)} (expected {len(layer.x) + 1}), y {len(layer.y)}",
            where(path, line),
        )
    if min(layer.x) < 1 or min(layer.y) < 1:
        raise InputError(f"layer '{layer.name}' has a zero extent in x or y", where(path, line))


def _check_kind(layer: Layer) -> None:
    """The layer's shapes against its kind's rule (:func:`kernels.kinds.check_shapes`,
    docs/inputs.md#model-files): an element-wise layer's y equals its x, an attention's input is
    ``[3h, s]`` for its output ``[h, s]`` (or Q, K and V at their widths) and its heads divide h, a linear's weights are
    ``[x[0], y[0], 1...]`` or all zero (tied), an embedding's input is ``[1, s]``; and its
    ``role``, when it states one, is one its kind can take."""
    broken = check_shapes(layer.kind, layer.x, layer.w, layer.y)
    if broken:
        raise InputError(f"{layer.kind} layer '{layer.name}' {broken}")
    if layer.role and layer.role not in kinds.BY_NAME[layer.kind].roles:
        legal = ", ".join(kinds.BY_NAME[layer.kind].roles)
        raise InputError(
            f"{layer.kind} layer '{layer.name}' cannot have role '{layer.role}' (one of {legal})"
        )


def _read_text(path: Path, what: str) -> str:
    """A text file as UTF-8 (a byte-order mark, as some Windows editors write, is skipped)."""
    try:
        return path.read_text(encoding="utf-8-sig")
    except OSError as err:
        raise InputError(f"cannot read {what}: {err.strerror}", str(path)) from None
    except UnicodeDecodeError as err:
        raise InputError(f"cannot read {what}: not UTF-8 text (byte {err.start})", str(path)) from None


def parse_net(path: str | Path) -> Model:
    """Read a ParaDL ``.net`` or ``.net_sc`` file (docs/inputs.md#paradl-net-and-lc-files), every layer active.

    Shapes must chain (:func:`check_chain`); the one known typo of a shipped
    ParaDL file (:data:`KNOWN_TYPOS`) draws a warning instead of an error.
    """
    path = Path(path)
    text = _read_text(path, "model file")
    dataset, dataset_samples, name = "", None, path.stem
    layers: list[Layer] = []
    lines: list[int] = []
    measured = 0.0
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue
        fields = [f.strip() for f in stripped.split("|")]
        head = fields[0]
        if head == "Dataset":
            dataset = fields[1] if len(fields) > 1 else ""
            continue
        if head == "Input":
            if len(fields) != 2:
                raise InputError("expected 'Input|DxCxHxW'", where(path, number))
            dims = _dims(fields[1], path, number, "input")
            if len(dims) < 3 or dims[0] < 1:
                raise InputError("expected 'Input|DxCxHxW[xD]' with D >= 1 samples", where(path, number))
            dataset_samples = dims[0]
            continue
        if head == "Model":
            name = fields[1] if len(fields) > 1 else name
            continue
        if len(fields) not in (4, 5):
            raise InputError(
                f"expected 4 or 5 '|'-separated fields (NAME|x|w|y[|time]), got {len(fields)}",
                where(path, number),
            )
        kind = _kind_of(head, path, number)
        layer = Layer(
            name=head,
            kind=kind,
            x=_dims(fields[1], path, number, "input shape"),
            w=_dims(fields[2], path, number, "weight shape"),
            y=_dims(fields[3], path, number, "output shape"),
        )
        _check_layer(layer, path, number)
        try:
            if (path.name, layer.name, layer.x) not in KNOWN_TYPOS:  # the chain check warns of it
                _check_kind(layer)
        except InputError as err:
            raise InputError(str(err), where(path, number)) from None
        if len(fields) == 5 and fields[4]:
            try:
                t = float(fields[4])
            except ValueError:
                raise InputError(
                    f"measured time '{fields[4]}' is not a number", where(path, number)
                ) from None
            if t < 0 or not math.isfinite(t):
                raise InputError(f"measured time '{fields[4]}' must be >= 0", where(path, number))
            if not layers and t > 0:
                measured = t
        layers.append(layer)
        lines.append(number)
    if dataset_samples is None:
        raise InputError("no 'Input|DxCxHxW' line: the data set size is unknown", str(path))
    if not layers:
        raise InputError("no layers", str(path))
    check_chain(layers, [where(path, number) for number in lines], known=path.name)
    all_active = {family: True for family in ACTIVE_FAMILIES}
    return Model(
        name=name,
        dataset_samples=dataset_samples,
        dataset=dataset,
        layers=[Layer(lay.name, lay.kind, lay.x, lay.w, lay.y, dict(all_active)) for lay in layers],
        measured_s={PARADL_MACHINE: measured} if measured > 0 else {},
        source=str(path),
    )


def apply_lc(model: Model, path: str | Path) -> Model:
    """Apply a ParaDL ``.lc`` file: one line per layer, ``[index] NAME |flag`` (docs/model.md §9, docs/inputs.md#paradl-net-and-lc-files).

    The flags replace the active sets of every strategy family. The line
    count and names must match the model's layers.
    """
    path = Path(path)
    text = _read_text(path, "layer-config file")
    entries = [(n, raw.strip()) for n, raw in enumerate(text.splitlines(), start=1) if raw.strip()]
    if len(entries) != len(model.layers):
        raise InputError(
            f"has {len(entries)} layer lines but model '{model.name}' has {len(model.layers)} layers",
            str(path),
        )
    layers = []
    for (number, line), layer in zip(entries, model.layers, strict=True):
        left, sep, flag = line.rpartition("|")
        if not sep or flag.strip() not in ("0", "1"):
            raise InputError("expected '[index] NAME |0' or '|1'", where(path, number))
        name = left.split()[-1] if left.split() else ""
        if name != layer.name:
            raise InputError(
                f"layer name '{name}' does not match the model's '{layer.name}'", where(path, number)
            )
        on = flag.strip() == "1"
        layers.append(
            Layer(layer.name, layer.kind, layer.x, layer.w, layer.y, dict.fromkeys(ACTIVE_FAMILIES, on))
        )
    return Model(
        name=model.name,
        dataset_samples=model.dataset_samples,
        layers=layers,
        dataset=model.dataset,
        measured_s=dict(model.measured_s),
        source=f"{model.source} + {path}",
    )


def _toml_dims(value, path, key: str) -> tuple[int, ...]:
    if (
        not isinstance(value, list)
        or not value
        or not all(isinstance(v, int) and not isinstance(v, bool) for v in value)
    ):
        raise InputError("must be a non-empty list of integers", where(path, key=key))
    if any(v < 0 for v in value):
        raise InputError("has a negative dimension", where(path, key=key))
    return tuple(value)


def _toml_role(value, path, key: str) -> str:
    """A layer's ``role`` key: one of :data:`kernels.kinds.ROLES`, or absent (derived)."""
    if value != "" and value not in kinds.ROLES:
        raise InputError(f"role must be one of {', '.join(kinds.ROLES)}", where(path, key=key))
    return str(value)


def load_model_toml(path: str | Path) -> Model:
    """Read a model TOML file (format in docs/inputs.md#model-files)."""
    path = Path(path)
    doc = read_toml(path)
    if "transformer" in doc:  # a transformer stated as data (docs/inputs.md#transformer-models)
        return blocks.load_toml(doc, path)
    head = doc.get("model")
    if not isinstance(head, dict):
        raise InputError("missing [model] table", str(path))
    unknown = set(head) - {"name", "dataset", "dataset_samples", "input", "measured_s", "source", "notes"}
    if unknown:
        raise InputError("unknown key", where(path, key=f"model.{sorted(unknown)[0]}"))
    samples = head.get("dataset_samples")
    if not isinstance(samples, int) or isinstance(samples, bool) or samples < 1:
        raise InputError("must be an integer >= 1", where(path, key="model.dataset_samples"))
    measured = head.get("measured_s", {})
    if not isinstance(measured, dict):
        raise InputError(
            "must be a table of machine = seconds per sample", where(path, key="model.measured_s")
        )
    for machine, t in measured.items():
        if not isinstance(t, int | float) or isinstance(t, bool) or not t > 0:
            raise InputError("must be a number > 0", where(path, key=f"model.measured_s.{machine}"))
    raw_layers = doc.get("layer")
    if not isinstance(raw_layers, list) or not raw_layers:
        raise InputError("no [[layer]] tables", str(path))
    layers = []
    for i, raw in enumerate(raw_layers):
        key = f"layer[{i}]"
        unknown = set(raw) - {"name", "kind", "x", "w", "y", "active", "role"}
        if unknown:
            raise InputError("unknown key", where(path, key=f"{key}.{sorted(unknown)[0]}"))
        kind = raw.get("kind")
        if kind not in KINDS:
            raise InputError(f"kind must be one of {', '.join(KINDS)}", where(path, key=f"{key}.kind"))
        active = raw.get("active", {})
        if isinstance(active, bool):
            active = dict.fromkeys(ACTIVE_FAMILIES, active)
        if not isinstance(active, dict) or any(
            k not in ACTIVE_FAMILIES or not isinstance(v, bool) for k, v in active.items()
        ):
            raise InputError(
                f"must be true/false or a table of {', '.join(ACTIVE_FAMILIES)} = true/false",
                where(path, key=f"{key}.active"),
            )
        layer = Layer(
            name=str(raw.get("name", f"{kind}{i}")),
            kind=kind,
            x=_toml_dims(raw.get("x"), path, f"{key}.x"),
            w=_toml_dims(raw.get("w"), path, f"{key}.w"),
            y=_toml_dims(raw.get("y"), path, f"{key}.y"),
            active=active,
            role=_toml_role(raw.get("role", ""), path, f"{key}.role"),
        )
        try:
            _check_layer(layer, "", 0)
            _check_kind(layer)
        except InputError as err:
            raise InputError(str(err).split(": ", 1)[-1], where(path, key=key)) from None
        layers.append(layer)
    check_chain(layers, _layer_places(path, len(layers)))
    return Model(
        name=str(head.get("name", path.stem)),
        dataset_samples=samples,
        dataset=str(head.get("dataset", "")),
        layers=layers,
        measured_s={k: float(v) for k, v in measured.items()},
        source=str(head.get("source", path)),
        notes=str(head.get("notes", "")),
    )


def _layer_places(path: Path, count: int) -> list[str]:
    """``file:line: key 'layer[i]'`` of each ``[[layer]]`` table of a TOML model file."""
    text = path.read_bytes().decode("utf-8-sig")
    heads = [
        n for n, raw in enumerate(text.splitlines(), start=1) if re.match(r"\s*\[\[\s*layer\s*\]\]", raw)
    ]
    if len(heads) != count:  # tables written inline: the key alone
        return [where(path, key=f"layer[{i}]") for i in range(count)]
    return [where(path, line, key=f"layer[{i}]") for i, line in enumerate(heads)]


def read_toml(path: Path) -> dict:
    """Parse a TOML file; a missing file or bad syntax is an :class:`InputError` with the line."""
    try:
        return tomllib.loads(path.read_bytes().decode("utf-8-sig"))  # a byte-order mark is skipped
    except FileNotFoundError:
        raise InputError("no such file", str(path)) from None
    except OSError as err:
        raise InputError(f"cannot read: {err.strerror}", str(path)) from None
    except UnicodeDecodeError as err:
        raise InputError(f"cannot read: not UTF-8 text (byte {err.start})", str(path)) from None
    except tomllib.TOMLDecodeError as err:
        line = getattr(err, "lineno", None)
        msg = getattr(err, "msg", str(err))
        found = re.search(r"\(at line (\d+), column \d+\)", msg)
        if line is None and found:  # Python 3.11 puts the position in the text only
            line = int(found.group(1))
            msg = msg[: found.start()].strip()
        raise InputError(f"malformed TOML: {msg}", where(path, line)) from None


def load_model(spec: str | Path, lc: str | Path | None = None, base: Path | None = None) -> Model:
    """A built-in model by name, or a ``.toml``, ``.net`` or ``.net_sc`` path (with an optional ``.lc``)."""

    text = str(spec)
    if text in architectures.BUILTIN:
        model = architectures.BUILTIN[text]()
    elif transformers.is_gpt(text):
        model = transformers.load_gpt(text)
    elif presets.is_preset(text):
        model = presets.load_preset(text)
    else:
        path = Path(text)
        if base is not None and not path.is_absolute():
            path = base / path
        if path.suffix == ".toml":
            model = load_model_toml(path)
        elif path.suffix.startswith(".net"):  # .net, .net_sc, and variants like .net_256
            model = parse_net(path)
        else:
            names = ", ".join((*architectures.BUILTIN, *transformers.GPT3, *presets.PRESETS))
            raise InputError(
                f"unknown model '{text}': not a built-in ({names}), a GPT name "
                "(gpt-l<layers>-h<hidden>-a<heads>-s<sequence>[-v<vocab>]) nor a .toml/.net/.net_sc file"
            )
    if lc is not None:
        lc_path = Path(lc)
        if base is not None and not lc_path.is_absolute():
            lc_path = base / lc_path
        model = apply_lc(model, lc_path)
    return model
