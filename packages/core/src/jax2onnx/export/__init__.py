"""Stage 1, the export front-end: ``to_onnx`` (conversion), its input specs and options (specs,
api_compat: the 0.17 option layer), lazy weights, and writing the model file (saving).
"""
