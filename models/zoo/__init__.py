"""The model zoo: one module per model, each with `build(seed=0) -> onnx.ModelProto`."""
