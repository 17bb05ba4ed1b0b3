"""The ONNX side: building ``onnx_ir`` graphs typed from ONNX schemas (builder), rewriting each
node into the export opset's form (legalize), what each opset offers (opsets), walking protos,
and what the target onnxruntime runs (``runtime``: the kernel tables ``ort_kernels/<version>.json``
measured by ``kernel_probe``).
"""
