"""The cache's file format: values stored as data that ``torch.load(weights_only=True)`` reads,
so loading an entry (one's own, or one from a bundle made by someone else) never runs code.

:func:`dumps` encodes a value tree into what the weights-only unpickler accepts (dicts, lists,
str, int, float, bool, None and tensors) and :func:`loads` decodes it. Every container and every
non-primitive is a tagged node (a dict whose ``"t"`` names its kind), so nothing is ambiguous:

- tensors as they are; ``list``, ``tuple``, ``dict`` (also ``OrderedDict``), ``set``,
  ``frozenset``, ``bytes``, ``pathlib`` paths and ``torch`` dtypes as nodes;
- numpy arrays and scalars of fixed-size dtypes as their raw bytes (a uint8 tensor), dtype and
  shape; object arrays element by element;
- pandas ``DataFrame``, ``Series`` and their indexes (range, plain, multi) as columns of such
  arrays with their dtypes (numpy, pandas strings, categoricals) and names, so a round trip is
  equal under ``pandas.testing.assert_frame_equal``;
- dataclasses defined in a ``mechbook`` module, field by field, and the few plain ``mechbook``
  classes of :data:`STATEFUL` (the Part I tokenizers), from their instance state.

A class is named by ``module:qualname``; decoding imports only ``mechbook.`` modules, takes the
name only when it is the class defined there under that name, and rebuilds it without calling its
constructor (fields set on a bare instance, as pickle does). Anything else fails to *encode*
with :class:`UnsafeValue` naming where it sits in the tree; a file that is not this format
(a pickle of arbitrary objects, an entry of an older mechbook) fails to *decode* with
:class:`NotSafeFormat`. :mod:`mechbook.cache` stores every entry, bundle entry and resume state so.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import importlib
import io
import math
import pathlib
import re
from typing import Any

import numpy as np
import pandas as pd
import torch

FORMAT = "mechbook-safe/1"
"""The format marker at the top of every file :func:`dumps` writes."""

STATEFUL: frozenset[str] = frozenset(
    {
        "mechbook.leading_terms.tokenize:NaturalTokenizer",
        "mechbook.leading_terms.tokenize:BPETokenizer",
        "mechbook.leading_terms.tokenize:CasedBPETokenizer",
    }
)
"""The ``mechbook`` classes that are not dataclasses but are cached (chapter 1-5's corpora and
chapter 6's miniature run hold a tokenizer): stored as their ``__getstate__`` (plain data) and
restored by their own ``__setstate__``, or into the instance dict when they define none."""

_PRIMITIVES = (str, int, float, bool, type(None))
_NUMPY_KINDS = "biufcmMSU"  # bool, int, uint, float, complex, datetime, timedelta, bytes, str
_PATHS = {cls.__name__: cls for cls in (pathlib.PurePosixPath, pathlib.PureWindowsPath, pathlib.Path)}
_PATHS |= {type(pathlib.Path()).__name__: pathlib.Path}
_PART = r"(?!__)[A-Za-z_][A-Za-z0-9_]*"  # an identifier, no dunder (no mechbook.__main__, no __class__)
_NAME = re.compile(rf"mechbook(\.{_PART})+:{_PART}(\.{_PART})*")
_TORCH_DTYPES = {str(d).removeprefix("torch."): d for d in vars(torch).values() if isinstance(d, torch.dtype)}


class UnsafeValue(TypeError):
    """A value the safe format cannot store; the message names it and where it is in the tree."""

    def __init__(self, what: str, where: str = "") -> None:
        self.what, self.where = what, where
        super().__init__(f"{what} at value{where}" if where else what)

    def inside(self, step: str) -> UnsafeValue:
        """The same error one container further out (``step`` is the index or field name)."""
        return UnsafeValue(self.what, step + self.where)


class NotSafeFormat(ValueError):
    """Bytes that are not a value :func:`dumps` wrote (the message says what is wrong, in one line)."""


# ---------------------------------------------------------------- encoding


def dumps(value: Any) -> bytes:
    """``torch.save`` of the encoded ``value`` (:func:`encode`) under the :data:`FORMAT` marker."""
    buf = io.BytesIO()
    torch.save({"format": FORMAT, "value": encode(value)}, buf)
    return buf.getvalue()


def encode(value: Any) -> Any:
    """The tree of weights-only types that :func:`decode` turns back into ``value``; an
    :class:`UnsafeValue` for anything the format does not hold."""
    kind = type(value)
    if kind in _PRIMITIVES or kind in (torch.Tensor, torch.nn.Parameter):
        return value
    if kind in (list, tuple, set, frozenset):
        return {"t": kind.__name__, "items": _encode_all(value)}
    if kind in (dict, collections.OrderedDict):
        keys = [_field(k, f" (the key {k!r})") for k in value]
        values = [_field(v, f"[{k!r}]") for k, v in value.items()]
        return {"t": "dict", "ordered": kind is collections.OrderedDict, "keys": keys, "values": values}
    if kind is bytes:
        return {"t": "bytes", "data": torch.from_numpy(np.frombuffer(value, dtype=np.uint8).copy())}
    if isinstance(value, pathlib.PurePath) and kind.__name__ in _PATHS:
        return {"t": "path", "class": kind.__name__, "text": str(value)}
    if kind is torch.dtype:
        return {"t": "torch.dtype", "name": str(value).removeprefix("torch.")}
    if kind is np.ndarray:
        return _encode_array(value)
    if isinstance(value, np.generic):
        return {"t": "npscalar", "array": _encode_array(np.asarray(value))}
    if kind is pd.DataFrame:
        return _encode_frame(value)
    if kind is pd.Series:
        return {
            "t": "series",
            "name": _field(value.name, ".name"),
            "index": _field(value.index, ".index", _encode_index),
            "values": _field(value, "", _encode_values),
        }
    if isinstance(value, pd.Index):
        return _encode_index(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _encode_dataclass(value)
    if class_name(kind) in STATEFUL:
        state = value.__getstate__()
        if type(state) is not dict:
            raise UnsafeValue(f"{class_name(kind)} gives a {type(state).__name__} as its state, not a dict")
        return {"t": "object", "class": class_name(kind), "state": _field(state, ".__getstate__()")}
    raise UnsafeValue(
        f"a {kind.__module__}.{kind.__qualname__} cannot be stored safely (the cache holds tensors, numpy arrays, "
        f"pandas frames, plain data and mechbook dataclasses)"
    )


def _field(value: Any, step: str, how=encode) -> Any:
    try:
        return how(value)
    except UnsafeValue as exc:
        raise exc.inside(step) from None


def _encode_all(items) -> list:
    return [_field(item, f"[{i}]") for i, item in enumerate(items)]


def _encode_array(array: np.ndarray) -> dict:
    dtype = array.dtype
    if dtype.hasobject:
        return {"t": "objarray", "shape": list(array.shape), "items": _encode_all(array.reshape(-1).tolist())}
    if dtype.kind not in _NUMPY_KINDS or dtype.fields is not None or dtype.itemsize == 0:
        raise UnsafeValue(f"a numpy array of dtype {dtype} cannot be stored safely (structured or void dtype)")
    order = "F" if array.flags.f_contiguous and not array.flags.c_contiguous else "C"  # kept, as pickle keeps it
    flat = array.ravel(order=order)
    if not flat.flags.writeable or not flat.flags.c_contiguous:
        flat = flat.copy()
    return {
        "t": "ndarray",
        "dtype": dtype.str,
        "shape": list(array.shape),
        "order": order,
        "data": torch.from_numpy(flat.view(np.uint8)),
    }


def _encode_values(values: pd.Series | pd.Index) -> dict:
    """A column's (or an index's) values with their dtype."""
    dtype = values.dtype
    if isinstance(dtype, np.dtype):
        return _encode_array(values.to_numpy())
    if isinstance(dtype, pd.StringDtype):
        na = dtype.na_value
        items = [None if v is na or (isinstance(v, float) and math.isnan(v)) else v for v in values.tolist()]
        return {"t": "strings", "storage": dtype.storage, "na": "nan" if na is not pd.NA else "NA", "items": items}
    if isinstance(dtype, pd.CategoricalDtype):
        cat = pd.Categorical(values)
        return {
            "t": "categorical",
            "categories": _encode_index(cat.categories),
            "codes": _encode_array(cat.codes),
            "ordered": bool(dtype.ordered),
        }
    raise UnsafeValue(f"a pandas column of dtype {dtype} cannot be stored safely (numpy, str or category dtypes can)")


def _encode_index(index: pd.Index) -> dict:
    name = _field(index.name, ".name") if not isinstance(index, pd.MultiIndex) else None
    if type(index) is pd.RangeIndex:
        return {"t": "rangeindex", "start": index.start, "stop": index.stop, "step": index.step, "name": name}
    if isinstance(index, pd.MultiIndex):
        return {
            "t": "multiindex",
            "levels": [_encode_index(level) for level in index.levels],
            "codes": [_encode_array(np.asarray(c)) for c in index.codes],
            "names": _encode_all(index.names),
        }
    return {"t": "index", "name": name, "values": _encode_values(index)}


def _encode_frame(frame: pd.DataFrame) -> dict:
    columns = []
    for i, label in enumerate(frame.columns):
        columns.append(_field(frame.iloc[:, i], f"[{label!r}]", _encode_values))
    return {
        "t": "dataframe",
        "index": _field(frame.index, ".index", _encode_index),
        "columns": _field(frame.columns, ".columns", _encode_index),
        "data": columns,
        "attrs": _field(dict(frame.attrs), ".attrs"),
    }


def _encode_dataclass(value: Any) -> dict:
    cls = type(value)
    name = class_name(cls)
    if not _NAME.fullmatch(name) or _resolve_or_none(name) is not cls:
        raise UnsafeValue(
            f"the dataclass {cls.__module__}.{cls.__qualname__} cannot be stored safely: only dataclasses defined at "
            f"the top of a mechbook module are rebuilt from a cache file"
        )
    fields = [f.name for f in dataclasses.fields(value)]
    extra = [k for k in getattr(value, "__dict__", {}) if k not in fields and not _derived(cls, k)]
    if extra:
        raise UnsafeValue(f"the {cls.__qualname__} holds attributes that are not fields ({extra}); they would be lost")
    return {"t": "dataclass", "class": name, "fields": {f: _field(getattr(value, f), f".{f}") for f in fields}}


def _derived(cls: type, attr: str) -> bool:
    """Whether ``attr`` is a ``functools.cached_property`` of ``cls`` (recomputed on demand)."""
    return isinstance(getattr(cls, attr, None), functools.cached_property)


def class_name(cls: type) -> str:
    """``module:qualname`` of ``cls``: how the format names a class."""
    return f"{cls.__module__}:{cls.__qualname__}"


# ---------------------------------------------------------------- decoding


def loads(data: bytes) -> Any:
    """The value :func:`dumps` wrote, its tensors on the CPU; read with
    ``torch.load(weights_only=True)``, so nothing in ``data`` can run code. A
    :class:`NotSafeFormat` (one line) for anything else."""
    try:
        top = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except Exception as exc:  # the weights-only unpickler refusing a global, or no torch file at all
        text = str(exc)
        found = re.search(r"GLOBAL ([\w.]+)", text)
        if found:
            why = f"it names {found.group(1)}, which only full pickle would load"
        elif "Weights only load failed" in text:
            why = "it holds objects that only full pickle would load"
        else:
            why = "it is not a file torch.save wrote"
        raise NotSafeFormat(
            f"not in mechbook's safe format ({why}): an older mechbook or another program wrote it"
        ) from None
    if not isinstance(top, dict) or top.get("format") != FORMAT or "value" not in top:
        got = top.get("format") if isinstance(top, dict) else type(top).__name__
        raise NotSafeFormat(f"not in mechbook's safe format {FORMAT!r} (found {got!r}): an older mechbook wrote it")
    try:
        return decode(top["value"])
    except NotSafeFormat:
        raise
    except (KeyError, TypeError, ValueError, AttributeError, IndexError, RecursionError) as exc:
        raise NotSafeFormat(f"a damaged safe-format file ({type(exc).__name__}: {exc})") from None


def decode(tree: Any) -> Any:
    """The value of an encoded tree (:func:`encode`)."""
    if type(tree) in _PRIMITIVES or isinstance(tree, torch.Tensor):
        return tree
    if type(tree) is not dict or not isinstance(tree.get("t"), str):
        raise NotSafeFormat(f"a damaged safe-format file (a bare {type(tree).__name__} where a node belongs)")
    kind = tree["t"]
    if kind in ("list", "tuple", "set", "frozenset"):
        return {"list": list, "tuple": tuple, "set": set, "frozenset": frozenset}[kind](map(decode, tree["items"]))
    if kind == "dict":
        pairs = zip(map(decode, tree["keys"]), map(decode, tree["values"]), strict=True)
        return collections.OrderedDict(pairs) if tree["ordered"] else dict(pairs)
    if kind == "bytes":
        return _uint8(tree["data"]).tobytes()
    if kind == "path":
        return _PATHS[tree["class"]](tree["text"])
    if kind == "torch.dtype":
        if tree["name"] not in _TORCH_DTYPES:
            raise NotSafeFormat(f"torch.{tree['name']} is not a torch dtype")
        return _TORCH_DTYPES[tree["name"]]
    if kind in ("ndarray", "objarray"):
        return _decode_array(tree)
    if kind == "npscalar":
        return _decode_array(tree["array"])[()]
    if kind == "dataframe":
        return _decode_frame(tree)
    if kind == "series":
        return pd.Series(_decode_values(tree["values"]), index=_decode_index(tree["index"]), name=decode(tree["name"]))
    if kind in ("index", "rangeindex", "multiindex"):
        return _decode_index(tree)
    if kind == "dataclass":
        return _decode_dataclass(tree)
    if kind == "object":
        return _decode_object(tree)
    raise NotSafeFormat(f"a damaged safe-format file (unknown node {kind!r})")


def _uint8(data: Any) -> np.ndarray:
    if not isinstance(data, torch.Tensor) or data.dtype != torch.uint8 or data.dim() != 1:
        raise NotSafeFormat("a damaged safe-format file (array bytes that are not a 1-d uint8 tensor)")
    return data.contiguous().numpy()


def _decode_array(tree: dict) -> np.ndarray:
    shape = tuple(tree["shape"])
    if not all(type(n) is int and n >= 0 for n in shape):
        raise NotSafeFormat(f"a damaged safe-format file (array shape {shape})")
    if tree["t"] == "objarray":
        items = [decode(v) for v in tree["items"]]
        out = np.empty(len(items), dtype=object)
        for i, item in enumerate(items):
            out[i] = item
        return out.reshape(shape)
    dtype = np.dtype(tree["dtype"])
    if dtype.hasobject or dtype.kind not in _NUMPY_KINDS or dtype.fields is not None or dtype.itemsize == 0:
        raise NotSafeFormat(f"a damaged safe-format file (array dtype {dtype})")
    raw = _uint8(tree["data"])
    if raw.size != math.prod(shape) * dtype.itemsize:
        raise NotSafeFormat(f"a damaged safe-format file ({raw.size} bytes for a {dtype} array of shape {shape})")
    return raw.view(dtype).reshape(shape, order="F" if tree["order"] == "F" else "C")


def _decode_values(tree: dict) -> Any:
    kind = tree["t"]
    if kind == "strings":
        na = np.nan if tree["na"] == "nan" else pd.NA
        return pd.array(tree["items"], dtype=pd.StringDtype(tree["storage"], na_value=na))
    if kind == "categorical":
        return pd.Categorical.from_codes(
            _decode_array(tree["codes"]), categories=_decode_index(tree["categories"]), ordered=tree["ordered"]
        )
    if kind in ("ndarray", "objarray"):
        return _decode_array(tree)
    raise NotSafeFormat(f"a damaged safe-format file (a {kind!r} node where column values belong)")


def _decode_index(tree: dict) -> pd.Index:
    kind = tree["t"]
    if kind == "rangeindex":
        return pd.RangeIndex(tree["start"], tree["stop"], tree["step"], name=decode(tree["name"]))
    if kind == "multiindex":
        return pd.MultiIndex(
            levels=[_decode_index(level) for level in tree["levels"]],
            codes=[_decode_array(c) for c in tree["codes"]],
            names=[decode(n) for n in tree["names"]],
        )
    if kind == "index":
        values = _decode_values(tree["values"])
        return pd.Index(values, dtype=values.dtype, name=decode(tree["name"]), copy=False)
    raise NotSafeFormat(f"a damaged safe-format file (a {kind!r} node where an index belongs)")


def _decode_frame(tree: dict) -> pd.DataFrame:
    index = _decode_index(tree["index"])
    columns = _decode_index(tree["columns"])
    data = [_decode_values(c) for c in tree["data"]]
    if len(data) != len(columns):
        raise NotSafeFormat(f"a damaged safe-format file ({len(data)} columns under {len(columns)} labels)")
    frame = pd.DataFrame(dict(enumerate(data)), index=index)
    frame.columns = columns
    frame.attrs = decode(tree["attrs"])
    return frame


def _decode_dataclass(tree: dict) -> Any:
    cls = resolve(tree["class"])
    if not dataclasses.is_dataclass(cls):
        raise NotSafeFormat(f"{tree['class']} is not a dataclass; the safe format rebuilds only mechbook dataclasses")
    names = {f.name for f in dataclasses.fields(cls)}
    fields = tree["fields"]
    if type(fields) is not dict or set(fields) != names:
        raise NotSafeFormat(f"the stored fields of {tree['class']} are not its fields: the file is from other code")
    obj = object.__new__(cls)
    for name, value in fields.items():
        object.__setattr__(obj, name, decode(value))
    return obj


def _decode_object(tree: dict) -> Any:
    name = tree["class"]
    if name not in STATEFUL:
        raise NotSafeFormat(f"{name} is not a class the safe format rebuilds from its state")
    cls = resolve(name)
    state = decode(tree["state"])
    if type(state) is not dict:
        raise NotSafeFormat(f"the stored state of {name} is not a dict")
    obj = object.__new__(cls)
    if hasattr(cls, "__setstate__"):
        obj.__setstate__(state)
    else:
        obj.__dict__.update(state)
    return obj


@functools.cache
def resolve(name: str) -> type:
    """The class ``module:qualname`` names: ``module`` must be a ``mechbook.`` module and the
    class must be the one defined there under ``qualname``; a :class:`NotSafeFormat` otherwise."""
    if type(name) is not str or not _NAME.fullmatch(name):
        raise NotSafeFormat(f"{name!r} does not name a class of a mechbook module; the safe format rebuilds no other")
    module, qualname = name.split(":")
    try:
        obj: Any = importlib.import_module(module)
    except ImportError:
        raise NotSafeFormat(f"{name}: there is no module {module} in this mechbook") from None
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
    if not isinstance(obj, type) or class_name(obj) != name:
        raise NotSafeFormat(f"{name} is not a class defined in {module}")
    return obj


def _resolve_or_none(name: str) -> type | None:
    try:
        return resolve(name)
    except NotSafeFormat:
        return None
