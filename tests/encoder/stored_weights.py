"""What a built model stores of its weights, read from its ONNX file."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import numpy_helper


def largest_int8_weight(model: onnx.ModelProto) -> int:
    """The largest magnitude among the model's int8 weights: 127 with 8-bit weights, 64 with 7."""
    stored = [
        numpy_helper.to_array(tensor).astype(np.int16)
        for tensor in model.graph.initializer
        if tensor.data_type == onnx.TensorProto.INT8
    ]
    return max(int(np.abs(values).max()) for values in stored)
