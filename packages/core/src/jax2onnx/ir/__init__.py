"""The ONNX side: building ``onnx_ir`` graphs typed from ONNX schemas (builder), rewriting each
node into the export opset's form (legalize), what each opset offers (opsets), walking protos,
and the measured onnxruntime kernel table (``ort_kernels.json``).
"""
