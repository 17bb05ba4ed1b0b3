"""``precision=`` for a browser folder: one or several dtypes, each written as its own file under the
name transformers.js loads for that dtype (``from_pretrained(..., {dtype})``).

=============  ====================  =====================  ==============================================
``precision``  transformers.js       file                   what the export writes (the ``web`` target's
                ``dtype``                                    forms of core's ``Precision``)
=============  ====================  =====================  ==============================================
``float32``    ``fp32``              ``model.onnx``         as traced
``float16``    ``fp16``              ``model_fp16.onnx``    ``Precision("float16")`` (I/O float32)
``int8``       ``q8``                ``model_quantized``    ``Precision("int8")``: weight-only int8
``int4``       ``q4``                ``model_q4.onnx``      ``Precision("int4")``: ``MatMulNBits``,
                                                            tables ``GatherBlockQuantized``
``q4f16``      ``q4f16``             ``model_q4f16.onnx``   ``int4``, then its float work in float16
                                                            (MatMulNBits' activations and scales too)
=============  ====================  =====================  ==============================================

A :class:`jax2onnx.Precision` of one of the first four kinds is taken too (its options kept).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from jax2onnx import Precision

from ..errors import OptionError


@dataclasses.dataclass(frozen=True)
class WebDtype:
    """One file of the folder: the name users give, transformers.js' dtype and file suffix, the
    precision core exports with, and whether its float work is then made float16 (``q4f16``)."""

    name: str
    transformers_js: str
    suffix: str
    precision: Any
    float16_after: bool = False
    #: bytes a float32 weight takes in this dtype (int4: half a byte plus a float32 scale and a
    #: 4-bit zero point per block of 32), for the size check before the export
    bytes_per_weight: float = 4.0

    @property
    def filename(self) -> str:
        return f"model{self.suffix}.onnx"


DTYPES = {
    "float32": WebDtype("float32", "fp32", "", "float32", bytes_per_weight=4.0),
    "float16": WebDtype("float16", "fp16", "_fp16", "float16", bytes_per_weight=2.0),
    "int8": WebDtype("int8", "q8", "_quantized", "int8", bytes_per_weight=1.0),
    # the web target's int4 form: MatMulNBits, the embedding table in the same 4-bit blocks
    # (GatherBlockQuantized), a float32 scale and a 4-bit zero point per block of 32
    "int4": WebDtype("int4", "q4", "_q4", "int4", bytes_per_weight=0.5 + 4.5 / 32),
    # int4, then core's float16 plan: MatMulNBits and the table gather read float16 scales
    "q4f16": WebDtype("q4f16", "q4f16", "_q4f16", "int4", float16_after=True, bytes_per_weight=0.5 + 2.5 / 32),
}


def check_web_options(cache: str, search: Any, external_data: Any) -> None:
    """What a transformers.js folder (a text decoder's or a multimodal model's) does not take,
    refused before the export."""
    if external_data is not None:
        raise OptionError("external_data=: a browser folder puts a file's weights in transformers.js' data chunks "
                          "itself, once the file would pass 2 GB; drop external_data=")
    if cache != "concat":
        raise OptionError(f"cache={cache!r}: transformers.js feeds a growing cache; pass cache='concat' for a browser "
                          "folder")
    if search is not None:
        raise OptionError("search= sets genai_config.json, which a browser folder does not have; drop it (its "
                          "generation_config.json holds the special tokens; transformers.js takes the rest per call)")


def web_dtypes(precision: Any) -> list[WebDtype]:
    """``precision=`` (one value or a tuple/list of them) as the files to write, in the order given;
    refuses an unknown value or two values writing the same file."""
    values = list(precision) if isinstance(precision, (tuple, list)) else [precision]
    if not values:
        raise OptionError("precision=(): give at least one dtype, e.g. precision=('float32', 'int4')")
    chosen: list[WebDtype] = []
    for value in values:
        dtype = _one(value)
        clash = next((d for d in chosen if d.filename == dtype.filename), None)
        if clash is not None:
            raise OptionError(f"precision={precision!r} names two precisions that both write onnx/{dtype.filename}; "
                              "give each dtype once")
        chosen.append(dtype)
    return chosen


def _one(value: Any) -> WebDtype:
    if isinstance(value, Precision):
        base = DTYPES.get(value.kind)
        if base is None or base.float16_after:
            raise OptionError(f"precision={value!r}: a browser folder takes Precision kinds "
                              f"{[k for k in DTYPES if k != 'q4f16']}; use one of them")
        batches = value.calibration  # () unless given; None and [] mean none too (parse_precision)
        if batches is not None and not (isinstance(batches, (list, tuple)) and not batches):
            raise OptionError("precision=Precision(..., calibration=...): calibrated int4 is not wired for a browser "
                              "folder yet; drop calibration= (round-to-nearest int4)")
        return dataclasses.replace(base, precision=value)
    if isinstance(value, str) and value in DTYPES:
        return DTYPES[value]
    raise OptionError(f"precision={value!r}: a browser folder takes {list(DTYPES)} (transformers.js' fp32, fp16, q8, "
                      "q4, q4f16), a jax2onnx.Precision, or a tuple of them")
