"""Causal LMs for the browser: ``export_causal_lm(model, folder, target=<a target declaring
TRANSFORMERS_JS>, precision=...)`` writes the folder transformers.js (npm ``@huggingface/transformers``,
onnxruntime-web underneath) loads. See ``layout.py`` for the folder, ``graph.py`` for the graph's
conventions, ``dtypes.py`` for the files per precision, ``limits.py`` for the browser's limits."""

from __future__ import annotations

from ..genai_targets import TRANSFORMERS_JS
from .dtypes import DTYPES, WebDtype, web_dtypes
from .layout import REPORT_FILE, write_web_folder

__all__ = ["DTYPES", "REPORT_FILE", "TRANSFORMERS_JS", "WebDtype", "web_dtypes", "write_web_folder"]
