"""The export: the front door ``to_onnx`` (conversion) over typed stages, each in its module:
options (``ExportOptions``, ``Export``) → trace (``Traced``) → lowering (``onnx_ir.Model``) →
optimize (one PassManager) → write (``Artifact``) → verify (``ExportReport``); with the input
specs (specs), the 0.17 option layer (api_compat) and 0.17's ``allclose`` (allclose_compat), lazy
weights (weights) and atomic files (saving).
"""
